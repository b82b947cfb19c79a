"""Elementwise operators: the output has the input's shape (unary, with or without
attributes), the inputs' broadcast shape (binary), or the common shape (n-ary sums)."""

from __future__ import annotations

from typing import Any

import numpy

from . import Shape, normalize_axis, prod, rule
from .domains import AXIS, BOOL, DTYPE, OPT_AXIS, OPT_DTYPE, OPT_REAL, REAL, choice, integer, real

UNARY = (
    "abs", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "cbrt", "ceil",
    "cos", "cosh", "degrees", "erf", "erfinv", "exp", "expm1", "fix", "floor", "gamma",
    "gammaln", "isfinite", "isinf", "isnan", "log", "log10", "log1p", "log2", "logical_not",
    "radians", "rcbrt", "reciprocal", "relu", "rint", "round", "rsqrt", "sigmoid", "sign",
    "sin", "sinh", "softsign", "sqrt", "square", "tan", "tanh", "trunc", "stop_gradient",
    "identity", "make_loss", "zeros_like", "ones_like", "shuffle",
)


def same(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return shapes[0]


rule(*UNARY)(same)
# BlockGrad is stop_gradient's MXNet name, but engine.nd has both
rule("BlockGrad")(same)
rule("clip", attrs={"a_min": OPT_REAL, "a_max": OPT_REAL}, required=("a_min", "a_max"))(same)
rule("hard_sigmoid", attrs={"alpha": REAL, "beta": REAL})(same)
rule("smooth_l1", attrs={"scalar": REAL})(same)
rule("full_like", attrs={"fill_value": REAL}, required=("fill_value",))(same)
rule("Cast", "cast", "amp_cast", attrs={"dtype": DTYPE}, required=("dtype",))(same)
rule("SoftmaxActivation", attrs={"mode": choice("instance", "channel")})(same)
rule("L2Normalization", attrs={"eps": real(low=0), "mode": choice("instance", "channel",
                                                                    "spatial")})(same)
rule("LRN", attrs={"alpha": REAL, "beta": REAL, "knorm": REAL, "nsize": integer(low=1)})(same)
rule("MakeLoss", attrs={"grad_scale": REAL, "valid_thresh": REAL,
                        "normalization": choice("null", "batch", "valid")})(same)


@rule("softmax", "log_softmax", "softmin",
      attrs={"axis": AXIS, "temperature": OPT_REAL})
def _along_axis(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    normalize_axis(p.get("axis", -1), len(shapes[0]))
    return shapes[0]


@rule("sort", attrs={"axis": OPT_AXIS, "is_ascend": BOOL})
@rule("argsort", attrs={"axis": OPT_AXIS, "is_ascend": BOOL, "dtype": DTYPE})
def _sorted(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    axis = p.get("axis", -1)
    if axis is None:  # sorted as one flat array
        return (prod(shapes[0]),)
    normalize_axis(axis, len(shapes[0]))
    return shapes[0]


@rule("cumsum", attrs={"axis": OPT_AXIS, "dtype": OPT_DTYPE})
def _cumsum(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    return _sorted({"axis": p.get("axis")}, shapes)


BINARY = (
    "add", "subtract", "multiply", "divide", "true_divide", "modulo", "power", "maximum",
    "minimum", "equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal",
    "logical_and", "logical_or", "logical_xor", "hypot", "broadcast_equal",
    "broadcast_not_equal", "broadcast_greater", "broadcast_greater_equal", "broadcast_lesser",
    "broadcast_lesser_equal", "broadcast_logical_and", "broadcast_logical_or",
    "broadcast_logical_xor", "broadcast_hypot", "broadcast_maximum", "broadcast_minimum",
    "broadcast_minus", "broadcast_plus", "broadcast_power", "broadcast_mod",
)


@rule(*BINARY, attrs={"lhs": REAL, "rhs": REAL}, inputs=(1, 2))
def broadcast(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    """Two arrays broadcast together; one array and a number (an attribute) keep the
    array's shape."""
    try:
        return tuple(int(d) for d in numpy.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"shapes {' and '.join(map(str, shapes))} do not broadcast") from None


@rule("add_n", "ElementWiseSum", inputs=(1, None))
def _common(p: dict[str, Any], shapes: list[Shape]) -> Shape:
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"every input must have the same shape, got {shapes}")
    return shapes[0]

