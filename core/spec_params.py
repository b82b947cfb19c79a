"""Per-class parameter tables for a job spec's named components, and their checks.

The names and parameters come from ``core/spec_tables.json``, generated from the engine's
constructors by :mod:`workers.spec_tables` (a test regenerates it and fails on any
difference). The engine's signatures say names, types and defaults; what they cannot say
(ranges, allowed strings) is written here, keyed by ``kind.param`` or ``param``.

>>> check_component("optimizer", "adam", {"epsilon": 1e-8})
>>> check_component("optimizer", "adam", {"momentum": 0.9})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: adam takes no parameter momentum; allowed: beta1, beta2, clip_gradient, ...
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from core.suggest import closest

TABLES_PATH = Path(__file__).resolve().parent / "spec_tables.json"
Kind = Literal["optimizer", "lr_scheduler", "loss", "initializer", "metric"]
KINDS: tuple[Kind, ...] = ("optimizer", "lr_scheduler", "loss", "initializer", "metric")
MAX_LIST = 1024
MAX_STRING = 64


@dataclass(frozen=True)
class Bounds:
    """An allowed interval; ``None`` leaves that side open."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def violation(self, value: float) -> str | None:
        if self.ge is not None and value < self.ge:
            return f">= {self.ge:g}"
        if self.gt is not None and value <= self.gt:
            return f"> {self.gt:g}"
        if self.le is not None and value > self.le:
            return f"<= {self.le:g}"
        if self.lt is not None and value >= self.lt:
            return f"< {self.lt:g}"
        return None

    def describe(self) -> str:
        sides = [f"{op} {v:g}" for op, v in (("≥", self.ge), (">", self.gt), ("≤", self.le),
                                              ("<", self.lt)) if v is not None]
        return " and ".join(sides)


_PROBABILITY = Bounds(ge=0.0, lt=1.0)
_POSITIVE = Bounds(gt=0.0)
_NON_NEGATIVE = Bounds(ge=0.0)
_AXIS = Bounds(ge=-8, le=8)
_STEPS = Bounds(ge=1, le=10**12)

# Ranges the engine's signatures cannot express. "kind.param" wins over "param".
BOUNDS: dict[str, Bounds] = {
    "learning_rate": _POSITIVE,
    "base_lr": _POSITIVE,
    "final_lr": _NON_NEGATIVE,
    "warmup_begin_lr": _NON_NEGATIVE,
    "stop_factor_lr": _NON_NEGATIVE,
    "warmup_steps": Bounds(ge=0, le=10**12),
    "max_update": _STEPS,
    "step": _STEPS,
    "factor": Bounds(gt=0.0, le=1.0),
    "pwr": _POSITIVE,
    "wd": _NON_NEGATIVE,
    "wd_lh": _NON_NEGATIVE,
    "rescale_grad": _POSITIVE,
    "clip_gradient": _POSITIVE,
    "clip_weights": _POSITIVE,
    "momentum": _PROBABILITY,
    "beta1": _PROBABILITY,
    "beta2": _PROBABILITY,
    "gamma1": _PROBABILITY,
    "gamma2": _PROBABILITY,
    "optimizer.rho": _PROBABILITY,
    "loss.rho": _POSITIVE,
    "epsilon": _POSITIVE,
    "eps": _NON_NEGATIVE,
    "schedule_decay": _NON_NEGATIVE,
    "lamda": _NON_NEGATIVE,
    "lamda1": _NON_NEGATIVE,
    "beta": _NON_NEGATIVE,
    "eta": _POSITIVE,
    "lower_bound": _NON_NEGATIVE,
    "upper_bound": _POSITIVE,
    "batch_scale": Bounds(ge=1, le=1_000_000),
    "warmup_epochs": Bounds(ge=0, le=1_000_000),
    "updates_per_epoch": Bounds(ge=1, le=10**9),
    "begin_epoch": Bounds(ge=0, le=1_000_000),
    "num_epochs": Bounds(ge=1, le=1_000_000),
    "axis": _AXIS,
    "batch_axis": _AXIS,
    "weight": Bounds(ge=-1e6, le=1e6),
    "margin": _NON_NEGATIVE,
    "scale": _POSITIVE,
    "sigma": _POSITIVE,
    "magnitude": _POSITIVE,
    "slope": _NON_NEGATIVE,
    "value": Bounds(ge=-1e6, le=1e6),
    "top_k": Bounds(ge=2, le=1000),  # the engine refuses 1 ("use Accuracy")
    "ignore_label": Bounds(ge=-(2**31), le=2**31 - 1),
}

