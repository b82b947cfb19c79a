"""Indexing, legacy-layer and per-element sampling operators of ``mx.sym`` that
``engine.nd`` lacks, as private NDArray helpers with MXNet's signatures.

>>> from engine import nd
>>> EXTRA['batch_take'](nd.array([[1, 2], [3, 4]]), nd.array([1, 0])).asnumpy().tolist()
[2.0, 3.0]
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from .. import random as engine_random
from ..ndarray import NDArray, apply_op
from ..ndarray.ndarray import as_raw
from ..ndarray.shape_ops import getitem


def _index(arr: Any) -> Any:
    return as_raw(arr).astype(numpy.int64)


def batch_take(a: NDArray, indices: Any) -> NDArray:
    xp = a.xp
    idx = _index(indices)
    return getitem(a, (xp.arange(a.shape[0]), idx))


def fill_element_0index(lhs: NDArray, mhs: NDArray, rhs: Any) -> NDArray:
    """``lhs`` with ``lhs[i, rhs[i]] = mhs[i]``."""
    xp = lhs.xp
    rows, cols = xp.arange(lhs.shape[0]), _index(rhs)
    out = lhs.raw.copy()
    out[rows, cols] = mhs.raw

    def backward(g: Any) -> tuple[Any, Any]:
        g_lhs = g.copy()
        g_lhs[rows, cols] = 0
        return g_lhs, g[rows, cols]

    return apply_op(out, (lhs, mhs), backward)


def gather_nd(data: NDArray, indices: Any) -> NDArray:
    idx = _index(indices)
    return getitem(data, tuple(idx[i] for i in range(idx.shape[0])))


def scatter_nd(data: NDArray, indices: Any, shape: Any) -> NDArray:
    xp = data.xp
    idx = _index(indices)
    key = tuple(idx[i] for i in range(idx.shape[0]))
    out = xp.zeros(tuple(shape), dtype=data.dtype)
    out[key] = data.raw
    return apply_op(out, (data,), lambda g: (g[key],))


def ravel_multi_index(data: Any, shape: Any) -> NDArray:
    raw = as_raw(data)
    xp = data.xp
    flat = xp.zeros(raw.shape[1:], dtype=numpy.int64)
    for axis, size in enumerate(shape):
        flat = flat * int(size) + raw[axis].astype(numpy.int64)
    return NDArray(flat.astype(raw.dtype), data._ctx)


def unravel_index(data: Any, shape: Any) -> NDArray:
    raw = as_raw(data)
    xp = data.xp
    rest = raw.astype(numpy.int64)
    coords = []
    for size in reversed(tuple(shape)):
        coords.append(rest % int(size))
        rest = rest // int(size)
    return NDArray(xp.stack(coords[::-1]).astype(raw.dtype), data._ctx)


def histogram(data: NDArray, bins: Any = 10, range: Any = None) -> list[NDArray]:  # noqa: A002
    """Counts (int64) and bin edges, as MXNet's ``histogram``."""
    xp = data.xp
    raw = data.raw.ravel()
    if isinstance(bins, NDArray):
        counts, edges = xp.histogram(raw, bins=bins.raw)
    else:
        counts, edges = xp.histogram(raw, bins=int(bins), range=range)
    return [NDArray(counts.astype(numpy.int64), data._ctx),
            NDArray(edges.astype(data.dtype), data._ctx)]


def split_v2(data: NDArray, indices_or_sections: Any = 1, axis: int = 0,
             squeeze_axis: bool = False, sections: int = 0, indices: Any = ()) -> list[NDArray]:
    size = data.shape[axis]
    if isinstance(indices_or_sections, int):
        step = size // indices_or_sections
        bounds = [i * step for i in range(indices_or_sections)] + [size]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [size]
        bounds = sorted(set(bounds)) if bounds[1] != 0 else bounds[1:]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        key = [slice(None)] * data.ndim
        key[axis] = slice(lo, hi)
        part = getitem(data, tuple(key))
        parts.append(part.squeeze(axis) if squeeze_axis and hi - lo == 1 else part)
    return parts


def lrn(data: NDArray, alpha: float = 1e-4, beta: float = 0.75, knorm: float = 2.0,
        nsize: int = 5) -> NDArray:
    """Local response normalization across channels (MXNet's ``LRN``)."""
    from ..ndarray.shape_ops import concat

    square = data * data
    half = nsize // 2
    channels = data.shape[1]
    zeros = square[:, :1] * 0
    padded = concat(*([zeros] * half + [square] + [zeros] * half), dim=1)
    total = padded[:, 0:channels]
    for offset in range(1, nsize):
        total = total + padded[:, offset:offset + channels]
    return data / (total * (alpha / nsize) + knorm) ** beta


