"""MXNet's shape inference rules for :mod:`.inference`: partial shapes in both directions.

A partial shape is ``None`` (nothing known, not even the number of dimensions) or a tuple
whose unknown dimensions are ``-1`` (the form MXNet's numpy-shape mode shows; its legacy
mode shows them as 0 and an unknown shape as ``()``, converted at the Symbol API).

Forward, an operator's own ``OpSpec.infer`` computes its output (and the shapes of the
inputs it creates: weights, biases, labels) from known input shapes. With unknown
dimensions it runs twice, the unknown sizes replaced by two different stand-ins: an
output dimension that comes out the same both times does not depend on them. Backward,
as MXNet does it (read off MXNet 1.9.1's answers, operator by operator):

- elementwise operators (``a + b``, ``x * 2``, ``relu``, ``sin``, ``Cast``, ...) give their
  inputs the output's shape; ``elemwise_*`` also unify their two inputs;
- ``broadcast_*`` combine dimension by dimension, an unknown size staying unknown;
- ``FullyConnected`` and ``Convolution`` learn the batch size from the output (a
  convolution also each spatial size where its stride is 1), ``Reshape`` the one unknown
  input size the output's size determines, ``Concat`` every dimension but the joined one,
  ``SliceChannel``/``split`` the dimensions that are not split.

Other operators (``BatchNorm``, ``Dropout``, ``softmax``, ``SoftmaxOutput``, ...) do not
learn their inputs from their outputs in MXNet, and do not here.
"""

from __future__ import annotations

import math
from typing import Any

from .inference import Conflict, RuleError

Partial = tuple[int, ...] | None
UNKNOWN = -1
_STAND_INS = (37, 53)  # two unlikely sizes for the unknown dimensions (see the docstring)

# Operators whose output has their first input's shape and whose input takes the output's
# (MXNet's elementwise unary and scalar operators, and the other same-shape ones).
SAME_AS_FIRST = frozenset({
    "Activation", "relu", "sigmoid", "log_softmax", "softmin", "SoftmaxActivation", "clip",
    "Cast", "cast", "amp_cast", "BlockGrad", "stop_gradient", "_copy", "identity",
    "make_loss", "zeros_like", "ones_like", "smooth_l1", "negative", "hard_sigmoid",
    "_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar",
    "_rdiv_scalar", "_power_scalar", "_rpower_scalar", "_mod_scalar", "_rmod_scalar",
    "_maximum_scalar", "_minimum_scalar", "_hypot_scalar", "_greater_scalar",
    "_greater_equal_scalar", "_lesser_scalar", "_lesser_equal_scalar", "_equal_scalar",
    "_not_equal_scalar",
})
# Operators whose inputs and output all have one shape.
SAME_AS_ALL = frozenset({
    "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_Plus", "_plus", "_add",
    "_Minus", "_minus", "_sub", "_Mul", "_mul", "_Div", "_div", "_grad_add", "add_n",
    "ElementWiseSum", "_identity_with_attr_like_rhs",
})
BROADCAST = frozenset({
    "broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_plus",
    "broadcast_minus", "broadcast_power", "broadcast_maximum", "broadcast_minimum",
    "broadcast_hypot", "broadcast_mod", "broadcast_equal", "broadcast_not_equal",
    "broadcast_greater", "broadcast_greater_equal", "broadcast_lesser",
    "broadcast_lesser_equal", "broadcast_logical_and", "broadcast_logical_or",
    "broadcast_logical_xor", "_maximum", "_minimum", "_power", "_hypot", "_mod", "_equal",
    "_not_equal", "_greater", "_greater_equal", "_lesser", "_lesser_equal",
})
# Operators MXNet infers only from fully known inputs (their output stays unknown else).
NEEDS_KNOWN_INPUTS = frozenset({"where", "Flatten", "flatten", "tile", "one_hot", "argmax",
                                "argmin", "norm", "squeeze"})


def _unary_names() -> frozenset[str]:
    from ..ndarray.math_ops import UNARY_FUNCTIONS
    from ..ndarray.ops import _UNARY

    return frozenset(_UNARY) | frozenset(UNARY_FUNCTIONS)


_UNARY_NAMES: frozenset[str] | None = None


def same_as_first(op: str) -> bool:
    global _UNARY_NAMES
    if _UNARY_NAMES is None:
        _UNARY_NAMES = _unary_names()
    return op in SAME_AS_FIRST or op in _UNARY_NAMES


# ----------------------------------------------------------------------- partial shapes
def known(shape: Partial) -> bool:
    return shape is not None and UNKNOWN not in shape


def merge(old: Partial, new: Partial) -> Partial:
    """The shape both partial shapes describe; :class:`Conflict` when they disagree."""
    if old is None:
        return new
    if new is None:
        return old
    if len(old) != len(new):
        raise Conflict(old, new)
    dims = []
    for a, b in zip(old, new, strict=True):
        if a == UNKNOWN:
            dims.append(b)
        elif b == UNKNOWN or a == b:
            dims.append(a)
        else:
            raise Conflict(old, new)
    return tuple(dims)


