"""Random arrays (``nd.random.uniform``, ``normal``, ...), drawn from :mod:`engine.random`.

As in MXNet, the distribution parameters may be numbers (one draw of ``shape``) or NDArrays
(``shape`` draws per element, the result shaped ``param.shape + shape``), and ``*_like``
variants take their shape from an array.

>>> from engine import nd
>>> nd.random.uniform(0, 1, shape=(2, 3)).shape
(2, 3)
>>> nd.random.normal(nd.zeros((4,)), nd.ones((4,)), shape=(2,)).shape
(4, 2)
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import random as _random
from ..base import (
    MXNetValueError,
    numeric_types,  # noqa: F401 - MXNet exports it here
)
from ..context import Context, current_context, device_of  # noqa: F401 - also exported
from .creation import DEFAULT_DTYPE, _shape
from .ndarray import NDArray, apply_op, as_raw

__all__ = [
    "exponential", "exponential_like", "gamma", "gamma_like", "generalized_negative_binomial",
    "generalized_negative_binomial_like", "multinomial", "negative_binomial",
    "negative_binomial_like", "normal", "normal_like", "poisson", "poisson_like", "randint",
    "randn", "shuffle", "uniform", "uniform_like",
]


# MXNet's range checks on scalar distribution parameters (its sampling kernels fail on
# them); parameters given as arrays are not checked, as in MXNet.
_CHECKS: dict[str, list[tuple[int, str, Any]]] = {
    "uniform": [(1, "high must be >= low", lambda a: a[1] >= a[0])],
    "normal": [(1, "scale must be > 0", lambda a: a[1] > 0)],
    "gamma": [(0, "alpha must be > 0", lambda a: a[0] > 0),
              (1, "beta must be > 0", lambda a: a[1] > 0)],
    "exponential": [(0, "scale must be > 0", lambda a: a[0] > 0)],
    "poisson": [(0, "lam must be >= 0", lambda a: a[0] >= 0)],
    "negative_binomial": [(0, "k must be a non-negative integer",
                           lambda a: float(a[0]).is_integer() and a[0] >= 0),
                          (1, "p must be in (0, 1]", lambda a: a[1] > 0)],
    "generalized_negative_binomial": [(0, "mu must be >= 0", lambda a: a[0] >= 0),
                                      (1, "alpha must be >= 0", lambda a: a[1] >= 0)],
    "randint": [(1, "high must be > low", lambda a: a[1] > a[0])],
}


def _check_params(kind: str, args: tuple[Any, ...]) -> None:
    for _, message, ok in _CHECKS.get(kind, ()):
        if not ok(args):
            raise MXNetValueError(f"random.{kind}: {message}, got {args}")


def _sample(rng: Any, kind: str, size: Any, args: tuple[Any, ...]) -> Any:
    # uniform and normal as numpy's Generator computes them (the same draws), written out so
    # that parameter arrays with high < low or a negative scale sample as MXNet's do
    if kind == "uniform":
        return args[0] + (args[1] - args[0]) * rng.random(size)
    if kind == "normal":
        return args[0] + args[1] * rng.standard_normal(size)
    if kind == "randint":
        return rng.integers(args[0], args[1], size)
    if kind == "exponential":
        return rng.exponential(args[0], size)
    if kind == "gamma":
        return rng.gamma(args[0], args[1], size)
    if kind == "poisson":
        return rng.poisson(args[0], size)
    if kind == "negative_binomial":
        if args[0] == 0:  # no success needed: no failures
            return numpy.zeros(size)
        return rng.negative_binomial(args[0], min(args[1], 1.0), size)
    if kind == "generalized_negative_binomial":
        # a gamma-poisson mixture with mean mu and dispersion alpha, as MXNet defines it
        mu, alpha = args
        lam = rng.gamma(1.0 / alpha, mu * alpha, size) if alpha > 0 else numpy.full(size, mu)
        return rng.poisson(lam)
    raise ValueError(f"unknown distribution {kind!r}")  # pragma: no cover - internal


def _draw(kind: str, shape: Any, ctx: Context | str | None, dtype: Any, *args: Any,
          out: NDArray | None = None) -> NDArray:
    params = [a for a in args if isinstance(a, NDArray)]
    if params:
        return _draw_per_element(kind, shape, dtype, args, params, out)
    _check_params(kind, args)
    device = out.context if out is not None else device_of(ctx)
    rng = _random.generator(device.xp)
    dt = numpy.dtype(dtype or (out.dtype if out is not None else DEFAULT_DTYPE))
    if out is not None and shape is None:
        shape = out.shape
    size = _shape(shape) or ((1,) if shape is None else ())
    data = device.xp.asarray(_sample(rng, kind, size, args)).astype(dt, copy=False)
    return _deliver(NDArray(data, device), out)


def _draw_per_element(kind: str, shape: Any, dtype: Any, args: tuple[Any, ...],
                      params: list[NDArray], out: NDArray | None) -> NDArray:
    """``shape`` draws for every element of the parameter arrays (MXNet's ``sample_*``).

    Under ``autograd.record()`` the draws depend on the parameter arrays with a zero
    gradient, as MXNet's sampling operators have."""
    like = params[0]
    rng = _random.generator(like.xp)
    host = [numpy.asarray(a.asnumpy() if isinstance(a, NDArray) else a, dtype=numpy.float64)
            for a in args]
    per = _shape(shape)
    flat = [numpy.broadcast_to(h, like.shape).reshape(-1) for h in host]
    try:
        draws = [_sample(rng, kind, per, tuple(p[i] for p in flat)) for i in range(like.size)]
    except ValueError as err:  # numpy's own range checks (a negative gamma shape...)
        raise MXNetValueError(f"random.{kind}: {err}") from err
    dt = numpy.dtype(dtype or like.dtype)
    data = numpy.asarray(draws).reshape(like.shape + per)
    result = apply_op(like.xp.asarray(data.astype(dt)), tuple(params),
                      lambda g: tuple(p.xp.zeros_like(p.raw) for p in params))
    return _deliver(result, out)


def _deliver(result: NDArray, out: NDArray | None) -> NDArray:
    if out is None:
        return result
    out._data[...] = as_raw(result, out).astype(out._data.dtype, copy=False)
    return out


def uniform(low: Any = 0.0, high: Any = 1.0, shape: Any = None,
            ctx: Context | str | None = None, dtype: Any = None, out: NDArray | None = None,
            **_: Any) -> NDArray:
    """Uniform draws from ``[low, high)``."""
    return _draw("uniform", shape, ctx, dtype, low, high, out=out)


def normal(loc: Any = 0.0, scale: Any = 1.0, shape: Any = None,
           ctx: Context | str | None = None, dtype: Any = None, out: NDArray | None = None,
           **_: Any) -> NDArray:
    """Gaussian draws with mean ``loc`` and standard deviation ``scale``."""
    return _draw("normal", shape, ctx, dtype, loc, scale, out=out)


def randn(*shape: int, loc: float = 0.0, scale: float = 1.0, **kw: Any) -> NDArray:
    return normal(loc, scale, shape, **kw)


def randint(low: int, high: int, shape: Any = None, ctx: Context | str | None = None,
            dtype: Any = "int32", out: NDArray | None = None, **_: Any) -> NDArray:
    """Integers drawn uniformly from ``[low, high)``."""
    return _draw("randint", shape, ctx, dtype, low, high, out=out)


def exponential(scale: Any = 1.0, shape: Any = None, ctx: Any = None, dtype: Any = None,
                out: NDArray | None = None, **_: Any) -> NDArray:
    if not isinstance(scale, NDArray) and scale == 0:
        # MXNet samples at rate 1/scale, computed in Python
        raise ZeroDivisionError("random.exponential: scale 0 is an infinite rate")
    return _draw("exponential", shape, ctx, dtype, scale, out=out)


def gamma(alpha: Any = 1.0, beta: Any = 1.0, shape: Any = None, ctx: Any = None,
          dtype: Any = None, out: NDArray | None = None, **_: Any) -> NDArray:
    return _draw("gamma", shape, ctx, dtype, alpha, beta, out=out)


def poisson(lam: Any = 1.0, shape: Any = None, ctx: Any = None, dtype: Any = None,
            out: NDArray | None = None, **_: Any) -> NDArray:
    return _draw("poisson", shape, ctx, dtype, lam, out=out)


def negative_binomial(k: Any = 1, p: Any = 1.0, shape: Any = None, ctx: Any = None,
                      dtype: Any = None, out: NDArray | None = None, **_: Any) -> NDArray:
    """Failures before the ``k``-th success with success probability ``p``."""
    return _draw("negative_binomial", shape, ctx, dtype, k, p, out=out)


def generalized_negative_binomial(mu: Any = 1.0, alpha: Any = 1.0, shape: Any = None,
                                  ctx: Any = None, dtype: Any = None,
                                  out: NDArray | None = None, **_: Any) -> NDArray:
    return _draw("generalized_negative_binomial", shape, ctx, dtype, mu, alpha, out=out)


def _like(kind: str, data: NDArray, *args: Any) -> NDArray:
    return _draw(kind, data.shape, data.context, data.dtype, *args)


def uniform_like(data: NDArray, low: float = 0.0, high: float = 1.0, **_: Any) -> NDArray:
    return _like("uniform", data, low, high)


def normal_like(data: NDArray, loc: float = 0.0, scale: float = 1.0, **_: Any) -> NDArray:
    return _like("normal", data, loc, scale)


def exponential_like(data: NDArray, lam: float = 1.0, **_: Any) -> NDArray:
    return _like("exponential", data, 1.0 / lam)


def gamma_like(data: NDArray, alpha: float = 1.0, beta: float = 1.0, **_: Any) -> NDArray:
    return _like("gamma", data, alpha, beta)


def poisson_like(data: NDArray, lam: float = 1.0, **_: Any) -> NDArray:
    return _like("poisson", data, lam)


def negative_binomial_like(data: NDArray, k: int = 1, p: float = 1.0, **_: Any) -> NDArray:
    return _like("negative_binomial", data, k, p)


def generalized_negative_binomial_like(data: NDArray, mu: float = 1.0, alpha: float = 1.0,
                                       **_: Any) -> NDArray:
    return _like("generalized_negative_binomial", data, mu, alpha)


def multinomial(data: NDArray, shape: Any = None, get_prob: bool = False,
                out: NDArray | None = None, dtype: Any = "int32", **_: Any) -> Any:
    """Category indices drawn from the probabilities on ``data``'s last axis.

    The result is shaped ``data.shape[:-1] + shape``; ``get_prob=True`` also returns the
    log-probability of each draw.
    """
    probs = data.asnumpy().astype(numpy.float64)
    per = _shape(shape)
    rows = probs.reshape(-1, probs.shape[-1])
    rng = _random.generator()
    count = int(numpy.prod(per)) if per else 1
    picks = numpy.stack([rng.choice(rows.shape[1], size=count, p=r / r.sum()) for r in rows])
    picks = picks.reshape(probs.shape[:-1] + per)
    result = _deliver(NDArray(data.xp.asarray(picks.astype(dtype)), data.context), out)
    if not get_prob:
        return result
    chosen = numpy.take_along_axis(rows, picks.reshape(len(rows), -1), axis=1)
    logp = numpy.log(chosen).reshape(picks.shape).astype(data.dtype)
    return [result, NDArray(data.xp.asarray(logp), data.context)]


def shuffle(data: NDArray, out: NDArray | None = None, **_: Any) -> NDArray:
    """A copy of ``data`` with its first axis shuffled."""
    rng = _random.generator(data.xp)
    perm = rng.permutation(data.shape[0])
    return _deliver(NDArray(as_raw(data)[data.xp.asarray(perm)], data.context), out)
