"""``mx.test_utils``: the helpers MXNet users call from their own tests.

>>> from engine import nd, test_utils
>>> test_utils.assert_almost_equal(nd.ones((2,)), [1.0, 1.0])
>>> test_utils.same(nd.zeros((2,)).asnumpy(), [0.0, 0.0])
True
"""

from __future__ import annotations

from typing import Any

import numpy

from . import random as _random
from .context import Context, cpu, current_context
from .ndarray import NDArray, array

__all__ = [
    "almost_equal", "assert_almost_equal", "assert_exception", "default_context",
    "default_dtype", "get_atol", "get_rtol", "rand_ndarray", "rand_shape_2d", "rand_shape_3d",
    "rand_shape_nd", "random_arrays", "same", "set_default_context", "assert_allclose",
]

_default_context: list[Context] = []


def default_context() -> Context:
    """The context tests run on (the current context unless one was set)."""
    return _default_context[-1] if _default_context else current_context()


def set_default_context(ctx: Context) -> None:
    _default_context[:] = [ctx]


def default_dtype() -> Any:
    return numpy.float32


def get_rtol(rtol: float | None = None) -> float:
    return 1e-5 if rtol is None else rtol


def get_atol(atol: float | None = None) -> float:
    return 1e-20 if atol is None else atol


def _host(x: Any) -> numpy.ndarray:
    return x.asnumpy() if isinstance(x, NDArray) else numpy.asarray(x)


def same(a: Any, b: Any) -> bool:
    """True when both arrays hold exactly the same values."""
    return bool(numpy.array_equal(_host(a), _host(b)))


def almost_equal(a: Any, b: Any, rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False) -> bool:
    return bool(numpy.allclose(_host(a), _host(b), rtol=get_rtol(rtol), atol=get_atol(atol),
                               equal_nan=equal_nan))


def assert_almost_equal(a: Any, b: Any, rtol: float | None = None, atol: float | None = None,
                        names: tuple[str, str] = ("a", "b"), equal_nan: bool = False,
                        use_broadcast: bool = True, mismatches: Any = None) -> None:
    """Fail with numpy's report when ``a`` and ``b`` differ beyond the tolerances."""
    a_host, b_host = _host(a), _host(b)
    if not use_broadcast and a_host.shape != b_host.shape:
        raise AssertionError(f"shapes differ: {names[0]} {a_host.shape}, {names[1]} {b_host.shape}")
    numpy.testing.assert_allclose(a_host, b_host, rtol=get_rtol(rtol), atol=get_atol(atol),
                                  equal_nan=equal_nan, err_msg=f"{names[0]} vs {names[1]}")


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


def rand_shape_nd(num_dim: int, dim: int = 10) -> tuple[int, ...]:
    rng = _random.generator()
    return tuple(int(n) for n in rng.integers(1, dim + 1, size=num_dim))


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
