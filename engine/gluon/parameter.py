"""Gluon parameters: a named array per context plus its gradient (``mxnet.gluon.Parameter``).

Lifetime contract (the Trainer relies on it): once initialized, a Parameter keeps the same
per-context data NDArray and gradient NDArray objects, and every later write (``set_data``,
``initialize(force_reinit=True)``, loading) goes *into* those buffers. The Trainer may swap
their raw arrays (``.raw``) for views into one contiguous buffer. Only ``reset_ctx`` (new
devices) and ``cast`` (new dtype) must allocate new storage; ``cast`` keeps the NDArray objects.

>>> import engine as mx
>>> p = mx.gluon.Parameter("fc_weight", shape=(2, 3), init="ones")
>>> p.initialize()
>>> float(p.data().asnumpy().sum())
6.0
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import numpy

from .. import autograd
from .. import initializer as _init
from ..context import Context, cpu, current_context, device_of
from ..ndarray.ndarray import NDArray


class DeferredInitializationError(Exception):
    """Raised when a parameter's data is read before its deferred shape is known."""


def _shape_known(shape: Sequence[int] | None) -> bool:
    return shape is not None and all(int(s) > 0 for s in shape)


def _as_ctx_list(ctx: Any) -> list[Context]:
    if ctx is None:
        return [current_context()]
    if isinstance(ctx, (Context, str)):
        return [device_of(ctx)]
    return [device_of(c) for c in ctx]


