"""``mx.test_utils``: the helpers MXNet users call from their own tests.

>>> from engine import nd, test_utils
>>> test_utils.assert_almost_equal(nd.ones((2,)), [1.0, 1.0])
>>> test_utils.same(nd.zeros((2,)).asnumpy(), [0.0, 0.0])
True
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

import numpy

from . import random as _random
from .context import Context, cpu, current_context
from .ndarray import NDArray, array
from .scopes import per_thread
from .test_generators import (  # noqa: F401 - MXNet's test_utils has them
    chi_square_check,
    gen_buckets_probs_with_ppf,
    mean_check,
    var_check,
    verify_generator,
)
from .util import use_np  # noqa: F401 - MXNet's test_utils re-exports it

__all__ = [
    "almost_equal", "assert_almost_equal", "assert_exception", "default_context",
    "default_dtype", "get_atol", "get_rtol", "rand_ndarray", "rand_shape_2d", "rand_shape_3d",
    "rand_shape_nd", "random_arrays", "same", "set_default_context", "assert_allclose",
    "assert_almost_equal_ignore_nan", "compare_ndarray_tuple", "compare_optimizer",
    "environment", "np_reduce", "random_sample", "random_uniform_arrays", "same_array",
    "use_np", "chi_square_check", "check_gluon_hybridize_consistency", "collapse_sum_like",
    "effective_dtype", "gen_buckets_probs_with_ppf", "is_op_runnable", "mean_check", "retry",
    "var_check", "verify_generator",
]

def default_context() -> Context:
    """The context tests run on: this thread's default context."""
    return current_context()


def set_default_context(ctx: Context) -> None:
    """Make ``ctx`` this thread's default context (``Context.default_ctx``)."""
    per_thread(Context, "default_ctx").set(ctx)


def default_dtype() -> Any:
    return numpy.float32


# MXNet's default comparison tolerances by dtype (other dtypes compare exactly)
_RTOLS = {numpy.dtype(numpy.float16): 1e-2, numpy.dtype(numpy.float32): 1e-4,
          numpy.dtype(numpy.float64): 1e-5}
_ATOLS = {numpy.dtype(numpy.float16): 1e-1, numpy.dtype(numpy.float32): 1e-3,
          numpy.dtype(numpy.float64): 1e-20}


def get_rtol(rtol: float | None = None, dtype: Any = numpy.float64) -> float:
    return _RTOLS.get(numpy.dtype(dtype), 0.0) if rtol is None else rtol


def get_atol(atol: float | None = None, dtype: Any = numpy.float64) -> float:
    return _ATOLS.get(numpy.dtype(dtype), 0.0) if atol is None else atol


def _tolerances(a: Any, b: Any, rtol: Any, atol: Any) -> tuple[float, float]:
    """As MXNet compares: a tolerance not given (or a dtype -> tolerance dict) is the larger
    of the two arrays' dtype defaults."""
    def pick(tol: Any, x: Any, table: dict[Any, float]) -> float:
        dtype = numpy.dtype(getattr(x, "dtype", numpy.asarray(x).dtype))
        if isinstance(tol, dict):
            return tol.get(dtype, table.get(dtype, 0.0))
        return table.get(dtype, 0.0) if tol is None else tol

    return (max(pick(rtol, a, _RTOLS), pick(rtol, b, _RTOLS)),
            max(pick(atol, a, _ATOLS), pick(atol, b, _ATOLS)))


def _host(x: Any) -> numpy.ndarray:
    return x.asnumpy() if isinstance(x, NDArray) else numpy.asarray(x)


def same(a: Any, b: Any) -> bool:
    """True when both arrays hold exactly the same values."""
    return bool(numpy.array_equal(_host(a), _host(b)))


