"""The arithmetic operators of symbol graphs: ``elemwise_*``/``broadcast_*`` between two
symbols, ``_*_scalar`` with a number (what ``a + b`` and ``x * 2`` build), ``negative``.
"""

from __future__ import annotations

from typing import Any

import numpy

from .ops import _REQUIRED, OpSpec, Shape, _op, _same


def _broadcast_infer(p: dict[str, Any], shapes: list[Shape | None]):
    known = [s for s in shapes if s is not None]
    if len(known) < len(shapes):
        return [known[0] if s is None and known else s for s in shapes], (
            known[0] if known else None)
    return shapes, tuple(numpy.broadcast_shapes(*known))


for _name, _hint, _fn in (
    ("elemwise_add", "_plus", lambda a, b: a + b), ("elemwise_sub", "_minus", lambda a, b: a - b),
    ("elemwise_mul", "_mul", lambda a, b: a * b), ("elemwise_div", "_div", lambda a, b: a / b),
    ("broadcast_add", "broadcast_add", lambda a, b: a + b),
    ("broadcast_sub", "broadcast_sub", lambda a, b: a - b),
    ("broadcast_mul", "broadcast_mul", lambda a, b: a * b),
    ("broadcast_div", "broadcast_div", lambda a, b: a / b),
):
    _op(OpSpec(_name, ("lhs", "rhs"), {}, _broadcast_infer,
               lambda p, x, _f=_fn: _f(x[0], x[1]), hint=_hint,
               # a program fuses a residual add with the relu after it (as a Gluon a + b)
               step=(lambda p, n, _f=_fn: ("elemwise_add", _f, {}) if n == 2 else None)
               if _name in ("elemwise_add", "broadcast_add") else None))


def _nd(name: str) -> Any:
    from .. import nd

    return getattr(nd, name)


# MXNet's elementwise binaries behind mx.sym.maximum/minimum/power/hypot and ``%``
for _name, _fn in (
    ("_maximum", lambda a, b: _nd("maximum")(a, b)),
    ("_minimum", lambda a, b: _nd("minimum")(a, b)),
    ("_power", lambda a, b: _nd("power")(a, b)),
    ("_hypot", lambda a, b: _nd("hypot")(a, b)),
    ("_mod", lambda a, b: _nd("modulo")(a, b)),
):
    _op(OpSpec(_name, ("lhs", "rhs"), {}, _broadcast_infer,
               lambda p, x, _f=_fn: _f(x[0], x[1]), hint=_name))

# (MXNet's names: the older operators keep their CamelCase creator's, ``_plusscalar0``; the
# comparisons and ``_rpower_scalar`` their own, ``_greater_scalar0``)
for _name, _hint, _fn in (
    ("_plus_scalar", "_plusscalar", lambda a, s: a + s),
    ("_minus_scalar", "_minusscalar", lambda a, s: a - s),
    ("_rminus_scalar", "_rminusscalar", lambda a, s: s - a),
    ("_mul_scalar", "_mulscalar", lambda a, s: a * s),
    ("_div_scalar", "_divscalar", lambda a, s: a / s),
    ("_rdiv_scalar", "_rdivscalar", lambda a, s: s / a),
    ("_power_scalar", "_powerscalar", lambda a, s: a ** s),
    ("_rpower_scalar", "_rpower_scalar", lambda a, s: s ** a),
    ("_mod_scalar", "_modscalar", lambda a, s: _nd("modulo")(a, s)),
    ("_rmod_scalar", "_rmodscalar", lambda a, s: _nd("modulo")(s, a)),
    ("_maximum_scalar", "_maximumscalar", lambda a, s: _nd("maximum")(a, s)),
    ("_minimum_scalar", "_minimumscalar", lambda a, s: _nd("minimum")(a, s)),
    ("_hypot_scalar", "_hypotscalar", lambda a, s: _nd("hypot")(a, s)),
    ("_greater_scalar", "_greater_scalar", lambda a, s: a > s),
    ("_greater_equal_scalar", "_greater_equal_scalar", lambda a, s: a >= s),
    ("_lesser_scalar", "_lesser_scalar", lambda a, s: a < s),
    ("_lesser_equal_scalar", "_lesser_equal_scalar", lambda a, s: a <= s),
    ("_equal_scalar", "_equal_scalar", lambda a, s: a == s),
    ("_not_equal_scalar", "_not_equal_scalar", lambda a, s: a != s),
):
    _op(OpSpec(_name, ("data",), {"scalar": (float, _REQUIRED)}, _same,
               lambda p, x, _f=_fn: _f(x[0], p["scalar"]), hint=_hint))

_op(OpSpec("negative", ("data",), {}, _same, lambda p, x: -x[0]))

# MXNet's internal helper that gives its first input the shape of its second (a shape
# constraint for backward shape inference); it computes the identity of ``lhs``
_op(OpSpec("_identity_with_attr_like_rhs", ("lhs", "rhs"), {},
           lambda p, s: (s, s[1] if s[1] is not None else s[0]),
           lambda p, x: _nd("identity")(x[0]), hint="_identity_with_attr_like_rhs"))
