# Rudder GPU worker image: CUDA runtime + cupy, one Celery worker process per GPU.
# Build from the repository root:  docker build -f docker/worker.Dockerfile -t rudder-worker .
# The same image serves the cpu queue (cupy stays unused when no GPU is visible).
FROM nvidia/cuda:12.6.3-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RUDDER_ENVIRONMENT=production \
    PATH=/opt/venv/bin:$PATH

# libgomp1: the OpenMP runtime numba's parallel loops run on (the engine's kernels use all
# the cores given; without it they run on one thread, engine/ndarray/kernel_threads.py)
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-pip libgomp1 \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

WORKDIR /app
COPY pyproject.toml README.md ./
RUN mkdir -p engine api core workers rudder migrations \
    && touch engine/__init__.py api/__init__.py core/__init__.py workers/__init__.py \
       rudder/__init__.py migrations/__init__.py \
    && pip install --extra-index-url https://download.pytorch.org/whl/cpu ".[gpu,dist]" \
    && pip uninstall -y rudder
COPY alembic.ini ./
COPY engine ./engine
COPY core ./core
COPY workers ./workers
COPY rudder ./rudder
COPY migrations ./migrations
RUN pip install --no-deps . \
    && useradd --system --uid 10001 rudder
USER rudder

# --pool=solo: training runs in the worker's main process, so SIGTERM/SIGKILL of the
# container really stops it (no orphaned prefork child), and the lease watchdog thread
# lives next to it. One process per GPU (design.md); scale with more containers.
CMD ["celery", "-A", "workers.celery_app", "worker", "-Q", "gpu,cpu", "--pool=solo", \
     "--concurrency=1", "--loglevel=INFO"]