def almost_equal(a: Any, b: Any, rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False) -> bool:
    rtol, atol = _tolerances(a, b, rtol, atol)
    return bool(numpy.allclose(_host(a), _host(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def assert_almost_equal(a: Any, b: Any, rtol: float | None = None, atol: float | None = None,
                        names: tuple[str, str] = ("a", "b"), equal_nan: bool = False,
                        use_broadcast: bool = True, mismatches: Any = None) -> None:
    """Fail with numpy's report when ``a`` and ``b`` differ beyond the tolerances."""
    rtol, atol = _tolerances(a, b, rtol, atol)
    a_host, b_host = _host(a), _host(b)
    if not use_broadcast and a_host.shape != b_host.shape:
        raise AssertionError(f"shapes differ: {names[0]} {a_host.shape}, {names[1]} {b_host.shape}")
    numpy.testing.assert_allclose(a_host, b_host, rtol=rtol, atol=atol, equal_nan=equal_nan,
                                  err_msg=f"{names[0]} vs {names[1]}")


assert_allclose = assert_almost_equal


def assert_exception(f: Any, exception_type: type[BaseException], *args: Any, **kwargs: Any):
    """Fail unless ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{f} did not raise {exception_type.__name__}")


def rand_shape_2d(dim0: int = 10, dim1: int = 10) -> tuple[int, int]:
    rng = _random.generator()
    return int(rng.integers(1, dim0 + 1)), int(rng.integers(1, dim1 + 1))


def rand_shape_3d(dim0: int = 10, dim1: int = 10, dim2: int = 10) -> tuple[int, int, int]:
    rng = _random.generator()
    return (int(rng.integers(1, dim0 + 1)), int(rng.integers(1, dim1 + 1)),
            int(rng.integers(1, dim2 + 1)))


def rand_shape_nd(num_dim: int, dim: int = 10, allow_zero_size: bool = False) -> tuple[int, ...]:
    """A random shape of ``num_dim`` sizes up to ``dim`` (0 allowed with ``allow_zero_size``)."""
    rng = _random.generator()
    low = 0 if allow_zero_size else 1
    return tuple(int(n) for n in rng.integers(low, dim + 1, size=num_dim))


def collapse_sum_like(a: numpy.ndarray, shape: tuple[int, ...]) -> numpy.ndarray:
    """``a`` summed over the axes that ``shape`` broadcasts (the gradient of a broadcast)."""
    from .ndarray.ndarray import unbroadcast

    return unbroadcast(numpy.asarray(a), tuple(shape))


def retry(n: int) -> Any:
    """Decorator: run a stochastic test up to ``n`` times before letting it fail."""
    def decorate(test: Any) -> Any:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> Any:
            for attempt in range(n):
                try:
                    return test(*args, **kwargs)
                except AssertionError:
                    if attempt == n - 1:
                        raise
            return None

        return run

    return decorate


def is_op_runnable() -> bool:
    """Whether operator tests can run here (always on the engine's devices)."""
    return True


def check_gluon_hybridize_consistency(net_builder: Any, data_l: list[Any],
                                      numpy_func: Any = None, test_grad: bool = True,
                                      rtol: float = 1e-4, atol: float = 1e-4) -> None:
    """A HybridBlock gives the same outputs (and input gradients) hybridized as not, and
    those of ``numpy_func`` when given."""
    from . import autograd

    results = []
    for hybridize in (False, True):
        net = net_builder()
        net.initialize()
        if hybridize:
            net.hybridize()
        inputs = [d.copy() for d in data_l]
        for d in inputs:
            d.attach_grad()
        with autograd.record():
            out = net(*inputs)
        if test_grad:
            out.backward()
        results.append((out.asnumpy(), [d.grad.asnumpy() for d in inputs] if test_grad else []))
    (plain, plain_grads), (hybrid, hybrid_grads) = results
    assert_almost_equal(plain, hybrid, rtol=rtol, atol=atol)
    for a, b in zip(plain_grads, hybrid_grads, strict=True):
        assert_almost_equal(a, b, rtol=rtol, atol=atol)
    if numpy_func is not None:
        expected = numpy_func(*[d.asnumpy() for d in data_l])
        assert_almost_equal(plain, expected, rtol=rtol, atol=atol)


def random_arrays(*shapes: Any) -> Any:
    """Standard-normal float32 numpy arrays (one per shape; a lone shape gives one array)."""
    rng = _random.generator()
    arrays = [rng.standard_normal(s).astype(numpy.float32) if s else
              numpy.float32(rng.standard_normal()) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def rand_ndarray(shape: Any, stype: str = "default", density: float | None = None,
                 dtype: Any = None, ctx: Context | None = None, **_: Any) -> NDArray:
    """A uniform(0, 1) dense array (sparse storage is not supported by the engine)."""
    if stype != "default":
        raise NotImplementedError("sparse storage types are not supported by the engine")
    host = _random.generator().uniform(0, 1, shape)
    return array(host, ctx=ctx or default_context() or cpu(), dtype=dtype or numpy.float32)


def assert_almost_equal_ignore_nan(a: Any, b: Any, rtol: float | None = None,
                                   atol: float | None = None,
                                   names: tuple[str, str] = ("a", "b")) -> None:
    """``assert_almost_equal`` after zeroing the positions where either side is NaN."""
    a_host, b_host = _host(a).copy(), _host(b).copy()
    nan = numpy.isnan(a_host) | numpy.isnan(b_host)
    a_host[nan] = 0
    b_host[nan] = 0
    assert_almost_equal(a_host, b_host, rtol, atol, names)


def same_array(array1: NDArray, array2: NDArray) -> bool:
    """True when both NDArrays share their memory (a write to one shows in the other)."""
    return bool(numpy.shares_memory(array1.raw, array2.raw))


def random_sample(population: Any, k: int) -> list[Any]:
    """``k`` distinct elements of ``population`` drawn with the engine's generator."""
    population = list(population)
    picks = _random.generator().choice(len(population), size=k, replace=False)
    return [population[int(i)] for i in picks]


def random_uniform_arrays(*shapes: Any, low: float = 0.0, high: float = 1.0,
                          dtype: Any = numpy.float32) -> Any:
    """Uniform numpy arrays (one per shape; a lone shape gives one array)."""
    rng = _random.generator()
    arrays = [rng.uniform(low, high, s).astype(dtype) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def np_reduce(dat: numpy.ndarray, axis: Any, keepdims: bool, numpy_reduce_func: Any):
    """Apply a numpy reduction over one or several axes (None: all), keeping dims if asked."""
    if axis is None:
        axes = tuple(range(dat.ndim))
    elif isinstance(axis, int):
        axes = (axis,)
    else:
        axes = tuple(axis)
    out = dat
    for ax in sorted((a % dat.ndim for a in axes), reverse=True):
        out = numpy_reduce_func(out, axis=ax, keepdims=True)
    if not keepdims:
        out = out.reshape([n for i, n in enumerate(dat.shape)
                           if i not in {a % dat.ndim for a in axes}])
    return out


def compare_ndarray_tuple(t1: Any, t2: Any, rtol: float | None = None,
                          atol: float | None = None) -> None:
    """Compare two (nested) tuples of NDArrays element by element; None matches None."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, (tuple, list)):
        for a, b in zip(t1, t2, strict=True):
            compare_ndarray_tuple(a, b, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def compare_optimizer(opt1: Any, opt2: Any, shape: Any, dtype: Any, w_stype: str = "default",
                      g_stype: str = "default", rtol: float = 1e-4, atol: float = 1e-5,
                      compare_states: bool = True, ntensors: int = 1) -> None:
    """Give two optimizers the same random weights and gradients, update once, and assert
    the weights (and states) agree. A list of shapes updates ``opt2`` on all at once."""
    if w_stype != "default" or g_stype != "default":
        raise NotImplementedError("sparse storage types are not supported by the engine")
    from .ndarray import random as draws

    ctx = default_context()
    shapes = shape if isinstance(shape, list) else [shape]
    w1 = [draws.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shapes]
    g1 = [draws.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shapes]
    w2, g2 = [w.copy() for w in w1], [g.copy() for g in g1]
    states1 = [opt1.create_state_multi_precision(i, w) for i, w in enumerate(w1)]
    states2 = [opt2.create_state_multi_precision(i, w) for i, w in enumerate(w2)]
    if compare_states:
        compare_ndarray_tuple(tuple(states1), tuple(states2))
    for i in range(len(shapes)):
        opt1.update_multi_precision(i, w1[i], g1[i], states1[i])
    if isinstance(shape, list):
        opt2.update_multi_precision(list(range(len(shapes))), w2, g2, states2)
    else:
        opt2.update_multi_precision(0, w2[0], g2[0], states2[0])
    if compare_states:
        compare_ndarray_tuple(tuple(states1), tuple(states2), rtol=rtol, atol=atol)
    for a, b in zip(w1, w2, strict=True):
        assert_almost_equal(a, b, rtol=rtol, atol=atol)


@contextlib.contextmanager
def environment(*args: Any) -> Iterator[None]:
    """Set environment variables for a block: ``environment('NAME', 'value')`` or
    ``environment({'A': '1', 'B': None})`` (None unsets); the old values come back after."""
    changes = args[0] if len(args) == 1 and isinstance(args[0], dict) else {args[0]: args[1]}
    saved = {name: os.environ.get(name) for name in changes}
    try:
        for name, value in changes.items():
            _setenv(name, value)
        yield
    finally:
        for name, value in saved.items():
            _setenv(name, value)


def _setenv(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)


# the symbol-side helpers (check_consistency, ...) live in their own module
from .test_utils_symbol import (  # noqa: E402
    check_consistency,
    discard_stderr,
    effective_dtype,
)

__all__ += ["check_consistency", "discard_stderr", "effective_dtype"]
