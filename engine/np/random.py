"""``engine.np.random``: numpy-style random arrays (``size=`` instead of ``shape=``)."""

from __future__ import annotations

from typing import Any

import numpy as _numpy

from .. import random as _random
from ..ndarray import NDArray
from ..ndarray import random as _ndr


def seed(seed: int) -> None:
    _random.seed(seed)


def uniform(low: float = 0.0, high: float = 1.0, size: Any = None, dtype: Any = None,
            ctx: Any = None, device: Any = None) -> NDArray:
    return _ndr.uniform(low, high, size, ctx=ctx or device, dtype=dtype)


def normal(loc: float = 0.0, scale: float = 1.0, size: Any = None, dtype: Any = None,
           ctx: Any = None, device: Any = None) -> NDArray:
    return _ndr.normal(loc, scale, size, ctx=ctx or device, dtype=dtype)


def randn(*size: int, dtype: Any = None, ctx: Any = None) -> NDArray:
    return _ndr.normal(0.0, 1.0, size, ctx=ctx, dtype=dtype)


def rand(*size: int, dtype: Any = None, ctx: Any = None) -> NDArray:
    return _ndr.uniform(0.0, 1.0, size, ctx=ctx, dtype=dtype)


def randint(low: int, high: int | None = None, size: Any = None, dtype: Any = "int64",
            ctx: Any = None) -> NDArray:
    if high is None:
        low, high = 0, low
    return _ndr.randint(low, high, size, ctx=ctx, dtype=dtype)


def shuffle(x: NDArray) -> None:
    """Shuffle ``x`` along its first axis, in place (as numpy does)."""
    x[:] = _ndr.shuffle(x)


# ------------------------------------------------------- numpy's other distributions
# Draws from engine.random's generator (numpy's algorithms), in float32 unless ``dtype``
# says otherwise; array parameters broadcast against ``size`` as numpy's do.


def _parameter(value: Any) -> Any:
    return value.asnumpy() if isinstance(value, NDArray) else value


def _deliver(values: Any, dtype: Any, ctx: Any, out: NDArray | None = None) -> NDArray:
    from .. import nd

    result = nd.array(_numpy.asarray(values), ctx=ctx, dtype=dtype or "float32")
    if out is not None:
        out[...] = result
        return out
    return result


def _distribution(method: str, *names: str, **defaults: Any) -> Any:
    """``np.random.<method>(*params, size=None, dtype=None, ctx=None, out=None)``."""

    def draw(*args: Any, size: Any = None, dtype: Any = None, ctx: Any = None,
             out: NDArray | None = None, **kwargs: Any) -> NDArray:
        params = {**defaults, **dict(zip(names, args, strict=False)), **kwargs}
        unknown = set(params) - set(names)
        missing = [n for n in names if n not in params]
        if unknown or missing:
            raise TypeError(f"np.random.{method}({', '.join(names)}): unexpected "
                            f"{sorted(unknown)}, missing {missing}")
        gen = _random.generator()
        values = getattr(gen, method)(*(_parameter(params[n]) for n in names), size=size)
        return _deliver(values, dtype, ctx, out)

    draw.__name__ = method
    draw.__doc__ = f"Draws from numpy's ``Generator.{method}({', '.join(names)}, size)``."
    return draw


beta = _distribution("beta", "a", "b")
chisquare = _distribution("chisquare", "df")
exponential = _distribution("exponential", "scale", scale=1.0)
gamma = _distribution("gamma", "shape", "scale", scale=1.0)
gumbel = _distribution("gumbel", "loc", "scale", loc=0.0, scale=1.0)
logistic = _distribution("logistic", "loc", "scale", loc=0.0, scale=1.0)
lognormal = _distribution("lognormal", "mean", "sigma", mean=0.0, sigma=1.0)
pareto = _distribution("pareto", "a")
power = _distribution("power", "a")
rayleigh = _distribution("rayleigh", "scale", scale=1.0)
weibull = _distribution("weibull", "a")


def choice(a: Any, size: Any = None, replace: bool = True, p: Any = None, ctx: Any = None,
           out: NDArray | None = None) -> NDArray:
    """Samples of ``a`` (an array, or ``range(a)`` for an int; int64 indices then)."""
    population = _parameter(a)
    values = _random.generator().choice(population, size, replace, _parameter(p))
    dtype = "int64" if isinstance(population, (int, _numpy.integer)) else _numpy.asarray(
        population).dtype
    return _deliver(values, dtype, ctx, out)


def multinomial(n: int, pvals: Any, size: Any = None, **_: Any) -> NDArray:
    """Counts of ``n`` draws over categories of probabilities ``pvals`` (int64)."""
    probs = _numpy.asarray(_parameter(pvals), _numpy.float64)
    # float32 probabilities may sum to a hair over 1, which numpy refuses
    if not probs.size:  # no categories: nothing to count
        shape = () if size is None else (size,) if isinstance(size, int) else tuple(size)
        return _deliver(_numpy.zeros(shape + probs.shape), "int64", None)
    probs = probs / probs.sum(axis=-1, keepdims=True)
    values = _random.generator().multinomial(n, probs, size)
    return _deliver(values, "int64", None)


def multivariate_normal(mean: Any, cov: Any, size: Any = None, check_valid: Any = None,
                        tol: Any = None) -> NDArray:
    values = _random.generator().multivariate_normal(_parameter(mean), _parameter(cov), size)
    return _deliver(values, "float32", None)