def crop(*data: NDArray, offset: Any = (0, 0), h_w: Any = (0, 0),
         center_crop: bool = False, num_args: int = 1) -> NDArray:
    """MXNet's legacy ``Crop``: cut ``data[0]``'s last two axes to ``h_w`` or to the size of
    ``data[1]``, from ``offset`` or the centre."""
    source = data[0]
    height, width = (data[1].shape[2], data[1].shape[3]) if len(data) > 1 else tuple(h_w)
    if center_crop:
        top = (source.shape[2] - height) // 2
        left = (source.shape[3] - width) // 2
    else:
        top, left = int(offset[0]), int(offset[1])
    return getitem(source, (slice(None), slice(None), slice(top, top + height),
                            slice(left, left + width)))


def _sampler(draw: Any) -> Any:
    """``sample_*``: one draw of ``shape`` per element of the parameter arrays."""
    def sample(*params: Any, shape: Any = (), dtype: Any = "None", **_: Any) -> NDArray:
        first = next(p for p in params if isinstance(p, NDArray))
        xp = first.xp
        extra = (shape,) if isinstance(shape, int) else tuple(shape)
        raws = [as_raw(p).reshape(as_raw(p).shape + (1,) * len(extra)) for p in params]
        size = first.shape + extra
        out = draw(engine_random.generator(xp), size, *raws)
        out_dtype = first.dtype if dtype in ("None", None) else numpy.dtype(dtype)
        return NDArray(xp.asarray(out).astype(out_dtype), first._ctx)

    return sample


def _random_with_params(draw: Any, names: tuple[str, ...]) -> Any:
    def random_op(shape: Any = (), dtype: Any = "float32", ctx: Any = None,
                  **params: Any) -> NDArray:
        from ..ndarray import array

        size = (shape,) if isinstance(shape, int) else tuple(shape or (1,))
        values = [float(params.get(n, d)) for n, d in names]  # type: ignore[misc]
        out = draw(engine_random.generator(numpy), size, *values)
        return array(numpy.asarray(out), dtype=numpy.dtype(dtype if dtype != "None"
                                                             else "float32"))

    return random_op


def _negative_binomial(rng: Any, size: Any, k: Any, p: Any) -> Any:
    return rng.poisson(rng.gamma(k, (1 - p) / p, size=size))


def _generalized_negative_binomial(rng: Any, size: Any, mu: Any, alpha: Any) -> Any:
    shape = 1 / numpy.maximum(alpha, 1e-12)
    lam = rng.gamma(shape, mu * alpha, size=size) if numpy.all(alpha > 0) else mu
    return rng.poisson(lam)


def _multinomial(data: NDArray, shape: Any = (), get_prob: bool = False,
                 dtype: Any = "int32") -> Any:
    xp = data.xp
    probs = data.raw
    extra = (shape,) if isinstance(shape, int) else tuple(shape)
    count = int(numpy.prod(extra)) if extra else 1
    rng = engine_random.generator(xp)
    flat = probs.reshape(-1, probs.shape[-1])
    cdf = xp.cumsum(flat, axis=-1)
    u = rng.random((flat.shape[0], count))
    picks = (u[:, :, None] > cdf[:, None, :]).sum(axis=-1)
    picks = xp.minimum(picks, flat.shape[-1] - 1)
    out = picks.reshape(probs.shape[:-1] + extra)
    result = NDArray(out.astype(numpy.dtype(dtype)), data._ctx)
    if not get_prob:
        return result
    logp = xp.log(xp.take_along_axis(flat, picks, axis=-1)).reshape(out.shape)
    return [result, NDArray(logp.astype(probs.dtype), data._ctx)]