# Strings the engine accepts, where a parameter is a choice.
CHOICES: dict[str, tuple[str, ...]] = {
    "warmup_mode": ("linear", "constant"),
    "warmup_strategy": ("linear", "power2", "sqrt", "lars"),
    "rnd_type": ("uniform", "gaussian"),
    "rand_type": ("uniform", "normal"),
    "factor_type": ("avg", "in", "out"),
    "label_format": ("signed", "binary"),
    "average": ("macro", "micro"),
}


@cache
def tables() -> dict[str, dict[str, Any]]:
    """``{kind: {name: {"class", "params": {param: {type, nullable, default|required}}}}}``."""
    return json.loads(TABLES_PATH.read_text())  # type: ignore[no-any-return]


def names(kind: Kind) -> tuple[str, ...]:
    """The names a spec may give for ``kind``, in the table's order."""
    return tuple(tables()[kind])


def parameters(kind: Kind, name: str) -> dict[str, dict[str, Any]]:
    return tables()[kind][name]["params"]  # type: ignore[no-any-return]


def bounds_for(kind: str, param: str) -> Bounds | None:
    return BOUNDS.get(f"{kind}.{param}") or BOUNDS.get(param)


def check_name(kind: Kind, value: str) -> str:
    """The canonical (lower-case) name, or a ValueError listing the allowed ones."""
    allowed = names(kind)
    if value.lower() not in allowed:
        raise ValueError(f"unknown {kind} {value!r}; expected one of: {', '.join(allowed)}")
    return value.lower()


def _type_error(param: str, expected: str, value: Any) -> ValueError:
    return ValueError(f"{param} must be {expected}, got {value!r}")


def check_value(kind: str, param: str, entry: dict[str, Any], value: Any) -> None:
    """Raise ValueError (naming ``param``) unless ``value`` fits the table entry."""
    if value is None:
        if entry["nullable"]:
            return
        raise ValueError(f"{param} must not be null")
    value_type = entry["type"]
    if value_type == "boolean":
        if not isinstance(value, bool):
            raise _type_error(param, "true or false", value)
        return
    if value_type == "string":
        if not isinstance(value, str) or len(value) > MAX_STRING:
            raise _type_error(param, f"a string of at most {MAX_STRING} characters", value)
        choices = CHOICES.get(param)
        if choices and value not in choices:
            raise ValueError(f"{param} must be one of {', '.join(choices)}, got {value!r}")
        return
    if value_type in ("integer_list", "number_list"):
        if not isinstance(value, list) or not value or len(value) > MAX_LIST:
            raise _type_error(param, f"a list of 1 to {MAX_LIST} numbers", value)
        item_type = "integer" if value_type == "integer_list" else "number"
        for item in value:
            _check_number(kind, param, item_type, item)
        return
    _check_number(kind, param, value_type, value)


def _check_number(kind: str, param: str, value_type: str, value: Any) -> None:
    # bool is an int subclass in Python; a spec's true is never a number.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _type_error(param, "an integer" if value_type == "integer" else "a number", value)
    if value_type == "integer" and not isinstance(value, int):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise _type_error(param, "an integer", value)
    if not math.isfinite(value):
        raise ValueError(f"{param} must be finite, got {value!r}")
    bounds = bounds_for(kind, param)
    broken = bounds.violation(float(value)) if bounds else None
    if broken:
        raise ValueError(f"{param} must be {broken}, got {value!r}")


def _needs_value(kind: str, param: str, entry: dict[str, Any]) -> bool:
    """Required by the engine, or its default is one the engine itself refuses
    (``top_k_accuracy``'s ``top_k=1``)."""
    if entry.get("required"):
        return True
    default, bounds = entry.get("default"), bounds_for(kind, param)
    return isinstance(default, int | float) and bounds is not None and bool(
        bounds.violation(float(default))
    )


def check_component(kind: Kind, name: str, params: dict[str, Any]) -> None:
    """Every parameter known to this class, of its type and in range; required ones given."""
    table = parameters(kind, name)
    unknown = sorted(set(params) - set(table))
    if unknown:
        allowed = ", ".join(table) or "none"
        meant = [m for m in (closest(u, table) for u in unknown) if m is not None]
        hint = f"did you mean {', '.join(meant)}? " if meant else ""
        raise ValueError(
            f"{name} takes no parameter {', '.join(unknown)}; {hint}allowed: {allowed}"
        )
    missing = [p for p, entry in table.items() if p not in params and _needs_value(kind, p, entry)]
    if missing:
        raise ValueError(f"{name} needs parameter {', '.join(missing)}")
    for param, value in params.items():
        check_value(kind, param, table[param], value)
