"""Densities of samples under MXNet's distributions (``nd.random_pdf_normal``, ...).

``sample`` has the parameters' shape plus trailing draw axes; each density is written with
NDArray operations, so gradients flow to the samples and the parameters. ``is_log=True``
returns the log-density.

>>> from engine import nd
>>> pdf = nd.random_pdf_exponential(nd.array([[0.0, 1.0]]), nd.array([2.0]))
>>> pdf.asnumpy().astype(float).round(4).tolist()
[[2.0, 0.2707]]
"""

from __future__ import annotations

import math
from typing import Any

from .math_ops import UNARY_FUNCTIONS
from .ndarray import NDArray
from .ops import reduce_sum, unary
from .shape_ops import expand_dims, reshape

_gammaln = UNARY_FUNCTIONS["gammaln"]


def _per_draw(param: NDArray, sample: NDArray) -> NDArray:
    """``param`` with trailing unit axes, to broadcast over the draws of each element."""
    return reshape(param, param.shape + (1,) * (sample.ndim - param.ndim))


def _finish(log_pdf: NDArray, is_log: bool) -> NDArray:
    return log_pdf if is_log else unary("exp", log_pdf)


def random_pdf_uniform(sample: NDArray, low: NDArray, high: NDArray, is_log: bool = False,
                       **_: Any) -> NDArray:
    """``1/(high − low)`` on ``[low, high]``, 0 outside. (MXNet 1.9 does not check the
    support and returns ``1/(high − low)`` everywhere; a density must be 0 there.)"""
    lo, hi = _per_draw(low, sample), _per_draw(high, sample)
    inside = (sample >= lo) * (sample <= hi)
    density = inside / (hi - lo)
    return unary("log", density) if is_log else density


def random_pdf_normal(sample: NDArray, mu: NDArray, sigma: NDArray, is_log: bool = False,
                      **_: Any) -> NDArray:
    m, s = _per_draw(mu, sample), _per_draw(sigma, sample)
    z = (sample - m) / s
    return _finish(z * z * -0.5 - unary("log", s) - 0.5 * math.log(2 * math.pi), is_log)


def random_pdf_gamma(sample: NDArray, alpha: NDArray, beta: NDArray, is_log: bool = False,
                     **_: Any) -> NDArray:
    """Gamma density with shape ``alpha`` and rate ``beta``."""
    a, b = _per_draw(alpha, sample), _per_draw(beta, sample)
    log_pdf = a * unary("log", b) + (a - 1) * unary("log", sample) - b * sample - _gammaln(a)
    return _finish(log_pdf, is_log)


def random_pdf_exponential(sample: NDArray, lam: NDArray, is_log: bool = False,
                           **_: Any) -> NDArray:
    rate = _per_draw(lam, sample)
    return _finish(unary("log", rate) - rate * sample, is_log)


def random_pdf_poisson(sample: NDArray, lam: NDArray, is_log: bool = False,
                       **_: Any) -> NDArray:
    rate = _per_draw(lam, sample)
    log_pdf = sample * unary("log", rate) - rate - _gammaln(sample + 1)
    return _finish(log_pdf, is_log)


def _negative_binomial_log(sample: NDArray, k: Any, p: Any) -> NDArray:
    return (_gammaln(sample + k) - _gammaln(sample + 1) - _gammaln(k * 1.0)
            + k * unary("log", p) + sample * unary("log", 1 - p))


def random_pdf_negative_binomial(sample: NDArray, k: NDArray, p: NDArray,
                                 is_log: bool = False, **_: Any) -> NDArray:
    """Probability of ``sample`` failures before the ``k``-th success."""
    log_pdf = _negative_binomial_log(sample, _per_draw(k, sample), _per_draw(p, sample))
    return _finish(log_pdf, is_log)


def random_pdf_generalized_negative_binomial(sample: NDArray, mu: NDArray, alpha: NDArray,
                                             is_log: bool = False, **_: Any) -> NDArray:
    """Negative binomial with mean ``mu`` and dispersion ``alpha``: k = 1/α, p = 1/(1+α·μ)."""
    m, a = _per_draw(mu, sample), _per_draw(alpha, sample)
    log_pdf = _negative_binomial_log(sample, 1 / a, 1 / (a * m + 1))
    return _finish(log_pdf, is_log)


def random_pdf_dirichlet(sample: NDArray, alpha: NDArray, is_log: bool = False,
                         **_: Any) -> NDArray:
    """Dirichlet density; ``sample`` is ``alpha.shape[:-1] + draws + (k,)``, where the draw
    axes may be none (one sample per distribution)."""
    a = alpha
    for _ in range(sample.ndim - alpha.ndim):
        a = expand_dims(a, -2)
    log_norm = _gammaln(reduce_sum(a, axis=-1)) - reduce_sum(_gammaln(a), axis=-1)
    log_pdf = log_norm + reduce_sum((a - 1) * unary("log", sample), axis=-1)
    return _finish(log_pdf, is_log)
