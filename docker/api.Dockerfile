# Rudder API image: FastAPI on uvicorn. Also runs the migrations (`alembic upgrade head`)
# as the compose `migrate` service, so the schema is in place before the API starts.
# Build from the repository root:  docker build -f docker/api.Dockerfile -t rudder-api .
FROM python:3.11.10-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RUDDER_ENVIRONMENT=production

WORKDIR /app
# Dependencies first, so code edits do not re-install them; with the `dist` extra (the CPU
# build of torch, whose Gloo collectives a job on several workers trains through: the
# compose CPU worker runs this image).
COPY pyproject.toml README.md ./
RUN mkdir -p engine api core workers rudder migrations \
    && touch engine/__init__.py api/__init__.py core/__init__.py workers/__init__.py \
       rudder/__init__.py migrations/__init__.py \
    && pip install --extra-index-url https://download.pytorch.org/whl/cpu ".[dist]" \
    && pip uninstall -y rudder
COPY alembic.ini ./
COPY engine ./engine
COPY core ./core
COPY api ./api
COPY workers ./workers
COPY rudder ./rudder
COPY migrations ./migrations
RUN pip install --no-deps . \
    && useradd --system --uid 10001 rudder
USER rudder

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz').status != 200)"
# No per-request access log line (CPU on the hot path); requests are counted in /metrics.
CMD ["uvicorn", "api.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8000", \
     "--proxy-headers", "--forwarded-allow-ips", "*", "--no-access-log", \
     "--http", "api.http_protocol:ApiHttpProtocol"]
