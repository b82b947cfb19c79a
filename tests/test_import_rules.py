"""The folders are the architecture: check who may import whom (design.md, 'Import rules').

- engine imports nothing of ours and no service library (it is a pure library);
- core imports nothing of ours (engine only in the worker-side adapter module);
- api imports core (and the Celery app object to enqueue by name), never engine (not even
  lazily: issue 25 moved model inspection and schedule previews to the inspector process)
  nor workers' training code;
- workers import core and engine; migrations import core.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVICE_LIBS = {"redis", "sqlalchemy", "celery", "fastapi", "starlette", "alembic", "boto3",
                "uvicorn", "httpx", "pydantic_settings"}
OURS = {"engine", "api", "core", "workers", "rudder", "migrations"}

# package -> packages of ours it may import
ALLOWED = {
    "engine": set(),
    "core": set(),
    "api": {"core", "workers"},
    "workers": {"core", "engine"},
    "migrations": {"core"},
    "rudder": {"core", "api", "workers"},  # the CLI starts the processes
}
# modules allowed an exception, each with the reason
EXCEPTIONS = {
    # api may import only the Celery app object (to enqueue by name), not tasks or runner;
    # what needs the engine runs in the inspector process (workers/inspector), whose
    # questions and answers are core.inspection's models
    ("api", "workers"): {"*:workers.celery_app"},
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py")) if (ROOT / package).is_dir() else []


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_follow_the_architecture(package):
    violations = []
    for path in _files(package):
        rel = str(path.relative_to(ROOT))
        for name in _imports(path):
            top = name.split(".")[0]
            if package == "engine" and top in SERVICE_LIBS:
                violations.append(f"{rel}: imports {name} (the engine must stay a pure library)")
            if top in OURS and top != package and top not in ALLOWED[package]:
                allowed = EXCEPTIONS.get((package, top), set())
                if rel not in allowed:
                    violations.append(f"{rel}: imports {name}")
            if (package, top) in EXCEPTIONS and top in ALLOWED[package]:
                rules = EXCEPTIONS[(package, top)]
                wild = {r.split(":", 1)[1] for r in rules if r.startswith("*:")}
                if wild and name not in wild and not any(name.startswith(w) for w in wild):
                    violations.append(f"{rel}: imports {name} (only {sorted(wild)} allowed)")
    assert not violations, "\n".join(violations)


def test_nothing_saved_or_loaded_uses_pickle():
    offenders = []
    for package in ALLOWED:
        for path in _files(package):
            text = path.read_text()
            for needle in ("import pickle", "allow_pickle=True", "cloudpickle", "import dill"):
                if needle in text:
                    offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert not offenders, "\n".join(offenders)


# Redis stream commands: core/channel.py is the only codec of the live channel.
STREAM_COMMANDS = {"xadd", "xread", "xreadgroup", "xrange", "xrevrange"}
# Calls that carry an event or a command; they must be given core.events models.
MESSAGE_CALLS = {"publish", "publish_many", "send_command"}
MESSAGE_TYPES = {"metric", "lr", "status", "checkpoint", "log", "set_lr", "pause", "cancel"}


def _payload_violations(path: Path) -> list[str]:
    rel = path.relative_to(ROOT)
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        if name in STREAM_COMMANDS:
            found.append(f"{rel}:{node.lineno}: calls {name} (only core.channel reads/writes "
                         "the streams)")
        if name in MESSAGE_CALLS:
            for arg in node.args:
                typed_by_name = isinstance(arg, ast.Constant) and arg.value in MESSAGE_TYPES
                if typed_by_name or isinstance(arg, ast.Dict | ast.List | ast.Tuple):
                    found.append(f"{rel}:{node.lineno}: {name}() given a hand-built payload "
                                 "(pass a core.events model)")
    return found


@pytest.mark.parametrize("package", ["api", "workers"])
def test_api_and_workers_send_only_core_event_and_command_models(package):
    """Issue 9: events and commands are core's models, encoded by core.channel alone."""
    violations = [v for path in _files(package) for v in _payload_violations(path)]
    assert not violations, "\n".join(violations)


def test_routes_reach_the_database_only_through_services():
    """routes -> services -> repositories: no route imports repositories or SQLAlchemy."""
    violations = []
    for path in _files("api/routes"):
        for name in _imports(path):
            if name.split(".")[0] == "sqlalchemy" or name == "core.repositories":
                violations.append(f"{path.relative_to(ROOT)}: imports {name}")
        text = path.read_text()
        if "from core import repositories" in text or "repositories." in text:
            violations.append(f"{path.relative_to(ROOT)}: uses core.repositories")
    assert not violations, "\n".join(violations)


def test_raw_arrays_are_read_through_the_public_accessor_outside_ndarray():
    # NDArray._data is the ndarray package's own slot; everything else reads NDArray.raw
    # (and a Parameter's per-context arrays are _ctx_data, a different thing by name).
    offenders = []
    paths = [p for package in ("engine", "workers", "core", "api", "tests")
             for p in _files(package)]
    for path in paths + sorted((ROOT / "bench").glob("*.py")):  # not bench/.anchors' venvs
        rel = path.relative_to(ROOT)
        if rel.parts[:2] != ("engine", "ndarray"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\._data\b", line) and rel.name != "test_import_rules.py":
                    offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
