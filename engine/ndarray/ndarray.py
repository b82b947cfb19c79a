"""The NDArray type: a numpy/cupy array on a context, with autograd bookkeeping.

Operations return new NDArrays through :func:`apply_op`, which records a backward rule
when autograd is recording and an input needs a gradient. In-place updates
(``w[:] = v``, ``w -= lr * g``) always write into the existing buffer, so arrays that are
views into a larger buffer (the Trainer's contiguous parameter storage) stay views.

>>> from engine import nd
>>> a = nd.array([[1, 2], [3, 4]])
>>> (a * 2 + 1).asnumpy().tolist()
[[3.0, 5.0], [7.0, 9.0]]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy

from .. import autograd as _ag
from .. import backend
from .. import util as _util
from ..context import Context, current_context

# A backward rule maps the output's raw gradient to one raw gradient (or None) per input.
BackwardRule = Callable[[Any], Sequence[Any]]


class _Node:
    """How an array was computed: its input arrays and the rule that differentiates it."""

    __slots__ = ("inputs", "backward", "op")

    def __init__(self, inputs: tuple[NDArray, ...], backward: BackwardRule) -> None:
        self.inputs = inputs
        self.backward: BackwardRule | None = backward
        # (kind, name, ...) for ops whose gradient can itself be recorded, so that
        # autograd.grad(create_graph=True) can differentiate it (see higher_order.py)
        self.op: tuple[Any, ...] | None = None


class NDArray:
    """An n-dimensional array on a device (``mxnet.nd.NDArray``).

    ``raw`` is the backing numpy/cupy array, shared (no copy); assigning it rebinds the
    array (the Trainer makes parameters views of one flat buffer that way). Autograd does
    not see raw writes.

    >>> a = NDArray(numpy.zeros(2)); a.raw[0] = 5; a.asnumpy().tolist()
    [5.0, 0.0]
    """

    __slots__ = ("_data", "_ctx", "_node", "_grad", "_grad_req", "_fresh_grad", "__weakref__")
    __array_priority__ = 1000.0  # numpy scalars defer to our reflected operators
    raw: Any  # the public name of the ``_data`` slot (aliased below the class)

    def __init__(self, data: Any, ctx: Context | None = None) -> None:
        self._data = data
        self._ctx = ctx if ctx is not None else current_context()
        self._node: _Node | None = None
        self._grad: NDArray | None = None
        self._grad_req = "null"
        self._fresh_grad = False

    # ----------------------------------------------------------------- properties
    @property
    def xp(self) -> ModuleType:
        return backend.array_module(self._data)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> Any:
        return self._data.dtype.type

    @property
    def size(self) -> int:
        return int(self._data.size)

    @property
    def ndim(self) -> int:
        return int(self._data.ndim)

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context
    device = context

    @property
    def stype(self) -> str:
        return "default"

    @property
    def grad(self) -> NDArray | None:
        return self._grad

    @property
    def T(self) -> NDArray:  # noqa: N802 - MXNet's name
        # a new transposed array; an array of fewer than two axes is its own transpose
        return self if self.ndim < 2 else self.transpose()

    @property
    def handle(self) -> int:
        return id(self)

    # ---------------------------------------------------------------- conversion
    def asnumpy(self) -> numpy.ndarray:
        """A numpy copy of the data (a host transfer on GPU)."""
        return numpy.array(backend.to_numpy(self._data), copy=True)

    def asscalar(self) -> Any:
        """The single value as a numpy scalar of the array's dtype (``numpy.float32(1.5)``)."""
        if self.size != 1:
            raise ValueError(f"asscalar needs an array of size 1, got shape {self.shape}")
        return backend.to_numpy(self._data).reshape(())[()]

    def item(self) -> Any:
        return self.asscalar().item()

    def tostype(self, stype: str) -> NDArray:
        """A copy in storage type ``stype``; only dense ('default') storage exists here."""
        if stype != "default":
            raise NotImplementedError(
                f"storage type {stype!r} is not supported: the engine stores arrays densely"
            )
        return self.copy()

    def tolist(self) -> Any:
        return self.asnumpy().tolist()

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        dtype = numpy.dtype(dtype)
        if not copy and self._data.dtype == dtype:
            return self
        src = self._data
        return apply_op(src.astype(dtype), (self,), lambda g: (g.astype(src.dtype),), self._ctx)

    def copy(self, order: str = "C") -> NDArray:
        if order != "C":
            raise NotImplementedError(f"copy(order={order!r}): only C order is supported")
        return NDArray(self._data.copy(), self._ctx)

    def copyto(self, other: NDArray | Context) -> NDArray:
        """Copy into an existing array (in place) or onto another context."""
        if isinstance(other, Context):
            return NDArray(_move(self._data, other), other)
        if other.shape != self.shape:
            raise ValueError(f"copyto: shape mismatch, {self.shape} into {other.shape}")
        other._data[...] = _move(self._data, other._ctx)
        return other

    def as_in_context(self, ctx: Context) -> NDArray:
        if ctx == self._ctx:
            return self
        data = self._data
        return apply_op(
            _move(data, ctx), (self,), lambda g: (_move(g, self._ctx),), ctx
        )

    as_in_ctx = as_in_context
    to_device = as_in_context

    def wait_to_read(self) -> None:
        """Block until the data is computed (synchronises the GPU stream on cupy)."""
        if self.xp is not numpy:
            self.xp.cuda.get_current_stream().synchronize()

    def __array__(self, dtype: Any = None, copy: Any = None) -> numpy.ndarray:
        out = backend.to_numpy(self._data)
        return out.astype(dtype) if dtype is not None else out

    # ------------------------------------------------------------------ autograd
    def attach_grad(self, grad_req: str = "write", stype: str | None = None) -> None:
        """Allocate a zero gradient buffer and make this array a differentiable variable."""
        self._set_variable(NDArray(self.xp.zeros_like(self._data), self._ctx), grad_req)

    def _set_variable(self, grad: NDArray | None, grad_req: str) -> None:
        if grad_req not in ("write", "add", "null"):
            raise ValueError(f"grad_req must be 'write', 'add' or 'null', got {grad_req!r}")
        self._node = None
        self._grad = grad
        self._grad_req = grad_req

    def _accumulate_grad(self, g: Any) -> None:
        if self._grad_req == "null" or self._grad is None:
            return
        if self._grad_req == "add":
            self._grad._data += g
        else:
            self._grad._data[...] = g
        self._fresh_grad = True

    def detach(self) -> NDArray:
        return NDArray(self._data, self._ctx)

    def backward(
        self, out_grad: NDArray | None = None, retain_graph: bool = False, train_mode: bool = True
    ) -> None:
        _ag.backward([self], [out_grad], retain_graph=retain_graph, train_mode=train_mode)

    # ------------------------------------------------------------------- display
    def __repr__(self) -> str:
        if _util.is_np_array():  # mx.np's numpy-like form: array([...]) (float32 implied)
            text = repr(self.asnumpy()).replace(", dtype=float32)", ")")
            return text if self._ctx.device_type == "cpu" else f"{text} @{self._ctx}"
        shape = "x".join(str(s) for s in self.shape)
        return f"\n{self.asnumpy()}\n<NDArray {shape} @{self._ctx}>"

    def __str__(self) -> str:
        if _util.is_np_array():
            text = str(self.asnumpy())
            return text if self._ctx.device_type == "cpu" else f"{text} @{self._ctx}"
        return self.__repr__()

    def __format__(self, spec: str) -> str:
        # a 0-d array formats as its number; larger ones only without a format spec
        if self.ndim == 0:
            return format(self.asscalar(), spec)
        if spec:
            raise TypeError(f"unsupported format string {spec!r} for an NDArray of shape "
                            f"{self.shape}")
        return str(self)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        if self.size == 0:
            return False  # as MXNet: an empty array is falsy
        if self.size != 1:
            raise ValueError(
                "the truth value of an NDArray with more than one element is ambiguous"
            )
        return bool(self.asscalar())

    def __float__(self) -> float:
        return float(self.asscalar())

    def __int__(self) -> int:
        return int(self.asscalar())

    def __index__(self) -> int:
        if not numpy.issubdtype(self._data.dtype, numpy.integer):
            raise TypeError("only integer arrays can be used as an index")
        return int(self.asscalar())

    __hash__ = object.__hash__

    # -------------------------------------------------------------------- indexing
    def __getitem__(self, key: Any) -> NDArray:
        from .shape_ops import getitem

        return getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        """Write into this array's buffer.

        Under ``autograd.record()`` an array that is part of the graph cannot be written
        (its gradient would silently be wrong), and a part of an array cannot be assigned a
        value that needs a gradient (the write would have to be recorded in place): both
        raise MXNetError, as in MXNet. A whole-array assignment (``x[:] = y``) is a plain
        copy there, not recorded.
        """
        from .inplace import check_inplace_write, is_whole
        from .shape_ops import raw_index

        if _ag._state.recording:
            check_inplace_write(self, value, whole=is_whole(key))
        raw_key = raw_index(key)
        if isinstance(value, (list, tuple)):
            value = numpy.asarray(value)
        raw = as_raw(value, self)
        if getattr(raw, "ndim", 0) and raw.size == 1:
            # numpy 2 refuses a 1-element array where a scalar goes; MXNet broadcasts it
            raw = raw.reshape(())
        self._data[raw_key] = raw

    # operators are attached in ops.py, next to their backward rules