EXTRA: dict[str, Any] = {
    "batch_take": batch_take, "fill_element_0index": fill_element_0index,
    "gather_nd": gather_nd, "scatter_nd": scatter_nd, "ravel_multi_index": ravel_multi_index,
    "unravel_index": unravel_index, "histogram": histogram, "split_v2": split_v2,
    "LRN": lrn, "Crop": crop,
    "sample_uniform": _sampler(lambda r, n, lo, hi: lo + (hi - lo) * r.random(n)),
    "sample_normal": _sampler(lambda r, n, mu, sigma: mu + sigma * r.standard_normal(n)),
    "sample_exponential": _sampler(lambda r, n, lam: r.exponential(1 / lam, size=n)),
    "sample_gamma": _sampler(lambda r, n, alpha, beta: r.gamma(alpha, beta, size=n)),
    "sample_poisson": _sampler(lambda r, n, lam: r.poisson(lam, size=n)),
    "sample_negative_binomial": _sampler(_negative_binomial),
    "sample_generalized_negative_binomial": _sampler(_generalized_negative_binomial),
    "sample_multinomial": _multinomial,
    "random_negative_binomial": _random_with_params(
        _negative_binomial, (("k", 1), ("p", 1)),  # type: ignore[arg-type]
    ),
    "random_generalized_negative_binomial": _random_with_params(
        _generalized_negative_binomial, (("mu", 1), ("alpha", 1)),  # type: ignore[arg-type]
    ),
}


def _pdf(density: Any, n_params: int) -> Any:
    """``random_pdf_*``: the density (or its log) of ``sample`` under per-row parameters."""
    def pdf(sample: NDArray, *params: NDArray, is_log: bool = False, **named: Any) -> NDArray:
        from ..ndarray.ops import unary

        args = list(params) + list(named.values())
        extra = sample.ndim - args[0].ndim
        expanded = [p.reshape(p.shape + (1,) * extra) for p in args[:n_params]]
        log_density = density(sample, *expanded)
        return log_density if is_log else unary("exp", log_density)

    return pdf


def _log(x: NDArray) -> NDArray:
    from ..ndarray.ops import unary

    return unary("log", x)


def _log_gamma(x: NDArray) -> NDArray:
    from .fallback_math import MATH

    return MATH["gammaln"](x)


def _pdf_uniform(sample: NDArray, low: NDArray, high: NDArray, is_log: bool = False) -> NDArray:
    xp = sample.xp
    extra = sample.ndim - low.ndim
    lo = low.raw.reshape(low.shape + (1,) * extra)
    hi = high.raw.reshape(high.shape + (1,) * extra)
    x = sample.raw
    density = ((x >= lo) & (x <= hi)) / (hi - lo)
    with numpy.errstate(divide="ignore"):
        out = xp.log(density) if is_log else density
    return NDArray(out.astype(x.dtype), sample._ctx)


def _pdf_dirichlet(sample: NDArray, alpha: NDArray, is_log: bool = False) -> NDArray:
    from ..ndarray.ops import reduce_sum, unary

    extra = sample.ndim - alpha.ndim
    a = alpha.reshape(alpha.shape[:-1] + (1,) * extra + alpha.shape[-1:])
    log_density = (_log_gamma(reduce_sum(a, axis=-1)) - reduce_sum(_log_gamma(a), axis=-1)
                   + reduce_sum((a - 1) * _log(sample), axis=-1))
    return log_density if is_log else unary("exp", log_density)


EXTRA.update({
    "random_pdf_uniform": _pdf_uniform, "random_pdf_dirichlet": _pdf_dirichlet,
    "random_pdf_normal": _pdf(lambda x, mu, sigma: (x - mu) * (x - mu) / (sigma * sigma) * -0.5
                              - _log(sigma) - 0.5 * math.log(2 * math.pi), 2),
    "random_pdf_exponential": _pdf(lambda x, lam: _log(lam) - lam * x, 1),
    "random_pdf_gamma": _pdf(lambda x, alpha, beta: alpha * _log(beta) - _log_gamma(alpha)
                             + (alpha - 1) * _log(x) - beta * x, 2),
    "random_pdf_poisson": _pdf(lambda x, lam: x * _log(lam) - lam - _log_gamma(x + 1), 1),
    "random_pdf_negative_binomial": _pdf(
        lambda x, k, p: _log_gamma(x + k) - _log_gamma(x + 1) - _log_gamma(k)
        + k * _log(p) + x * _log(1 - p), 2),
    "random_pdf_generalized_negative_binomial": _pdf(
        lambda x, mu, alpha: _log_gamma(x + 1 / alpha) - _log_gamma(x + 1)
        - _log_gamma(1 / alpha) + x * _log(alpha * mu / (1 + alpha * mu))
        - _log(1 + alpha * mu) / alpha, 2),
})