def _unify(shapes: list[Partial]) -> Partial:
    result: Partial = None
    for shape in shapes:
        result = merge(result, shape)
    return result


# -------------------------------------------------------------------------- the rule
def refine(node: Any, ins: list[Partial], outs: list[Partial]) -> tuple[list[Partial],
                                                                          list[Partial]]:
    """What ``node`` says about its inputs' and outputs' shapes, given the current ones."""
    op = node.op
    if op in SAME_AS_ALL:
        shape = _unify(ins + outs[:1])
        return [shape] * len(ins), [shape] + outs[1:]
    if same_as_first(op) and ins:
        shape = _unify(ins[:1] + outs[:1])
        return [shape] + ins[1:], [shape] + outs[1:]
    if op in BROADCAST and len(ins) == 2:
        return ins, [_broadcast(ins[0], ins[1])] + outs[1:]
    if op in ("Concat", "concat"):
        return _concat(node.params(), ins, outs)
    if not ins and _deferred_shape(node.params()) is not None:
        return [], [_deferred_shape(node.params())] + outs[1:]
    new_ins, new_outs = _forward(node, ins, len(outs))
    if op in ("SliceChannel", "split"):  # its outputs all have one shape
        shared = _unify(outs + new_outs)
        outs = new_outs = [shared] * len(outs)
    backward = _BACKWARD.get(op)
    if backward is not None and outs and known(outs[0]):
        new_ins = [merge(a, b) for a, b in zip(new_ins, backward(node.params(), ins, outs),
                                                 strict=True)]
    return new_ins, new_outs


def _deferred_shape(params: dict[str, Any]) -> Partial:
    """A creation operator's (``zeros``, samplers) ``shape`` with 0 for sizes to infer, as
    MXNet's legacy mode reads them (``begin_state`` makes such states): those sizes unknown;
    None for any other operator."""
    from ..util import is_np_shape

    shape = params.get("shape")
    if not isinstance(shape, (tuple, list)) or 0 not in shape or is_np_shape():
        return None
    return tuple(UNKNOWN if d == 0 else int(d) for d in shape)


def deferred_nodes(nodes: list[Any]) -> list[Any]:
    """The creation operators whose output shape comes from shape inference."""
    return [n for n in nodes if n.op is not None and not n.inputs
            and _deferred_shape(n.params()) is not None]


def _forward(node: Any, ins: list[Partial], n_outs: int) -> tuple[list[Partial],
                                                                  list[Partial]]:
    """The operator's own rule: exact on known shapes, twice with stand-ins on partial ones."""
    spec, params = node.spec, node.params()
    if all(s is None or known(s) for s in ins):
        try:
            filled, result = spec.infer(params, list(ins))
        except Exception as exc:  # noqa: BLE001 - an operator's check failed
            raise RuleError(f"cannot infer shapes from inputs {ins}: {exc}") from None
        return _aligned(filled, ins), _outputs(result, n_outs)
    if node.op in NEEDS_KNOWN_INPUTS:
        return list(ins), [None] * n_outs
    runs = []
    for size in _STAND_INS:
        concrete = [None if s is None else tuple(size if d == UNKNOWN else d for d in s)
                    for s in ins]
        try:
            filled, result = spec.infer(params, concrete)
        except Exception:  # noqa: BLE001 - the stand-ins do not fit: ask without them
            return _forward_without_partial(node, ins, n_outs)
        runs.append((_aligned(filled, ins), _outputs(result, n_outs)))
    (ins_a, outs_a), (ins_b, outs_b) = runs
    return ([_common(a, b) for a, b in zip(ins_a, ins_b, strict=True)],
            [_common(a, b) for a, b in zip(outs_a, outs_b, strict=True)])


def _forward_without_partial(node: Any, ins: list[Partial], n_outs: int
                             ) -> tuple[list[Partial], list[Partial]]:
    """The operator's rule with its partial inputs left for it to fill (a deferred weight
    such as ``(4, 0, 1, 1)``: stand-in sizes may not fit where the real ones would, e.g. a
    ``num_group`` that must divide them). With its data (first) input known, a failure is
    the graph's; otherwise there is nothing to say yet. What the rule fills is checked
    against the partial shapes by the caller's merge."""
    if not ins or not known(ins[0]):
        return list(ins), [None] * n_outs
    given = [s if s is None or known(s) else None for s in ins]
    try:
        filled, result = node.spec.infer(node.params(), given)
    except Exception as exc:  # noqa: BLE001 - an operator's check failed
        raise RuleError(f"cannot infer shapes from inputs {ins}: {exc}") from None
    return _aligned(filled, ins), _outputs(result, n_outs)


def _aligned(filled: Any, ins: list[Partial]) -> list[Partial]:
    filled = list(filled or [])[:len(ins)]
    filled += [None] * (len(ins) - len(filled))
    return [None if s is None else tuple(int(d) for d in s) for s in filled]


