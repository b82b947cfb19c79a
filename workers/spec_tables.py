"""Generate core/spec_tables.json: per class, the parameters a job spec may pass.

The api validates specs without importing the engine, so it reads a checked-in table;
this module regenerates that table from the engine's constructors (walking each class's
``__init__`` chain while it forwards ``**kwargs``). tests/workers/test_spec_tables.py
regenerates it and fails on any difference, so an engine change that adds, drops or
retypes a parameter cannot drift past the api unnoticed.

    python -m workers.spec_tables            # rewrite core/spec_tables.json
    python -m workers.spec_tables --check    # exit 1 if the checked-in table is stale
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

from engine import initializer, lr_scheduler
from engine.gluon.loss import LOSSES
from engine.metric.base import METRICS
from engine.optimizer.optimizer import _REGISTRY as OPTIMIZERS
from engine.registry import Registry

TABLE_PATH = Path(__file__).resolve().parent.parent / "core" / "spec_tables.json"

# The names a spec may use, per kind: the engine registers more (aliases, test-only and
# composite classes whose arguments are objects) than a declarative spec can express.
OFFERED: dict[str, tuple[str, ...]] = {
    "optimizer": ("sgd", "nag", "rmsprop", "adam", "adagrad", "adadelta", "adamax", "nadam",
                  "dcasgd", "sgld", "signum", "ftml", "lbsgd", "ftrl", "lamb", "lars", "adamw"),
    "lr_scheduler": ("factor", "multifactor", "poly", "cosine"),
    "loss": ("softmax_cross_entropy", "l2", "l1", "sigmoid_binary_cross_entropy", "huber",
             "kl_div"),
    "initializer": ("uniform", "normal", "zero", "one", "constant", "orthogonal", "xavier",
                    "msraprelu", "bilinear"),
    "metric": ("accuracy", "top_k_accuracy", "f1", "mcc", "mae", "mse", "rmse",
               "cross-entropy", "ce", "nll_loss", "perplexity", "pearsonr", "loss"),
}

# Constructor arguments the service sets itself (or that are objects, not spec values).
SERVICE_OWNED: dict[str, frozenset[str]] = {
    "optimizer": frozenset({"param_idx2name", "lr_scheduler", "sym", "begin_num_update",
                            "param_dict"}),
    "lr_scheduler": frozenset(),
    "loss": frozenset({"prefix", "params"}),
    "initializer": frozenset(),
    "metric": frozenset({"name", "output_names", "label_names"}),
}

_REGISTRIES: dict[str, Registry] = {
    "optimizer": OPTIMIZERS,
    "lr_scheduler": lr_scheduler._REGISTRY,
    "loss": LOSSES,
    "initializer": initializer._REGISTRY,
    "metric": METRICS,
}

_SCALARS = {"float": "number", "int": "integer", "bool": "boolean", "str": "string"}
_LISTS = {"list[int]": "integer_list", "list[float]": "number_list"}


def _value_type(annotation: str, default: Any, where: str) -> tuple[str, bool]:
    """(json-ish type, nullable) of one annotated parameter."""
    parts = [p.strip() for p in annotation.split("|")]
    nullable = "None" in parts or default is None and default is not inspect.Parameter.empty
    parts = [p for p in parts if p != "None"]
    if parts == ["Any"]:
        # Constant(value) takes anything array-like; a spec passes a number.
        if default is inspect.Parameter.empty or isinstance(default, int | float):
            return "number", nullable
    if len(parts) == 1 and parts[0] in _SCALARS:
        return _SCALARS[parts[0]], nullable
    if len(parts) == 1 and parts[0] in _LISTS:
        return _LISTS[parts[0]], nullable
    raise TypeError(f"{where}: no spec type for annotation {annotation!r}")


def class_parameters(cls: type, kind: str) -> dict[str, dict[str, Any]]:
    """The spec-visible constructor parameters of ``cls`` (first definition wins)."""
    params: dict[str, dict[str, Any]] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        signature = inspect.signature(vars(klass)["__init__"])
        forwards = False
        for name, parameter in list(signature.parameters.items())[1:]:
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                forwards = True
                continue
            if name in params or name in SERVICE_OWNED[kind]:
                continue
            annotation = parameter.annotation
            annotation = annotation if isinstance(annotation, str) else "Any"
            default = parameter.default
            value_type, nullable = _value_type(annotation, default, f"{cls.__name__}.{name}")
            entry: dict[str, Any] = {"type": value_type, "nullable": nullable}
            if default is inspect.Parameter.empty:
                entry["required"] = True
            else:
                entry["default"] = default
            params[name] = entry
        if not forwards:
            break
    return dict(sorted(params.items()))


def build_tables() -> dict[str, dict[str, Any]]:
    """``{kind: {name: {"class": ..., "params": {...}}}}`` from the engine's registries."""
    tables: dict[str, dict[str, Any]] = {}
    for kind, names in OFFERED.items():
        registry = _REGISTRIES[kind]
        tables[kind] = {}
        for name in names:
            cls = registry.get(name)
            tables[kind][name] = {"class": cls.__name__, "params": class_parameters(cls, kind)}
    return tables


def render(tables: dict[str, dict[str, Any]]) -> str:
    return json.dumps(tables, indent=1, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    text = render(build_tables())
    if "--check" in argv:
        if TABLE_PATH.read_text() != text:
            print(f"{TABLE_PATH} is stale; run python -m workers.spec_tables", file=sys.stderr)
            return 1
        return 0
    TABLE_PATH.write_text(text)
    print(f"wrote {TABLE_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
