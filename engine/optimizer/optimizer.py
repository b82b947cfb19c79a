"""The ``Optimizer`` base class: hyperparameters, lr/wd multipliers, update counts, registry.

An optimizer is ``create_state`` + an update rule. Built-in optimizers implement the rule
once, as ``_rule(w, g, state, lr, wd, t, seg)`` over raw arrays; the same rule serves the
per-parameter MXNet API ``update(index, weight, grad, state)`` and the Trainer's fused step
over one contiguous buffer holding every parameter (see :mod:`engine.optimizer.segments`).
A user optimizer may instead override ``update`` with NDArray code, as in MXNet.

>>> import engine as mx
>>> opt = mx.optimizer.create("sgd", learning_rate=0.1)
>>> w, g = mx.nd.ones((2,)), mx.nd.ones((2,))
>>> opt.update(0, w, g, opt.create_state(0, w))
>>> [round(v, 4) for v in w.asnumpy().tolist()]
[0.9, 0.9]
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from typing import Any

import numpy

from ..ndarray import NDArray
from ..registry import Registry
from . import parallel
from .segments import WHOLE, WholeArray, scalar_or_vector
from .state import StateDictMixin

_REGISTRY = Registry("optimizer")
_log = logging.getLogger(__name__)

SCHEDULER_CONFLICT = (
    "LRScheduler of the optimizer has already been defined. Note that set_learning_rate can "
    "mutate the value of the learning rate of the optimizer only when the LRScheduler of the "
    "optimizer is undefined."
)
LIVE_LR_MODES = (None, "scale", "override")


def register(klass: type) -> type:
    """Register an optimizer class under its lower-cased name (a duplicate is an error)."""
    return _REGISTRY.register(klass)


def create(name: Any, **kwargs: Any) -> Optimizer:
    """An optimizer by case-insensitive name (an Optimizer instance passes through)."""
    if isinstance(name, Optimizer):
        if kwargs:
            raise ValueError("cannot pass optimizer arguments with an Optimizer instance")
        return name
    if not isinstance(name, str) or name.lower() not in _REGISTRY:
        raise ValueError(f"Cannot find optimizer {name}")
    return _REGISTRY.create(name, **kwargs)


def registered() -> dict[str, type]:
    """Registered name → class (every name, aliases included)."""
    return {name: _REGISTRY.get(name) for name in _REGISTRY.names()}


def check_learning_rate(lr: Any, allow_zero: bool = True) -> float:
    """A learning rate as float, or a ValueError naming ``learning_rate``."""
    if isinstance(lr, bool) or not isinstance(lr, (int, float, numpy.number)):
        raise ValueError(f"learning_rate must be a number, got {lr!r}")
    lr = float(lr)
    if not math.isfinite(lr) or lr < 0 or (lr == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"learning_rate must be a finite number {bound}, got {lr}")
    return lr


def raw_state(state: Any) -> Any:
    """The raw-array structure behind an NDArray state (tuples kept, None kept)."""
    if isinstance(state, NDArray):
        return state.raw
    if isinstance(state, (tuple, list)):
        return tuple(raw_state(s) for s in state)
    return state


class Optimizer(StateDictMixin):
    """Base class of all optimizers (``mxnet.optimizer.Optimizer``, 1.x numerics).

    Differences from MXNet: the "learning rate overwritten" notice goes to ``logging``
    instead of ``print``; hyperparameters are validated (a negative or NaN learning rate is
    a ValueError); ``set_learning_rate`` takes a ``mode`` for Rudder's live LR.

    >>> from engine import optimizer, lr_scheduler
    >>> opt = optimizer.SGD(learning_rate=0.5, lr_scheduler=lr_scheduler.FactorScheduler(1))
    >>> opt.learning_rate
    0.5
    """

    # True when the rule treats every element independently given scalar lr/wd/t, so the
    # Trainer may split a big flat buffer across threads (see engine.optimizer.parallel).
    _elementwise = False
    # False when the rule cannot run on many parameters packed in one flat buffer (its
    # state is not weight-shaped, or it needs each parameter on its own).
    _fusable = True
    register = staticmethod(register)
    create_optimizer = staticmethod(create)
    opt_registry = _REGISTRY

    def __init__(self, rescale_grad: float = 1.0, param_idx2name: dict | None = None,
                 wd: float = 0.0, clip_gradient: float | None = None,
                 learning_rate: float | None = None, lr_scheduler: Any = None,
                 sym: Any = None, begin_num_update: int = 0, multi_precision: bool = False,
                 param_dict: dict | None = None) -> None:
        self.rescale_grad = rescale_grad
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is not None and not callable(lr_scheduler):
            raise ValueError(f"lr_scheduler must be callable, got {type(lr_scheduler).__name__}")
        if lr_scheduler is None and learning_rate is None:
            learning_rate = 0.01
        if learning_rate is not None:
            learning_rate = check_learning_rate(learning_rate)
        self.lr = learning_rate
        if lr_scheduler is not None and learning_rate is not None:
            if getattr(lr_scheduler, "base_lr", learning_rate) != learning_rate:
                _log.warning("learning rate from ``lr_scheduler`` has been overwritten by "
                             "``learning_rate`` in optimizer.")
                lr_scheduler.base_lr = learning_rate
        if not math.isfinite(float(wd)):
            raise ValueError(f"wd must be finite, got {wd}")
        self.wd = wd
        self.lr_mult: dict[Any, float] = {}
        self.wd_mult: dict[Any, float] = {}
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts: dict[int, dict[int, int]] = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        # temporaries of the rules, per (dtype, array type, device, thread); see _scratch
        self._scratch_buffers: dict[tuple[Any, ...], list[Any]] = {}
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.aggregate_num = 0
        self.idx2name = dict(param_idx2name or {})
        self.sym_info: tuple = ()
        if sym is not None and hasattr(sym, "attr_dict") and hasattr(sym, "list_arguments"):
            self.sym_info = (sym.attr_dict(), sym.list_arguments())  # Module's __lr_mult__
        self.param_dict = param_dict if param_dict is not None else {}
        # Rudder's live learning rate: a factor on the schedule, or a constant override.
        self._lr_scale = 1.0
        self._lr_override: float | None = None
        self.set_lr_mult({})
        self.set_wd_mult({})

    # ------------------------------------------------------------ states and updates
    def create_state(self, index: int, weight: NDArray) -> Any:
        """Auxiliary state for one weight (None when the rule needs none)."""
        return None

    def create_state_multi_precision(self, index: int, weight: NDArray) -> Any:
        """Like ``create_state``, plus an fp32 master copy for fp16 weights when enabled."""
        if self.multi_precision and weight.dtype == numpy.float16:
            master = weight.astype(numpy.float32)
            return self._mp_state(master, self.create_state(index, master))
        if weight.dtype == numpy.float16:
            _log.warning("Accumulating with float16 in optimizer can lead to poor accuracy or "
                         "slow convergence. Consider using multi_precision=True option of the "
                         "%s optimizer", type(self).__name__)
        return self.create_state(index, weight)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Update ``weight`` in place from ``grad`` (lists of each are accepted)."""
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state, strict=True):
                self.update(i, w, g, s)
            return
        if type(self)._rule is Optimizer._rule:
            raise NotImplementedError(f"{type(self).__name__} must implement update()")
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        self._rule(weight.raw, grad.raw, raw_state(state), lr, wd, t, WholeArray(index))

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """``update``, running on the fp32 master copy for fp16 weights when enabled."""
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state, strict=True):
                self.update_multi_precision(i, w, g, s)
            return
        if self.multi_precision and weight.dtype == numpy.float16:
            master, inner = self._mp_parts(state)
            self.update(index, master, grad.astype(numpy.float32), inner)
            weight.raw[...] = master.raw.astype(numpy.float16)
        else:
            self.update(index, weight, grad, state)

    # MXNet 1.x orders a multi-precision state (fp32 master, inner state), except SGD, NAG
    # and LARS, which store (inner state, fp32 master); saved trainer states depend on it.
    _master_last = False

    def _mp_state(self, master: Any, inner: Any) -> tuple[Any, Any]:
        return (inner, master) if self._master_last else (master, inner)

    def _mp_parts(self, state: Any) -> tuple[Any, Any]:
        """(fp32 master, inner state) of a multi-precision state, whatever its order."""
        return (state[1], state[0]) if self._master_last else (state[0], state[1])

    def _rule(self, w: Any, g: Any, state: Any, lr: Any, wd: Any, t: Any, seg: Any) -> None:
        """Apply the update to raw ``w`` in place; lr/wd/t are floats or per-segment vectors."""
        raise NotImplementedError

    # ----------------------------------------------------- fused many-parameter update
    def supports_fused(self) -> bool:
        """True when the update is the class's raw rule (no user override of update/state)."""
        cls = type(self)
        owner = next((k for k in cls.__mro__ if "_rule" in vars(k)), Optimizer)
        if owner is Optimizer or not owner._fusable:
            return False
        return (cls.update is owner.update
                and cls.update_multi_precision is owner.update_multi_precision
                and cls.create_state is owner.create_state
                and cls.create_state_multi_precision is owner.create_state_multi_precision)

    def fused_update(self, indices: list[int], w: Any, g: Any, state: Any, seg: Any) -> None:
        """One step for parameters ``indices`` laid end to end in raw flat ``w``/``g``."""
        self._update_count(indices)
        counts = self._index_update_count
        lr = scalar_or_vector(self._get_lrs(indices))
        wd = scalar_or_vector(self._get_wds(indices))
        t = scalar_or_vector([counts[i] for i in indices])
        if self.multi_precision and w.dtype == numpy.float16:
            master, inner = self._mp_parts(state)
            self._rule(master, g.astype(numpy.float32), inner, lr, wd, t, seg)
            w[...] = master.astype(numpy.float16)
            return

        def chunk(start: int, stop: int) -> None:
            self._rule(w[start:stop], g[start:stop], parallel.slice_state(state, start, stop),
                       lr, wd, t, seg)

        if not (self._elementwise and isinstance(w, numpy.ndarray)
                and all(isinstance(c, float) for c in (lr, wd, t))
                and parallel.run_chunked(w.size, chunk)):
            self._rule(w, g, state, lr, wd, t, seg)

    # ----------------------------------------------------------- shared rule helpers
    def _scratch(self, like: Any, count: int = 2) -> list[Any]:
        """Reusable temporaries shaped like ``like`` (no per-step allocation of big arrays)."""
        cache = self._scratch_buffers
        key = (like.dtype.str, type(like), str(getattr(like, "device", "")),
               threading.get_ident())  # chunks updated in parallel need their own scratch
        buffers = cache.get(key)
        if buffers is None or len(buffers) < count or buffers[0].size < like.size:
            xp = _module(like)
            # cupy allocates on the current device: enter the array's own device first.
            with contextlib.nullcontext() if xp is numpy else like.device:
                buffers = cache[key] = [xp.empty(like.size, dtype=like.dtype)
                                        for _ in range(max(count, len(buffers or ())))]
        return [b[:like.size].reshape(like.shape) for b in buffers[:count]]

    def _scaled_into(self, out: Any, g: Any, w: Any = None, wd: Any = 0.0,
                     seg: Any = WHOLE, tmp: Any = None) -> Any:
        """``_scaled`` written into ``out`` (``tmp`` is a scratch array for the wd term)."""
        xp = _module(out)
        xp.multiply(g, self.rescale_grad, out=out)
        if w is not None and _nonzero(wd):
            xp.multiply(w, seg.expand(wd, w), out=tmp)
            out += tmp
        if self.clip_gradient and self.clip_gradient > 0:
            c = float(self.clip_gradient)
            xp.clip(out, -c, c, out=out)
        return out

    def _scaled(self, g: Any, w: Any = None, wd: Any = 0.0, seg: Any = WHOLE) -> Any:
        """A new array C(r·g + wd·w) (wd term only when w is given); g is never mutated."""
        out = g * self.rescale_grad
        if w is not None and _nonzero(wd):
            out += seg.expand(wd, w) * w
        if self.clip_gradient and self.clip_gradient > 0:  # MXNet: <= 0 means no clipping
            c = float(self.clip_gradient)
            _module(out).clip(out, -c, c, out=out)
        return out

    # ------------------------------------------------------------- learning rate
    @property
    def learning_rate(self) -> float:
        """The current base learning rate (schedule and live-LR change applied)."""
        return self._base_lr()

    def _base_lr(self) -> float:
        if self._lr_override is not None:
            return self._lr_override
        if self.lr_scheduler is not None:
            return float(self.lr_scheduler(self.num_update)) * self._lr_scale
        return self.lr

    def set_learning_rate(self, lr: float, mode: str | None = None) -> None:
        """Set the learning rate.

        ``mode=None`` is MXNet's behaviour: refused (``UserWarning`` raised) while a
        scheduler runs. ``mode="scale"`` multiplies the running schedule so the current
        lr becomes ``lr`` and its shape continues; ``mode="override"`` makes ``lr`` a
        constant from now on.

        >>> from engine import optimizer, lr_scheduler
        >>> opt = optimizer.SGD(lr_scheduler=lr_scheduler.FactorScheduler(1, 0.5, base_lr=1.0))
        >>> opt.set_learning_rate(0.1, mode="scale"); opt.learning_rate
        0.1
        """
        if mode not in LIVE_LR_MODES:
            raise ValueError(f"mode must be one of {LIVE_LR_MODES}, got {mode!r}")
        lr = check_learning_rate(lr, allow_zero=False)
        scheduled = self.lr_scheduler is not None and self._lr_override is None
        if not scheduled:
            self.lr = lr
            if self._lr_override is not None:
                self._lr_override = lr
            return
        if mode is None:
            raise UserWarning(SCHEDULER_CONFLICT)
        if mode == "override":
            self._lr_override = lr
            self.lr = lr
            return
        current = float(self.lr_scheduler(self.num_update))
        if not current > 0 or not math.isfinite(current):
            raise ValueError(f"cannot scale a schedule whose current learning rate is {current}")
        self._lr_scale = lr / current

    def replace_lr_scheduler(self, scheduler: Any) -> None:
        """Rudder: run ``scheduler`` from now on (None: the constant ``lr``), forgetting
        any live scale or override of the schedule it replaces.

        >>> from engine import optimizer, lr_scheduler
        >>> opt = optimizer.SGD(learning_rate=0.5)
        >>> opt.replace_lr_scheduler(lr_scheduler.FactorScheduler(1, 0.5, base_lr=0.2))
        >>> opt.learning_rate
        0.2
        """
        if scheduler is not None and not callable(scheduler):
            raise ValueError(f"lr_scheduler must be callable, got {type(scheduler).__name__}")
        self.lr_scheduler = scheduler
        self._lr_scale = 1.0
        self._lr_override = None

    @property
    def live_lr_state(self) -> dict[str, Any]:
        return {"scale": self._lr_scale, "override": self._lr_override}

    def set_lr_scale(self, args_lrscale: dict) -> None:
        """Removed in MXNet 1.x; raises as MXNet does (use ``set_lr_mult``)."""
        raise DeprecationWarning("set_lr_scale is deprecated. Use set_lr_mult instead.")

    def set_lr_mult(self, args_lr_mult: dict) -> None:
        """Learning-rate multipliers by index or name (``param_dict`` takes precedence)."""
        self.lr_mult = {}
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__lr_mult__" in attr[name]:
                    self.lr_mult[name] = float(attr[name]["__lr_mult__"])
        self.lr_mult.update(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: dict) -> None:
        """Weight-decay multipliers; as in MXNet 1.x, idx2name names that do not end in
        ``_weight`` or ``_gamma`` get no weight decay (Module only: Gluon has no idx2name)."""
        self.wd_mult = {}
        for name in self.idx2name.values():
            if not (name.endswith("_weight") or name.endswith("_gamma")):
                self.wd_mult[name] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__wd_mult__" in attr[name]:
                    self.wd_mult[name] = float(attr[name]["__wd_mult__"])
        self.wd_mult.update(args_wd_mult)

    def _set_current_context(self, device_id: int) -> None:
        """Select the per-device update counts (MXNet's fix for multi-GPU double counting)."""
        if device_id not in self._all_index_update_counts:
            self._all_index_update_counts[device_id] = {}
        self._index_update_count = self._all_index_update_counts[device_id]

    def _update_count(self, index: Any) -> None:
        counts = self._index_update_count
        for idx in index if isinstance(index, (list, tuple)) else (index,):
            counts[idx] = counts.get(idx, self.begin_num_update) + 1
            if counts[idx] > self.num_update:
                self.num_update = counts[idx]

    def _multiplier(self, index: int, table: dict, attr: str) -> float:
        if index in self.param_dict:
            return float(getattr(self.param_dict[index], attr))
        if index in table:
            return float(table[index])
        if index in self.idx2name:
            return float(table.get(self.idx2name[index], 1.0))
        return 1.0

    def _get_lrs(self, indices: list[int]) -> list[float]:
        base = self._base_lr()
        params = self.param_dict
        if len(params) >= len(indices) and all(i in params for i in indices):
            return [base * float(params[i].lr_mult) for i in indices]  # the Trainer's case
        return [base * self._multiplier(i, self.lr_mult, "lr_mult") for i in indices]

    def _get_lr(self, index: int) -> float:
        return self._get_lrs([index])[0]

    def _get_wds(self, indices: list[int]) -> list[float]:
        params = self.param_dict
        if len(params) >= len(indices) and all(i in params for i in indices):
            return [self.wd * float(params[i].wd_mult) for i in indices]
        return [self.wd * self._multiplier(i, self.wd_mult, "wd_mult") for i in indices]

    def _get_wd(self, index: int) -> float:
        return self._get_wds([index])[0]

    def _param_name(self, index: int) -> str:
        if index in self.param_dict:
            return str(getattr(self.param_dict[index], "name", index))
        return str(self.idx2name.get(index, index))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learning_rate={self.learning_rate}, wd={self.wd})"


def _nonzero(x: Any) -> bool:
    if isinstance(x, float):  # the usual case (one wd for all): no array round trip
        return x != 0
    return bool(numpy.any(numpy.asarray(x) != 0))


def _module(raw: Any) -> Any:
    from ..backend import array_module

    return array_module(raw)
