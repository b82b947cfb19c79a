"""Docker cannot run here; these checks keep docker/ honest by reading it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DOCKER / "compose.yaml").read_text()))


def _module_attr(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def test_compose_has_the_production_services_in_order() -> None:
    services = _compose()["services"]
    assert {"postgres", "redis", "minio", "migrate", "api", "worker"} <= set(services)
    assert services["migrate"]["command"] == ["alembic", "upgrade", "head"]
    for name in ("api", "worker"):
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}
    # The default worker runs on CPU; the GPU one is under the `gpu` profile (issue 15.13).
    assert "deploy" not in services["worker"] and services["gpu-worker"]["profiles"] == ["gpu"]
    gpu = services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["driver"] == "nvidia" and "gpu" in gpu["capabilities"]
    env = services["api"]["environment"]
    assert env["RUDDER_DATABASE_URL"].startswith("postgresql://")
    assert env["RUDDER_STORAGE_URL"].startswith("s3://")
    assert env["RUDDER_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert "?" in env["RUDDER_SECRET_KEY"]  # compose refuses to start without a secret


def test_the_cpu_worker_scales() -> None:
    """`docker compose up --scale worker=N` (a job on N workers): nothing in the worker
    service may be one of a kind per host (a fixed container name, a published port, a
    fixed Celery node name)."""
    worker = _compose()["services"]["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert "-n" not in worker["command"] and "--hostname" not in worker["command"]
    assert "--scale worker=" in (DOCKER / "compose.yaml").read_text()


def test_commands_name_real_modules() -> None:
    services = _compose()["services"]
    api_cmd = services["api"]["command"]
    factory = _module_attr(api_cmd[api_cmd.index("uvicorn") + 1])
    assert "--factory" in api_cmd and callable(factory)
    # The parser's refusals answered in the API's error shape (issue 25 item 11).
    assert _module_attr(api_cmd[api_cmd.index("--http") + 1]).__name__ == "ApiHttpProtocol"
    queues: set[str] = set()
    # Between them they serve every queue; the validator only validates (issue 26.3).
    for name, task in (("worker", "rudder.train"), ("gpu-worker", "rudder.train"),
                       ("validator", "rudder.validate_dataset")):
        worker_cmd = services[name]["command"]
        app = importlib.import_module(worker_cmd[worker_cmd.index("-A") + 1]).app
        for module in app.conf.imports:  # what `celery worker` imports at start-up
            importlib.import_module(module)
        assert task in app.tasks
        queues |= set(worker_cmd[worker_cmd.index("-Q") + 1].split(","))
    assert queues == {q.name for q in app.conf.task_queues}
    assert services["validator"]["command"][services["validator"]["command"].index("-Q") + 1] \
        == "datasets"
    assert (ROOT / "alembic.ini").exists()


def test_dockerfiles_copy_paths_that_exist_and_run_the_compose_commands() -> None:
    for name in ("api.Dockerfile", "worker.Dockerfile"):
        text = (DOCKER / name).read_text()
        for source in re.findall(r"^COPY (\S+)", text, flags=re.M):
            assert (ROOT / source).exists(), f"{name}: COPY {source} does not exist"
        assert "USER rudder" in text
    worker = (DOCKER / "worker.Dockerfile").read_text()
    assert "nvidia/cuda" in worker and '".[gpu,dist]"' in worker
    api = (DOCKER / "api.Dockerfile").read_text()
    # the compose CPU worker runs the api image: a job on several workers needs Gloo
    assert '".[dist]"' in api and "download.pytorch.org/whl/cpu" in api
    assert '"api.main:create_app", "--factory"' in api
    assert '"--http", "api.http_protocol:ApiHttpProtocol"' in api