def _outputs(result: Any, count: int) -> list[Partial]:
    if result is None:
        return [None] * count
    if isinstance(result, tuple):  # one output's shape
        return [tuple(int(d) for d in result)] + [None] * (count - 1)
    shapes = [None if s is None else tuple(int(d) for d in s) for s in result][:count]
    return shapes + [None] * (count - len(shapes))


def _common(a: Partial, b: Partial) -> Partial:
    """What two runs with different stand-ins agree on."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else UNKNOWN for x, y in zip(a, b, strict=True))


def _broadcast(lhs: Partial, rhs: Partial) -> Partial:
    if lhs is None or rhs is None:
        return None
    ndim = max(len(lhs), len(rhs))
    lhs = (1,) * (ndim - len(lhs)) + tuple(lhs)
    rhs = (1,) * (ndim - len(rhs)) + tuple(rhs)
    dims = []
    for a, b in zip(lhs, rhs, strict=True):
        if a == b:
            dims.append(a)
        elif UNKNOWN in (a, b):
            dims.append(UNKNOWN)
        elif a == 1 or b == 1:
            dims.append(b if a == 1 else a)
        else:
            raise RuleError(f"operands of shapes {lhs} and {rhs} do not broadcast")
    return tuple(dims)


def _concat(params: dict[str, Any], ins: list[Partial], outs: list[Partial]) -> tuple[
        list[Partial], list[Partial]]:
    """Every dimension but the joined one is shared; the joined one adds up."""
    ndims = {len(s) for s in ins + outs[:1] if s is not None}
    if not ndims:
        return ins, outs
    if len(ndims) > 1:
        raise RuleError(f"inputs of different ranks: {ins}")
    ndim = ndims.pop()
    axis = int(params.get("dim", 1)) % ndim
    rest = [None if s is None else s[:axis] + s[axis + 1:] for s in ins + outs[:1]]
    shared = _unify(rest)
    assert shared is not None
    new_ins = []
    for s in ins:
        size = UNKNOWN if s is None else s[axis]
        new_ins.append(shared[:axis] + (size,) + shared[axis:])
    sizes = [s[axis] for s in new_ins]
    total = sum(sizes) if UNKNOWN not in sizes else UNKNOWN
    return new_ins, [shared[:axis] + (total,) + shared[axis:]] + outs[1:]


# ---------------------------------------------------------------- backward per operator
def _batch_from_output(params: dict[str, Any], ins: list[Partial], outs: list[Partial]
                       ) -> list[Partial]:
    data = ins[0]
    if data is None:
        return [None] * len(ins)
    return [(outs[0][0],) + (UNKNOWN,) * (len(data) - 1)] + [None] * (len(ins) - 1)


def _conv_backward(params: dict[str, Any], ins: list[Partial], outs: list[Partial]
                   ) -> list[Partial]:
    data, out = ins[0], outs[0]
    result = _batch_from_output(params, ins, outs)
    if data is None or out is None or str(params.get("layout", "None")) not in ("None", "NCW",
                                                                                  "NCHW", "NCDHW"):
        return result
    kernel = tuple(params["kernel"])
    n = len(kernel)
    stride = tuple(params["stride"]) or (1,) * n
    dilate = tuple(params["dilate"]) or (1,) * n
    pad = tuple(params["pad"]) or (0,) * n
    dims = list(result[0] or ())
    for i in range(min(n, len(data) - 2)):
        if stride[i] == 1:
            dims[2 + i] = out[2 + i] - 2 * pad[i] + dilate[i] * (kernel[i] - 1)
    return [tuple(dims)] + result[1:]


def _reshape_backward(params: dict[str, Any], ins: list[Partial], outs: list[Partial]
                      ) -> list[Partial]:
    data = ins[0]
    if data is None or list(data).count(UNKNOWN) != 1:
        return [None] * len(ins)
    rest = math.prod(d for d in data if d != UNKNOWN)
    total = math.prod(outs[0])  # type: ignore[arg-type]
    if rest == 0 or total % rest:
        return [None] * len(ins)
    return [tuple(total // rest if d == UNKNOWN else d for d in data)] + [None] * (len(ins) - 1)


def _split_backward(params: dict[str, Any], ins: list[Partial], outs: list[Partial]
                    ) -> list[Partial]:
    data, out = ins[0], outs[0]
    if data is None or out is None:
        return [None] * len(ins)
    axis = int(params.get("axis", 1)) % len(data)
    squeeze = str(params.get("squeeze_axis", False)).lower() in ("true", "1")
    count = int(params.get("num_outputs", 1))
    if squeeze:
        dims = out[:axis] + (count,) + out[axis:]
    else:
        size = out[axis]
        dims = out[:axis] + (UNKNOWN if size == UNKNOWN else size * count,) + out[axis + 1:]
    if len(dims) != len(data):
        return [None] * len(ins)
    return [tuple(dims)] + [None] * (len(ins) - 1)


_BACKWARD = {
    "FullyConnected": _batch_from_output,
    "Convolution": _conv_backward,
    "Reshape": _reshape_backward,
    "reshape": _reshape_backward,
    "SliceChannel": _split_backward,
    "split": _split_backward,
}
