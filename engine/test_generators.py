"""Statistical checks of random generators (``mx.test_utils.verify_generator`` and friends):
is a sampler's histogram the distribution it claims? Pearson's chi-square test over buckets,
repeated so that one unlucky draw does not fail a correct sampler.

scipy (a development dependency) computes the p values; it is imported when a check runs.

>>> import numpy as np
>>> buckets, probs = gen_buckets_probs_with_ppf(lambda q: q, 4)  # uniform(0, 1) quartiles
>>> buckets[1], probs[1]
((0.25, 0.5), 0.25)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy


def gen_buckets_probs_with_ppf(ppf: Callable[[float], float],
                               nbuckets: int) -> tuple[list[tuple[float, float]], list[float]]:
    """``nbuckets`` equally likely buckets between consecutive quantiles of ``ppf``."""
    edges = [ppf(i / nbuckets) for i in range(nbuckets + 1)]
    buckets = list(zip(edges[:-1], edges[1:], strict=True))
    return buckets, [1.0 / nbuckets] * nbuckets


def _host(samples: Any) -> numpy.ndarray:
    return numpy.asarray(samples.asnumpy() if hasattr(samples, "asnumpy") else samples)


def _observed(samples: numpy.ndarray, buckets: Sequence[Any]) -> numpy.ndarray:
    flat = samples.reshape(-1)
    if isinstance(buckets[0], (tuple, list)):  # continuous: [low, high) ranges, the last
        last = len(buckets) - 1                   # one closed (a rounded draw may hit high)
        return numpy.array([numpy.count_nonzero((flat >= lo) & ((flat < hi) | (
            (flat == hi) & (i == last)))) for i, (lo, hi) in enumerate(buckets)])
    return numpy.array([numpy.count_nonzero(flat == value) for value in buckets])


def chi_square_check(generator: Callable[[int], Any], buckets: Sequence[Any],
                     probs: Sequence[float], nsamples: int = 1000000) -> tuple[float, Any, Any]:
    """(p value, observed counts, expected counts) of ``generator(nsamples)``'s samples
    against ``probs`` over ``buckets`` (ranges for continuous, values for discrete ones)."""
    from scipy import stats

    samples = _host(generator(nsamples))
    observed = _observed(samples, buckets)
    expected = numpy.asarray(probs, numpy.float64) * samples.size
    # the test compares proportions: expected counts are scaled to the samples in buckets
    p_value = float(stats.chisquare(observed, expected * observed.sum() / expected.sum())[1])
    return p_value, observed, expected


def verify_generator(generator: Callable[[int], Any], buckets: Sequence[Any],
                     probs: Sequence[float], nsamples: int = 1000000, nrepeat: int = 5,
                     success_rate: float = 0.2, alpha: float = 0.05) -> list[float]:
    """Run :func:`chi_square_check` ``nrepeat`` times; fail unless at least
    ``success_rate`` of the runs have p > ``alpha``. Returns the p values."""
    p_values = [chi_square_check(generator, buckets, probs, nsamples)[0]
                for _ in range(nrepeat)]
    passed = sum(p > alpha for p in p_values)
    if passed < success_rate * nrepeat:
        raise AssertionError(f"generator failed the chi-square test: p values {p_values}")
    return p_values


def mean_check(generator: Callable[[int], Any], mu: float, sigma: float,
               nsamples: int = 1000000) -> bool:
    """Whether the sample mean is within 3 standard errors of ``mu``."""
    samples = _host(generator(nsamples))
    return bool(abs(samples.mean() - mu) < 3 * sigma / numpy.sqrt(nsamples))


def var_check(generator: Callable[[int], Any], sigma: float, nsamples: int = 1000000) -> bool:
    """Whether the sample variance is within 3 standard errors of ``sigma**2``."""
    samples = _host(generator(nsamples))
    return bool(abs(samples.var() - sigma ** 2) < 3 * numpy.sqrt(2 * sigma ** 4 / (nsamples - 1)))


__all__ = ["chi_square_check", "gen_buckets_probs_with_ppf", "mean_check", "var_check",
           "verify_generator"]
