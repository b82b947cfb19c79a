"""``gluon.Trainer``: applies an Optimizer to a set of Parameters (MXNet 1.x semantics).

``step(batch_size)`` = ``allreduce_grads()`` (sum gradients across devices through the
KVStore) + ``update(batch_size)`` (the optimizer, gradients scaled by 1/batch_size).
Parameters and gradients of one dtype and context live in one contiguous buffer, so a
built-in optimizer updates all of them with a few vectorized operations.

>>> import engine as mx
>>> from engine import autograd, gluon
>>> w = gluon.Parameter("w", shape=(2,), init="ones"); w.initialize()
>>> trainer = gluon.Trainer([w], "sgd", {"learning_rate": 0.5})
>>> with autograd.record():
...     loss = (w.data() * 2).sum()
>>> loss.backward(); trainer.step(1); w.data().asnumpy().tolist()
[0.0, 0.0]

Differences from MXNet (deliberate): a parameter listed twice is updated once (2.x
dedup); ``update_on_kvstore=True`` on one device creates the store instead of being
silently ignored; the stale-gradient check also runs when updating on the kvstore (MXNet
skipped it there and applied stale gradients); ``set_learning_rate`` has Rudder's ``mode``;
``save_states`` writes npz + JSON (never pickle), covers every context's states, the update
counts, the schedule and the live-LR change, and ``load_states`` refuses a mismatched file
without changing the trainer.
"""

from __future__ import annotations

import os
from typing import Any

import numpy

from .. import kvstore as _kvstore
from .. import optimizer as opt
from ..optimizer.flat import FlatGroup
from . import trainer_states
from .parameter import Parameter

STALE_GRAD_MESSAGE = (
    "Gradient of Parameter `{name}` on context {ctx} has not been updated by backward since "
    "last `step`. This could mean a bug in your model that made it only use a subset of the "
    "Parameters (Blocks) for this iteration. If you are intentionally only using a subset, "
    "call step with ignore_stale_grad=True to suppress this warning and skip updating of "
    "Parameters with stale gradient"
)
_KV_ONLY = ("{}() when parameters are updated on kvstore is not supported. Try setting "
            "`update_on_kvstore` to False when creating trainer.")
_LOCAL_MAX_SIZE = 1024 * 1024 * 16
_BATCH_CHANGED = (
    "Possible change in the `batch_size` from previous `step` detected. Optimizer gradient "
    "normalizing factor will not change w.r.t new batch_size when update_on_kvstore=True and "
    "when distributed kvstore is used.")