class Parameter:
    """A weight of a Block, held on one or more contexts.

    ``shape`` may contain 0 for dimensions inferred at the first forward pass (with
    ``allow_deferred_init=True``). ``grad_req`` is 'write', 'add' or 'null'.

    >>> import engine as mx
    >>> p = mx.gluon.Parameter("w", shape=(0, 4), allow_deferred_init=True)
    >>> p.initialize(); p.shape = (3, 4); p._finish_deferred_init(); p.data().shape
    (3, 4)
    """

    def __init__(self, name: str, grad_req: str = "write", shape: Any = None,
                 dtype: Any = numpy.float32, lr_mult: float = 1.0, wd_mult: float = 1.0,
                 init: Any = None, allow_deferred_init: bool = False,
                 differentiable: bool = True, stype: str = "default",
                 grad_stype: str = "default") -> None:
        if isinstance(shape, int):
            shape = (shape,)
        self.name = name
        self._shape: tuple[int, ...] | None = tuple(int(s) for s in shape) if shape else shape
        self._dtype = numpy.dtype(dtype).type
        self.lr_mult = lr_mult
        self.wd_mult = wd_mult
        self.init = init
        self._allow_deferred_init = allow_deferred_init
        self._differentiable = differentiable
        if stype != "default" or grad_stype != "default":
            raise ValueError("Rudder supports only dense ('default') parameter storage")
        self._stype = stype
        self._grad_stype = grad_stype
        if grad_req not in ("write", "add", "null"):
            raise ValueError(f"grad_req must be one of 'write', 'add', 'null', got {grad_req!r}")
        self._grad_req = grad_req if differentiable else "null"
        self._ctx_data: list[NDArray] | None = None
        self._ctx_grad: list[NDArray] | None = None
        # gradient buffers survive grad_req='null' so switching back keeps their identity
        self._grad_buffers: list[NDArray] | None = None
        self._ctx_list: list[Context] | None = None
        self._deferred_init: tuple[Any, ...] = ()
        self._trainer: Any = None
        self._var: Any = None  # the Symbol var() made once, as MXNet keeps it

    def __repr__(self) -> str:
        return f"Parameter {self.name} (shape={self.shape}, dtype={numpy.dtype(self.dtype).name})"

    # ------------------------------------------------------------------ attributes
    @property
    def shape(self) -> tuple[int, ...] | None:
        return self._shape

    @shape.setter
    def shape(self, new_shape: Any) -> None:
        new_shape = tuple(int(s) for s in new_shape)
        if self._shape is None:
            self._shape = new_shape
            return
        compatible = len(self._shape) == len(new_shape) and all(
            old in (0, new) for new, old in zip(new_shape, self._shape, strict=True)
        )
        if not compatible:
            raise ValueError(
                f"Parameter '{self.name}': expected shape {self._shape} is incompatible with "
                f"given shape {new_shape}"
            )
        self._shape = new_shape

    @property
    def dtype(self) -> Any:
        return self._dtype

    @dtype.setter
    def dtype(self, dtype: Any) -> None:
        self._dtype = numpy.dtype(dtype).type

    @property
    def _data(self) -> list[NDArray] | None:
        """MXNet's name for the per-context arrays (None before initialization)."""
        return self._ctx_data

    @property
    def _grad(self) -> list[NDArray] | None:
        """MXNet's name for the per-context gradients (None with ``grad_req='null'``)."""
        return getattr(self, "_ctx_grad", None)

    @property
    def grad_req(self) -> str:
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req: str) -> None:
        if req not in ("write", "add", "null"):
            raise ValueError(f"grad_req must be one of 'write', 'add', 'null', got {req!r}")
        if not self._differentiable:
            req = "null"
        if self._grad_req == req:
            return
        self._grad_req = req
        if self._ctx_data is not None:
            self._init_grad()

    @property
    def stype(self) -> str:
        return self._stype

    @property
    def differentiable(self) -> bool:
        return self._differentiable

    def _set_trainer(self, trainer: Any) -> None:
        """Remember (weakly) the Trainer that updates this parameter."""
        self._trainer = weakref.ref(trainer) if trainer is not None else None

    def _get_trainer(self) -> Any:
        trainer = self._trainer
        if isinstance(trainer, weakref.ref):
            return trainer()
        return trainer

    # -------------------------------------------------------------- initialization
    def initialize(self, init: Any = None, ctx: Any = None, default_init: Any = None,
                   force_reinit: bool = False) -> None:
        """Allocate and fill the data on ``ctx`` (a context or list; default: current).

        The parameter's own ``init`` wins over ``init``, which wins over ``default_init``
        (``Uniform()``). Shapes with unknown (0) dims are initialized at the first forward.
        """
        if default_init is None:
            default_init = _init.Uniform()
        if self._ctx_data is not None and not force_reinit:
            return  # MXNet warns and keeps the values; silence keeps filterwarnings=error safe
        if init is None:
            init = default_init if self.init is None else self.init
        if ctx is None and self._ctx_list is not None:
            ctx = self._ctx_list  # re-initialization stays on (and writes into) the same arrays
        ctx_list = _as_ctx_list(ctx)
        if not _shape_known(self._shape):
            if self._allow_deferred_init:
                self._deferred_init = (init, ctx_list, default_init, None)
                return
            raise ValueError(
                f"Cannot initialize Parameter '{self.name}' because it has invalid shape: "
                f"{self._shape}. Give the shape explicitly (e.g. in_units for Dense)."
            )
        self._deferred_init = (init, ctx_list, default_init, None)
        self._finish_deferred_init()

    def _finish_deferred_init(self) -> None:
        if not self._deferred_init:
            return
        init, ctx_list, default_init, data = self._deferred_init
        if not _shape_known(self._shape):
            raise RuntimeError(
                f"Cannot initialize Parameter '{self.name}' because it has invalid shape: "
                f"{self._shape}. Please specify in_units, in_channels, etc for `Block`s."
            )
        with autograd.pause():
            if data is None:
                # fill on the host, then copy: every context starts with the same values
                data = NDArray(numpy.zeros(self._shape, dtype=self._dtype), cpu())
                _init.create(default_init)(
                    _init.InitDesc(self.name, {"__init__": init}), data
                )
            elif isinstance(data, NDArray):
                data = data.astype(self._dtype)
            else:
                data = NDArray(numpy.asarray(data, dtype=self._dtype), cpu())
            self._init_impl(data, ctx_list)
        self._deferred_init = ()

    def _init_impl(self, data: NDArray, ctx_list: list[Context]) -> None:
        existing = self._ctx_data
        if existing is not None and [a.context for a in existing] == list(ctx_list) and all(
            a.shape == data.shape and a.dtype == data.dtype for a in existing
        ):
            for arr in self._ctx_data:  # re-initialization writes into the existing buffers
                arr.raw[...] = _to_ctx_raw(data, arr.context)
            return
        self._ctx_list = list(ctx_list)
        self._ctx_data = [NDArray(_to_ctx_raw(data, c), c) for c in ctx_list]
        self._grad_buffers = None
        self._init_grad()

    def _init_grad(self) -> None:
        assert self._ctx_data is not None
        if self._grad_req == "null":
            self._ctx_grad = None
            for arr in self._ctx_data:
                arr._set_variable(None, "null")
            return
        buffers = self._grad_buffers
        if buffers is None or [b.shape for b in buffers] != [d.shape for d in self._ctx_data]:
            buffers = [NDArray(d.xp.zeros_like(d.raw), d.context) for d in self._ctx_data]
            self._grad_buffers = buffers
        else:
            for b in buffers:
                b.raw[...] = 0
        self._ctx_grad = buffers
        autograd.mark_variables(self._ctx_data, self._ctx_grad, self._grad_req)

    # ---------------------------------------------------------------------- access
    def _check_initialized(self, ctx: Context | None = None) -> None:
        if self._ctx_data is not None:
            return
        if self._deferred_init:
            raise DeferredInitializationError(
                f"Parameter '{self.name}' has not been initialized yet because initialization "
                "was deferred. Actual initialization happens during the first forward pass. "
                "Please pass one batch of data through the network before accessing Parameters. "
                "You can also avoid deferred initialization by specifying in_units, "
                "num_features, etc., for network layers."
            )
        raise RuntimeError(
            f"Parameter '{self.name}' has not been initialized. Note that you should "
            "initialize parameters and create Trainer with Block.collect_params() instead of "
            "Block.params because the later does not include Parameters of nested child Blocks"
        )

    def _index(self, ctx: Any) -> int:
        assert self._ctx_list is not None
        ctx = current_context() if ctx is None else device_of(ctx)
        if ctx in self._ctx_list:
            return self._ctx_list.index(ctx)
        raise RuntimeError(
            f"Parameter '{self.name}' was not initialized on context {ctx}. It was only "
            f"initialized on {self._ctx_list}."
        )

    def data(self, ctx: Any = None) -> NDArray:
        """The data on ``ctx`` (default: the current context, or the only one)."""
        self._check_initialized()
        assert self._ctx_data is not None and self._ctx_list is not None
        if ctx is None and len(self._ctx_list) == 1:
            return self._ctx_data[0]
        return self._ctx_data[self._index(ctx)]

    def list_data(self) -> list[NDArray]:
        self._check_initialized()
        assert self._ctx_data is not None
        return list(self._ctx_data)

    def grad(self, ctx: Any = None) -> NDArray:
        self._check_initialized()
        if self._ctx_grad is None:
            raise RuntimeError(
                f"Cannot get gradient array for Parameter '{self.name}' because grad_req='null'"
            )
        assert self._ctx_list is not None
        if ctx is None and len(self._ctx_list) == 1:
            return self._ctx_grad[0]
        return self._ctx_grad[self._index(ctx)]

    def list_grad(self) -> list[NDArray]:
        self._check_initialized()
        if self._ctx_grad is None:
            raise RuntimeError(
                f"Cannot get gradient array for Parameter '{self.name}' because grad_req='null'"
            )
        return list(self._ctx_grad)

    def list_ctx(self) -> list[Context]:
        if self._ctx_data is None:
            if self._deferred_init:
                return list(self._deferred_init[1])
            self._check_initialized()
        assert self._ctx_list is not None
        return list(self._ctx_list)

    # ---------------------------------------------------------------------- writes
    def set_data(self, data: Any) -> None:
        """Write ``data`` into every context's buffer (in place)."""
        shape = tuple(data.shape) if hasattr(data, "shape") else numpy.shape(data)
        self.shape = shape
        if self._ctx_data is None:
            if not self._deferred_init:
                self._check_initialized()
            self._deferred_init = self._deferred_init[:3] + (data,)
            return
        trainer = self._get_trainer()
        reset = getattr(trainer, "_reset_kvstore", None)
        if trainer is not None and getattr(trainer, "_kv_initialized", False) and \
                getattr(trainer, "_update_on_kvstore", False) and callable(reset):
            reset()  # the kvstore's copy of the weight would otherwise overwrite this
        for arr in self._ctx_data:
            arr.raw[...] = _to_ctx_raw(data, arr.context).reshape(arr.shape)

    def zero_grad(self) -> None:
        """Set the gradient buffers to 0 (e.g. with grad_req='add')."""
        for g in self._ctx_grad or []:
            g.raw[...] = 0

    def _load_init(self, data: Any, ctx: Any, cast_dtype: bool = False,
                   dtype_source: str = "current") -> None:
        """Initialize from a loaded array, or write it in if already initialized."""
        raw = data.asnumpy() if isinstance(data, NDArray) else numpy.asarray(data)
        if self._shape:
            compatible = len(self._shape) == raw.ndim and all(
                s in (0, d) for s, d in zip(self._shape, raw.shape, strict=True)
            )
            if not compatible:
                raise ValueError(
                    f"Failed loading Parameter '{self.name}' from saved params: shape "
                    f"incompatible expected {self._shape} vs saved {raw.shape}"
                )
        self._shape = tuple(raw.shape)
        if cast_dtype:
            if dtype_source == "saved":
                self._dtype = raw.dtype.type
            raw = raw.astype(self._dtype)
        elif numpy.dtype(self._dtype) != raw.dtype:
            raise ValueError(
                f"Failed loading Parameter '{self.name}' from saved params: dtype incompatible "
                f"expected {numpy.dtype(self._dtype).name} vs saved {raw.dtype.name}. Set "
                "cast_dtype=True to cast the dtype of saved params."
            )
        if self._ctx_data is None:
            if self._deferred_init:
                ctx = ctx if ctx is not None else self._deferred_init[1]
            self._deferred_init = ()
            self._init_impl(NDArray(raw, cpu()), _as_ctx_list(ctx if ctx is not None else cpu()))
        else:
            if ctx is not None and set(_as_ctx_list(ctx)) != set(self.list_ctx()):
                raise ValueError(
                    f"Failed to load Parameter '{self.name}' on {ctx} because it was previously "
                    f"initialized on {self.list_ctx()}."
                )
            self.set_data(raw)

    def _reduce(self) -> NDArray:
        """The value averaged over contexts, on cpu (what save_parameters writes)."""
        self._check_initialized()
        assert self._ctx_data is not None
        if len(self._ctx_data) == 1:
            return NDArray(numpy.array(self._ctx_data[0].asnumpy()), cpu())
        total = sum(a.asnumpy().astype(numpy.float64) for a in self._ctx_data)
        return NDArray((total / len(self._ctx_data)).astype(self._dtype), cpu())

    def reset_ctx(self, ctx: Any) -> None:
        """Move the data to new context(s). This allocates new arrays (a new Trainer is
        needed afterwards, as in MXNet)."""
        ctx_list = _as_ctx_list(ctx)
        if self._ctx_data is not None:
            value = self._reduce()
            self._init_impl(value, ctx_list)
        elif self._deferred_init:
            init, _, default_init, data = self._deferred_init
            self._deferred_init = (init, ctx_list, default_init, data)
        else:
            raise ValueError(
                f"Cannot reset context for Parameter '{self.name}' because it has not been "
                "initialized."
            )

    def cast(self, dtype: Any) -> None:
        """Change the dtype; the data/grad NDArray objects are kept, their storage is not."""
        self._dtype = numpy.dtype(dtype).type
        if self._ctx_data is None:
            return
        with autograd.pause():
            for arr in self._ctx_data:
                arr.raw = arr.raw.astype(self._dtype)
            for g in self._grad_buffers or []:
                g.raw = g.raw.astype(self._dtype)
        self._init_grad()

    def var(self) -> Any:
        """This parameter as a Symbol variable (name, shape, dtype, lr/wd multipliers, init),
        as a HybridBlock called on Symbols passes it to ``hybrid_forward``.

        >>> Parameter("fc_weight", shape=(2, 3)).var().name
        'fc_weight'
        """
        if self._var is None:
            from .. import symbol

            self._var = symbol.var(self.name, shape=self.shape, dtype=self.dtype,
                                   lr_mult=self.lr_mult, wd_mult=self.wd_mult, init=self.init)
        return self._var


