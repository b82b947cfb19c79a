"""Gradients written with NDArray operations, so they can be recorded and differentiated
again: what ``autograd.grad(create_graph=True)`` runs.

The fast first-order pass uses raw-array backward rules (see :mod:`engine.ndarray.ops`).
Ops that note themselves in ``node.op`` (elementwise unary and binary ops, sum/mean,
reshape, 2-D dot, FullyConnected, clip and Dropout, ``autograd.Function``) also have a
rule here; differentiating any other op twice
raises NotImplementedError naming it.

>>> from engine import nd, autograd
>>> x = nd.array([1.0, 2.0]); x.attach_grad()
>>> with autograd.record():
...     y = x * x * x
...     dy = autograd.grad(y, [x], create_graph=True)[0]
>>> dy.backward(); x.grad.asnumpy().tolist()
[6.0, 12.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .ndarray import NDArray
from .ops import binary, reduce_sum, unary
from .shape_ops import broadcast_to, reshape

NdRule = Callable[[NDArray, NDArray, NDArray], NDArray]


def _u(name: str, x: NDArray) -> NDArray:
    return unary(name, x)


def _zero(g: NDArray, x: NDArray, o: NDArray) -> NDArray:
    return g * 0


def _mirror(x: NDArray) -> NDArray:
    """``2·x - x``: exactly x's value, with derivative -1 (``x.detach()`` is a constant)."""
    return x.detach() * 2 - x


_UNARY: dict[str, NdRule] = {
    "negative": lambda g, x, o: -g,
    "identity": lambda g, x, o: g,
    "abs": lambda g, x, o: g * _u("sign", x),  # sign: zero gradient, still in the graph
    "exp": lambda g, x, o: g * o,
    "log": lambda g, x, o: g / x,
    "log2": lambda g, x, o: g / (x * math.log(2)),
    "log10": lambda g, x, o: g / (x * math.log(10)),
    "log1p": lambda g, x, o: g / (x + 1),
    "expm1": lambda g, x, o: g * (o + 1),
    "sqrt": lambda g, x, o: g / (o * 2),
    "rsqrt": lambda g, x, o: g * -0.5 * o * o * o,
    "cbrt": lambda g, x, o: g / (o * o * 3),
    "rcbrt": lambda g, x, o: -g * o / (x * 3),
    "square": lambda g, x, o: g * x * 2,
    "reciprocal": lambda g, x, o: -g * o * o,
    "sin": lambda g, x, o: g * _u("cos", x),
    "cos": lambda g, x, o: -g * _u("sin", x),
    "tan": lambda g, x, o: g * (o * o + 1),
    "sinh": lambda g, x, o: g * _u("cosh", x),
    "cosh": lambda g, x, o: g * _u("sinh", x),
    "tanh": lambda g, x, o: g * (1 - o * o),
    "arcsin": lambda g, x, o: g / _u("sqrt", 1 - x * x),
    "arccos": lambda g, x, o: -g / _u("sqrt", 1 - x * x),
    "arctan": lambda g, x, o: g / (x * x + 1),
    # MXNet 1.9.1's second derivatives of arcsinh and arccosh have the opposite sign of the
    # true ones; Rudder follows MXNet's numbers: the same first derivative, evaluated at a
    # mirror of x whose value is x and whose derivative is -1
    "arcsinh": lambda g, x, o: g / _u("sqrt", _mirror(x) * _mirror(x) + 1),
    "arccosh": lambda g, x, o: g / _u("sqrt", _mirror(x) * _mirror(x) - 1),
    "arctanh": lambda g, x, o: g / (1 - x * x),
    "sigmoid": lambda g, x, o: g * o * (1 - o),
    "relu": lambda g, x, o: g * _u("sign", o),
    "softsign": lambda g, x, o: g / _u("square", _u("abs", x) + 1),
    "degrees": lambda g, x, o: g * (180 / math.pi),
    "radians": lambda g, x, o: g * (math.pi / 180),
    **{name: _zero for name in ("sign", "floor", "ceil", "round", "trunc", "fix", "rint")},
}