class Trainer:
    """Applies an Optimizer on a set of Parameters (``mxnet.gluon.Trainer``)."""

    def __init__(self, params: Any, optimizer: Any, optimizer_params: dict | None = None,
                 kvstore: Any = "device", compression_params: dict | None = None,
                 update_on_kvstore: bool | None = None) -> None:
        if hasattr(params, "keys") and hasattr(params, "__getitem__"):
            params = [params[key] for key in sorted(params.keys())]
        if not isinstance(params, (list, tuple)):
            raise ValueError(
                f"First argument must be a list or dict of Parameters, got {type(params)}.")
        self._params: list[Parameter] = []
        self._param2idx: dict[str, int] = {}
        seen: set[int] = set()
        for param in params:
            if not isinstance(param, Parameter):
                raise ValueError("First argument must be a list or dict of Parameters, "
                                 f"got list of {type(param)}.")
            if id(param) in seen:
                continue  # a shared parameter listed twice is one key (MXNet 2.x dedup)
            seen.add(id(param))
            self._param2idx[param.name] = len(self._params)
            self._params.append(param)
            param._set_trainer(self)
        self._compression_params = compression_params
        self._contexts = self._check_contexts()
        self._init_optimizer(optimizer, optimizer_params or {})
        self._scale = self._optimizer.rescale_grad
        self._kvstore_params = {"kvstore": kvstore, "update_on_kvstore": update_on_kvstore}
        self._groups: list[tuple[int, FlatGroup]] | None = None
        self._groups_key: tuple[int, ...] = ()
        self._fusion_refused: tuple[int, ...] | None = None
        self._trainable_now: list[tuple[int, Parameter]] | None = None
        self._reset_kvstore()

    # ------------------------------------------------------------------ set-up
    def _check_contexts(self) -> list[Any]:
        contexts = None
        for param in self._params:
            ctx = param.list_ctx()
            assert contexts is None or contexts == ctx, (
                f"All Parameters must be initialized on the same set of contexts, but "
                f"Parameter {param.name} is initialized on {ctx} while previous Parameters "
                f"are initialized on {contexts}.")
            contexts = ctx
        return contexts or []

    def _init_optimizer(self, optimizer: Any, optimizer_params: dict) -> None:
        param_dict = dict(enumerate(self._params))
        if isinstance(optimizer, opt.Optimizer):
            assert not optimizer_params, ("optimizer_params must be None if optimizer is an "
                                          "instance of Optimizer instead of str")
            self._optimizer = optimizer
            self._optimizer.param_dict = param_dict  # not copied: later lr_mult edits apply
        else:
            self._optimizer = opt.create(optimizer, param_dict=param_dict, **optimizer_params)
        self._updaters = [opt.get_updater(self._optimizer) for _ in self._contexts]

    def _reset_kvstore(self) -> None:
        """Forget the kvstore (and its states); it is re-created at the next step."""
        kv = getattr(self, "_kvstore", None)
        if kv is not None and "dist" in kv.type:
            raise RuntimeError("Cannot reset distributed KVStore.")
        self._sync: Any = None  # the dist kvstore's gradient reduction (trainer_dist.py)
        self._kv_initialized = False
        self._kvstore: Any = None
        self._distributed = None
        self._update_on_kvstore: bool | None = None
        self._params_to_init = list(self._params)

    def _init_kvstore(self) -> None:
        """Choose the store and update_on_kvstore as MXNet does (see the module notes)."""
        kv_arg = self._kvstore_params["kvstore"]
        explicit = self._kvstore_params["update_on_kvstore"]
        update = bool(int(os.environ.get("MXNET_UPDATE_ON_KVSTORE", "1")))
        if explicit is not None:
            update = bool(explicit)
        kv = None
        if isinstance(kv_arg, _kvstore.KVStoreBase):
            kv = kv_arg
        elif isinstance(kv_arg, str):
            if len(self._contexts) > 1 or "dist" in kv_arg or explicit:
                kv = _kvstore.create(kv_arg)
                if kv_arg == "local" and explicit is None and self._max_param_size() \
                        > _LOCAL_MAX_SIZE:
                    update = False
        elif kv_arg is not None:
            raise TypeError(f"kvstore must be a string, a KVStore or None, got {kv_arg!r}")
        if kv is not None and "dist" in kv.type and "async" in kv.type:
            if explicit is False:  # MXNet: async mode updates on the kvstore only
                raise ValueError("Please set update_on_kvstore=True when training in async "
                                 "mode.")
            update = True
        if kv is not None:
            if not kv.is_capable(_kvstore.KVStoreBase.OPTIMIZER):
                if explicit:
                    raise ValueError(
                        f"Please set update_on_kvstore=False when training with {type(kv)}")
                update = False
            if self._compression_params:
                kv.set_gradient_compression(self._compression_params)
            if update:
                kv.set_optimizer(self._optimizer)
            self._kvstore, self._update_on_kvstore = kv, update
            self._distributed = "dist" in kv.type
            if self._distributed:
                from .trainer_dist import DistGradSync

                self._sync = DistGradSync(self, kv)
        else:
            self._kvstore, self._update_on_kvstore = None, None
        self._kv_initialized = True

    def _max_param_size(self) -> int:
        sizes = [int(p.data(self._contexts[0]).size) for p in self._params
                 if p._ctx_data is not None]
        return max(sizes, default=0)

    def _init_params(self) -> None:
        """Broadcast context 0's value of each (now initialized) parameter through the store."""
        pending = [p for p in self._params_to_init if p._ctx_data is None]
        ready = [p for p in self._params_to_init if p._ctx_data is not None]
        if self._sync is not None:
            self._sync.broadcast_params(ready)  # rank 0's weights, in one collective
        elif self._kvstore is not None:
            for param in ready:
                arrays = param.list_data()
                self._kvstore.broadcast(self._param2idx[param.name], arrays[0], arrays)
        self._params_to_init = pending

    def _trainable(self) -> list[tuple[int, Parameter]]:
        return [(i, p) for i, p in enumerate(self._params) if p.grad_req != "null"]

    @property
    def _step_trainable(self) -> list[tuple[int, Parameter]]:
        """The trainable list of the step in progress (grad_req is read once per step)."""
        cached = self._trainable_now
        return cached if cached is not None else self._trainable()

    # ------------------------------------------------------------ flat buffers
    def _flat_groups(self, updaters: dict[int, Any]) -> list[tuple[int, FlatGroup]] | None:
        """Contiguous buffers per (context, dtype), built once and rebuilt only if broken;
        only the contexts in ``updaters`` (each group's states live in its updater)."""
        if not self._optimizer.supports_fused():
            return None
        entries = self._step_trainable
        key = tuple(i for i, _ in entries)
        if self._fusion_refused == key:
            return None
        if self._sync is not None:  # dist: the reducer's buffers, laid out in its order
            return self._attach_states(
                [(c, g) for c, g in self._sync.flat_groups() if c in updaters], updaters, key)
        if self._groups is not None and self._groups_key == key and all(
                g.intact(self._params, c) for c, g in self._groups):
            return self._groups
        groups: list[tuple[int, FlatGroup]] = []
        for c, ctx in enumerate(self._contexts):
            by_dtype: dict[Any, list] = {}
            for i, p in entries:
                data, grad = p._ctx_data[c], p._ctx_grad[c]
                by_dtype.setdefault(data.raw.dtype.str, []).append((i, data, grad))
            for dtype_entries in by_dtype.values():
                groups.append((c, FlatGroup(ctx, dtype_entries)))
        attached = self._attach_states(groups, updaters, key)
        if attached is not None:
            self._groups, self._groups_key = attached, key
        return attached

    def _attach_states(self, groups: list[tuple[int, FlatGroup]], updaters: dict[int, Any],
                       key: tuple[int, ...]) -> list[tuple[int, FlatGroup]] | None:
        for c, group in groups:
            if not group.ensure_state(self._optimizer, updaters[c]):
                self._fusion_refused = key  # states are not weight-shaped: per parameter
                return None
        return groups

    # ----------------------------------------------------------- learning rate
    @property
    def optimizer(self) -> opt.Optimizer:
        return self._optimizer

    @property
    def learning_rate(self) -> float:
        if not isinstance(self._optimizer, opt.Optimizer):
            raise UserWarning("Optimizer has to be defined before its learning rate can be "
                              "accessed.")
        return self._optimizer.learning_rate

    def set_learning_rate(self, lr: float, mode: str | None = None) -> None:
        """Set the learning rate; see :meth:`engine.optimizer.Optimizer.set_learning_rate`.

        ``mode=None`` refuses while a scheduler runs (MXNet); ``"scale"`` rescales the
        running schedule so the current lr becomes ``lr``; ``"override"`` makes it constant.
        The change reaches the kvstore's optimizer too (it is the same object).
        """
        if not isinstance(self._optimizer, opt.Optimizer):
            raise UserWarning("Optimizer has to be defined before its learning rate is "
                              "mutated.")
        self._optimizer.set_learning_rate(lr, mode)

    # -------------------------------------------------------------------- step
    def _prepare(self) -> None:
        if not self._kv_initialized:
            self._init_kvstore()
        if self._params_to_init:
            self._init_params()

    def step(self, batch_size: float, ignore_stale_grad: bool = False) -> None:
        """One update: gradients summed across devices, scaled by 1/batch_size, applied."""
        rescale = self._scale / _check_batch(batch_size)
        if self._update_on_kvstore and self._distributed and self._kv_initialized and \
                self._optimizer.rescale_grad != rescale:
            raise UserWarning(_BATCH_CHANGED)
        self._optimizer.rescale_grad = rescale
        self._prepare()
        self._trainable_now = self._trainable()
        try:
            skipped = self._stale(ignore_stale_grad)
            self._allreduce_grads(skipped)
            self._update(skipped)
        finally:
            self._trainable_now = None

    def allreduce_grads(self) -> None:
        """Sum each parameter's gradients across contexts (before a manual ``update``)."""
        self._prepare()
        assert not (self._kvstore and self._update_on_kvstore), _KV_ONLY.format(
            "allreduce_grads")
        self._allreduce_grads(set())

    def update(self, batch_size: float, ignore_stale_grad: bool = False) -> None:
        """Apply the optimizer to the (already reduced) gradients."""
        self._prepare()
        assert not (self._kvstore and self._update_on_kvstore), _KV_ONLY.format("update")
        self._optimizer.rescale_grad = self._scale / _check_batch(batch_size)
        self._trainable_now = self._trainable()
        try:
            self._update(self._stale(ignore_stale_grad))
        finally:
            self._trainable_now = None

    def _stale(self, ignore: bool) -> set[int]:
        """Indices whose gradient backward has not written since the last step."""
        skipped: set[int] = set()
        for i, param in self._step_trainable:
            for data in param._ctx_data or param.list_data():
                if not data._fresh_grad:
                    if not ignore:
                        raise UserWarning(STALE_GRAD_MESSAGE.format(name=param.name,
                                                                    ctx=data.context))
                    skipped.add(i)
                    break
        return skipped

    def _allreduce_grads(self, skipped: set[int]) -> None:
        kv = self._kvstore
        if kv is None:
            return
        if self._sync is not None:  # every rank sums every gradient, stale or not (MXNet)
            self._sync.allreduce(self._step_trainable)
            return
        for i, param in self._step_trainable:
            if i in skipped:
                continue
            if self._update_on_kvstore:
                kv.pushpull(i, param.list_grad(), out=param.list_data(), priority=-i)
            else:
                kv.pushpull(i, param.list_grad(), priority=-i)

    def _update(self, skipped: set[int]) -> None:
        trainable = self._step_trainable
        if self._sync is not None and self._update_on_kvstore:
            # the "server's" update runs on every rank: context 0, then copied to the others
            updaters = {0: self._kvstore.updater}
        elif not (self._kvstore and self._update_on_kvstore):
            updaters = dict(enumerate(self._updaters))
        else:
            updaters = {}  # the local kvstore already updated in pushpull
        if updaters:
            groups = None if skipped else self._flat_groups(updaters)
            if groups is not None:
                for _, group in groups:
                    group.step(self._optimizer)
            else:
                for c, updater in updaters.items():
                    todo = [(i, p) for i, p in trainable if i not in skipped]
                    if todo:
                        updater([i for i, _ in todo], [p.list_grad()[c] for _, p in todo],
                                [p.list_data()[c] for _, p in todo])
            if self._sync is not None and self._update_on_kvstore:
                self._sync.copy_weights_from_first_context()
        for i, param in trainable:
            if i not in skipped:
                for data in param._ctx_data:
                    data._fresh_grad = False

    # ------------------------------------------------------------------ states
    def save_states(self, fname: Any) -> None:
        """Save optimizer states, counts, schedule and live lr (a path or binary file)."""
        self._prepare()
        trainer_states.save(self, fname)

    def load_states(self, fname: Any) -> None:
        """Load what :meth:`save_states` wrote; a mismatched file changes nothing."""
        self._prepare()
        trainer_states.load(self, fname)

    @property
    def parameters(self) -> list[Parameter]:
        """The Parameters this trainer updates, in index order (a shared one listed once)."""
        return list(self._params)

    def state_holders(self) -> list[tuple[Any, Any]]:
        """``(updater, context)`` per copy of the optimizer states: one per device, or the
        kvstore's single updater when updates run on the kvstore (Rudder's addition, used
        by :meth:`save_states`/:meth:`load_states`; ``updater.states`` maps index → state).
        """
        from ..context import cpu

        if self._kvstore is not None and self._update_on_kvstore:
            updater = self._kvstore.updater
            if updater is None:
                raise ValueError(f"cannot save states of kvstore {self._kvstore.type!r}")
            ctx = self._kvstore.stored_context()
            return [(updater, ctx if ctx is not None else self._contexts[0])]
        return [(updater, self._contexts[c] if self._contexts else cpu())
                for c, updater in enumerate(self._updaters)]


def _check_batch(batch_size: Any) -> float:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, float, numpy.number)) \
            or not batch_size > 0:
        raise ValueError(f"batch_size must be a number > 0, got {batch_size!r}")
    return batch_size