def _to_ctx_raw(data: Any, ctx: Context) -> Any:
    """``data`` (NDArray, numpy array or scalar) as a raw array of ``ctx``'s backend."""
    raw = data.raw if isinstance(data, NDArray) else data
    xp = ctx.xp
    if xp is numpy:
        from ..backend import to_numpy

        return numpy.array(to_numpy(raw), copy=True)
    with xp.cuda.Device(ctx.device_id):
        return xp.array(raw, copy=True)


class Constant(Parameter):
    """A parameter that is never updated (grad_req='null'), initialized to ``value``.

    >>> c = Constant("pi", [3.14]); c.initialize(); c.data().asnumpy().tolist()
    [3.140000104904175]
    """

    def __init__(self, name: str, value: Any) -> None:
        if isinstance(value, NDArray):
            value = value.asnumpy()
        self.value = numpy.asarray(value, dtype=numpy.float32 if not hasattr(value, "dtype")
                                   else value.dtype)
        super().__init__(name, grad_req="null", shape=self.value.shape,
                         dtype=self.value.dtype, init=_init.Constant(self.value))

    @Parameter.grad_req.setter  # type: ignore[attr-defined,untyped-decorator]
    def grad_req(self, req: str) -> None:
        # as MXNet: warn and keep 'null', so collect_params().setattr('grad_req', ...) works
        if req != "null":
            warnings.warn(
                f'Constant parameter "{self.name}" does not support grad_req other than "null", '
                f'and new value "{req}" is ignored.', UserWarning, stacklevel=2)


from .parameter_dict import ParameterDict  # noqa: E402, F401 (re-export)