def _unbroadcast(g: NDArray, shape: tuple[int, ...]) -> NDArray:
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra:
        g = reduce_sum(g, axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = reduce_sum(g, axis=axes, keepdims=True)
    return reshape(g, shape)


def _binary(name: str, g: NDArray, a: Any, b: Any, o: NDArray) -> tuple[Any, Any]:
    if name == "add":
        return g, g
    if name == "sub":
        return g, -g
    if name == "mul":
        return g * b, g * a
    if name == "div":
        return g / b, -g * o / b
    if name == "pow":
        ga = g * b * binary("pow", a, b - 1) if isinstance(a, NDArray) else None
        log_a = _u("log", a) if isinstance(a, NDArray) else math.log(a)
        gb = g * o * log_a if isinstance(b, NDArray) else None
        return ga, gb
    if name in ("maximum", "minimum"):
        pick_a = (a >= b) if name == "maximum" else (a <= b)
        return g * pick_a, g * (1 - pick_a)
    raise NotImplementedError(f"second-order gradient of {name!r} is not supported")


def _masked(g: NDArray, x: NDArray, mask: Any) -> NDArray:
    """``g * mask``, recorded as a function of ``g`` and ``x`` (whose derivative is 0): as
    MXNet's backward operator, it stays in the graph even when ``g`` is a constant."""
    from .ndarray import apply_op

    mask = mask.astype(g.raw.dtype, copy=False)
    out = apply_op(g.raw * mask, (g, x), lambda gg: (gg * mask, x.xp.zeros_like(x.raw)))
    if out._node is not None:  # differentiable again: the same rule
        out._node.op = ("masked", mask)
    return out


def _dot_rule(g: NDArray, a: NDArray, b: NDArray, ta: bool, tb: bool) -> tuple[NDArray, NDArray]:
    """Gradients of ``op(a)·op(b)`` (2-D) as dot products, themselves differentiable."""
    from .ops import dot

    ga = dot(b, g, transpose_a=tb, transpose_b=True) if ta else dot(g, b, transpose_b=not tb)
    gb = dot(g, a, transpose_a=True, transpose_b=ta) if tb else dot(a, g, transpose_a=not ta)
    return ga, gb


def _fully_connected_rule(g: NDArray, inputs: tuple[NDArray, ...], flatten: bool
                          ) -> list[NDArray]:
    """Gradients of ``x·wᵀ + b`` (x flattened to 2-D, or its last axis the features)."""
    from .ops import dot

    data, weight = inputs[0], inputs[1]
    rows = data.shape[0] if flatten else -1
    x2 = reshape(data, (rows, weight.shape[1]))
    g2 = reshape(g, (-1, weight.shape[0]))
    grads = [reshape(dot(g2, weight), data.shape), dot(g2, x2, transpose_a=True)]
    if len(inputs) > 2:
        grads.append(reduce_sum(g2, axis=0))
    return grads


def recorded_backward(node: Any, g: NDArray, out: NDArray) -> list[NDArray | None]:
    """The input gradients of ``node`` (which produced ``out``) as recordable NDArray ops."""
    op = node.op
    if op is None:
        raise NotImplementedError(
            "autograd.grad(create_graph=True): an operation in this graph has no "
            "differentiable gradient rule (supported: elementwise math, + - * / **, "
            "sum, mean, reshape, dot, FullyConnected, clip, Dropout and autograd.Function)"
        )
    kind = op[0]
    if kind == "unary":
        return [_UNARY[op[1]](g, node.inputs[0], out)]
    if kind == "binary":
        _, name, lhs, rhs = op
        ga, gb = _binary(name, g, lhs, rhs, out)
        grads: list[NDArray | None] = []
        if isinstance(lhs, NDArray):
            grads.append(None if ga is None else _unbroadcast(ga, lhs.shape))
        if isinstance(rhs, NDArray):
            grads.append(None if gb is None else _unbroadcast(gb, rhs.shape))
        return grads
    if kind == "sum":
        _, axes, count = op
        shape = node.inputs[0].shape
        kept = (1,) * len(shape) if axes is None else tuple(
            1 if i in axes else n for i, n in enumerate(shape))
        spread = broadcast_to(reshape(g, kept), shape)
        return [spread / count if count != 1 else spread]
    if kind == "reshape":
        return [reshape(g, node.inputs[0].shape)]
    if kind == "function":
        return list(op[1]._recorded_backward(g, op[2]))
    if kind == "scale":  # clip, Dropout: the gradient times a constant mask
        return [_masked(g, node.inputs[0], op[1])]
    if kind == "masked":  # that gradient's own: linear in the gradient, constant in x
        return [_masked(g, node.inputs[1], op[1]), None]
    if kind == "dot":
        return list(_dot_rule(g, node.inputs[0], node.inputs[1], op[1], op[2]))
    if kind == "fully_connected":
        return _fully_connected_rule(g, node.inputs, op[1])
    raise NotImplementedError(f"no second-order rule for {kind!r}")  # pragma: no cover