# The same slot descriptor under its public name: reading ``x.raw`` costs what a plain
# attribute read costs (a property would add ~20 ns, paid per parameter in Trainer.step).
NDArray.raw = NDArray._data  # type: ignore[misc]


def as_raw(value: Any, like: NDArray | None = None) -> Any:
    """The raw array (or scalar) behind ``value``, moved to ``like``'s device if needed."""
    if isinstance(value, NDArray):
        if like is not None and value._ctx.device_type != like._ctx.device_type:
            return _move(value._data, like._ctx)
        return value._data
    if like is not None and isinstance(value, numpy.ndarray) and like.xp is not numpy:
        return like.xp.asarray(value)
    return value


def _move(data: Any, ctx: Context) -> Any:
    xp = ctx.xp
    if backend.array_module(data) is xp and xp is numpy:
        return data.copy()
    if xp is numpy:
        return backend.to_numpy(data).copy()
    with xp.cuda.Device(ctx.device_id):
        return xp.asarray(data).copy()


def needs_grad(arr: NDArray) -> bool:
    return arr._node is not None or arr._grad_req != "null"


class _ShapeRules(threading.local):
    """Which front end is deciding result shapes on this thread.

    ``numpy_front_end`` is set by ``engine.np`` (MXNet's ``mx.np``), whose operators return
    real 0-d arrays; the legacy ``mx.nd`` operators never do (see :func:`apply_op`).
    """

    numpy_front_end = False


shape_rules = _ShapeRules()


@contextmanager
def numpy_shapes() -> Iterator[None]:
    """A scope in which operators keep 0-d results (the ``mx.np`` front end's rule)."""
    previous, shape_rules.numpy_front_end = shape_rules.numpy_front_end, True
    try:
        yield
    finally:
        shape_rules.numpy_front_end = previous


def legacy_shape(out: Any, inputs: Sequence[NDArray] = (), keep_0d: bool = False) -> bool:
    """Whether the raw result ``out`` must be reshaped from 0-d to ``(1,)``.

    MXNet 1.9's legacy ``mx.nd`` operators have no 0-d results: full reductions, ``dot`` of
    two vectors, ``squeeze`` of an all-ones shape and integer indexing down to a single
    element return shape ``(1,)`` (indexing keeps 0-d under ``mx.np_shape()``, which the
    caller passes as ``keep_0d``). A 0-d input can only come from ``mx.np``, ``nd.array`` of
    a scalar or numpy-shape code, so its results stay 0-d.

    >>> from engine import nd
    >>> nd.sum(nd.ones((2, 3))).shape, nd.array([1, 2])[0].shape
    ((1,), (1,))
    """
    if keep_0d or getattr(out, "ndim", 1) != 0 or shape_rules.numpy_front_end:
        return False
    if _util.is_np_array():  # npx.set_np(): code written for mx.np arrays
        return False
    return all(arr._data.ndim for arr in inputs)


def apply_op(
    out: Any, inputs: tuple[NDArray, ...], backward: BackwardRule, ctx: Context | None = None,
    keep_0d: bool = False, view: bool = False,
) -> NDArray:
    """Wrap a raw result and, when recording, remember how to differentiate it.

    ``backward(g)`` receives the raw gradient of the output and returns one raw gradient
    (or None) per input, each of that input's shape. A 0-d result follows
    :func:`legacy_shape` (``keep_0d`` opts out, as indexing does under ``mx.np_shape()``).

    As in MXNet, an operator's result is a new array: a raw result that is a view of an
    input's buffer (numpy's reshape, transpose, slicing, broadcast_to) is copied, unless
    ``view`` says this is one of the few results MXNet shares memory with its input
    (``x.reshape()``, contiguous basic indexing, the ``inplace=True`` forms).
    """
    if not view and getattr(out, "base", None) is not None:
        out = _unaliased(out, inputs)
    if legacy_shape(out, inputs, keep_0d):
        out = out.reshape((1,))
        backward = _reshaped_rule(backward)
    result = NDArray(out, ctx if ctx is not None else inputs[0]._ctx)
    if _ag._state.recording:
        for arr in inputs:
            if arr._node is not None or arr._grad_req != "null":
                result._node = _Node(inputs, backward)
                break
    return result


def _unaliased(out: Any, inputs: tuple[NDArray, ...]) -> Any:
    """``out``, or a copy of it where it may share memory with an input's buffer."""
    may_share = backend.array_module(out).may_share_memory
    for arr in inputs:
        if may_share(out, arr._data):
            return out.copy()
    return out


def _reshaped_rule(backward: BackwardRule) -> BackwardRule:
    # the rule was written for the 0-d result; hand it the (1,) gradient back as 0-d
    return lambda g: backward(g.reshape(()))


def unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast gradient back down to an input's shape."""
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def write_out(result: Any, out: Any) -> Any:
    """Deliver an operator's result into ``out=`` as MXNet does: same shape, written in place
    (cast to ``out``'s dtype), ``out`` returned. Lists of results pair with lists of outs."""
    if out is None:
        return result
    if isinstance(result, (list, tuple)):
        outs = out if isinstance(out, (list, tuple)) else [out]
        if len(outs) != len(result):
            raise ValueError(f"out= got {len(outs)} arrays for {len(result)} outputs")
        return [write_out(r, o) for r, o in zip(result, outs, strict=True)]
    if not isinstance(out, NDArray):
        raise TypeError(f"out must be an NDArray, got {type(out).__name__}")
    raw = result._data if isinstance(result, NDArray) else result
    shape = tuple(getattr(raw, "shape", ()))
    if shape != out.shape:
        from ..base import MXNetShapeError

        raise MXNetShapeError(
            f"Shape inconsistent, Provided = {list(out.shape)}, inferred shape={list(shape)}"
        )
    out._data[...] = as_raw(result, out)
    return out
