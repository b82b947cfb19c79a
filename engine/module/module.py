"""``Module``: train a :class:`~engine.symbol.Symbol` with MXNet 1.9's Module API.

The symbol is evaluated with the engine's NDArray ops under ``autograd.record()`` (no
separate executor); parameters live in NDArrays with gradient buffers; ``update()`` runs
the optimizer's updater on each parameter, with ``rescale_grad = 1 / batch_size`` as
MXNet's Module sets it.

>>> import engine as mx
>>> data = mx.sym.Variable('data')
>>> fc = mx.sym.FullyConnected(data, name='fc', num_hidden=3)
>>> net = mx.sym.SoftmaxOutput(fc, name='softmax')
>>> mod = mx.mod.Module(net)
>>> mod.bind(data_shapes=[('data', (4, 5))], label_shapes=[('softmax_label', (4,))])
>>> mod.init_params(mx.init.Uniform(0.1))
>>> mod.init_optimizer(optimizer='sgd', optimizer_params={'learning_rate': 0.1})
>>> sorted(mod.get_params()[0])
['fc_bias', 'fc_weight']
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy

from .. import autograd
from .. import initializer as init_mod
from .. import kvstore as kv_mod
from .. import optimizer as opt_mod
from ..context import Context, cpu
from ..ndarray import NDArray
from .base_module import BaseModule
from .checkpointing import CheckpointMixin
from .executor_group import ExecutorGroup, copy_into, groups_per_context

Shape = tuple[int, ...]


def _parse_descs(descs: Any, names: Sequence[str], kind: str) -> list[tuple[str, Shape]]:
    """``[(name, shape)]`` from ``(name, shape)`` pairs or DataDesc objects, checked
    against the names the module was created with."""
    parsed: list[tuple[str, Shape]] = []
    for desc in descs or []:
        if hasattr(desc, "name") and hasattr(desc, "shape"):
            name, shape = desc.name, desc.shape
        else:
            name, shape = desc
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(s, (int, numpy.integer)) for s in shape):
            # MXNet fails the same way on an NDArray (or any non-integer) shape
            raise TypeError(f"the shape of {kind} {name!r} must be a tuple of ints, got "
                            f"{type(shape).__name__} {shape!r}")
        parsed.append((str(name), tuple(int(s) for s in shape)))
    given = [name for name, _ in parsed]
    if sorted(given) != sorted(names):  # as MXNet: the same names, in the data's own order
        raise ValueError(
            f"Data provided by {kind}_shapes don't match names specified by {kind}_names "
            f"({given} vs. {list(names)})"
        )
    return parsed


def _batch_axes(*desc_lists: Any) -> dict[str, int]:
    """The batch axis of each input whose DataDesc gives a layout ('TNC' -> 1)."""
    axes = {}
    for descs in desc_lists:
        for desc in descs or []:
            layout = getattr(desc, "layout", None)
            if isinstance(layout, str) and "N" in layout:
                axes[str(desc.name)] = layout.find("N")
    return axes


class Module(CheckpointMixin, BaseModule):
    """A symbol with its parameters, trained batch by batch (``mx.mod.Module``)."""

    def __init__(self, symbol: Any, data_names: Sequence[str] = ("data",),
                 label_names: Sequence[str] | None = ("softmax_label",), logger: Any = logging,
                 context: Context | Sequence[Context] | None = None,
                 work_load_list: Any = None, fixed_param_names: Sequence[str] | None = None,
                 state_names: Sequence[str] | None = None, group2ctxs: Any = None,
                 compression_params: Any = None) -> None:
        super().__init__(logger=logger)
        contexts = [cpu()] if context is None else (
            [context] if isinstance(context, Context) else list(context))
        if not contexts or not all(isinstance(c, Context) for c in contexts):
            raise ValueError("context must be a Context or a non-empty list of Contexts")
        self._contexts = contexts
        self._group2ctxs = groups_per_context(group2ctxs, len(contexts))
        self._work_load_list = list(work_load_list or [1] * len(contexts))
        if len(self._work_load_list) != len(contexts):
            raise ValueError("work_load_list must have one entry per context")
        self._symbol = symbol
        self._data_names = list(data_names or [])
        self._label_names = list(label_names or [])
        self._state_names = list(state_names or [])
        self._fixed_param_names = list(fixed_param_names or [])
        arg_names = symbol.list_arguments()
        for name in self._data_names + self._state_names:
            if name not in arg_names:
                raise ValueError(
                    f"You created Module with Module(..., data_names={self._data_names}) but "
                    f"input with name {name!r} is not found in symbol.list_arguments(). "
                    f"Did you mean one of: {arg_names}?"
                )
        missing_labels = [n for n in self._label_names if n not in arg_names]
        if missing_labels:
            self.logger.warning("label_names %s are not arguments of the symbol; they are "
                                "ignored", missing_labels)
            self._label_names = [n for n in self._label_names if n in arg_names]
        inputs = set(self._data_names + self._label_names + self._state_names)
        self._param_names = [n for n in arg_names if n not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()
        self._arg_params: dict[str, NDArray] | None = None
        self._aux_params: dict[str, NDArray] | None = None
        self._exec_group: ExecutorGroup | None = None
        self._optimizer: Any = None
        self._updater: Any = None
        self._kvstore: Any = None
        self._update_on_kvstore = False
        self._compression_params = compression_params
        self._preload_opt_states: str | None = None
        self._data_shapes: list[tuple[str, Shape]] = []
        self._label_shapes: list[tuple[str, Shape]] = []
        self._grad_req = "write"

    # ------------------------------------------------------------- information
    @property
    def data_names(self) -> list[str]:
        return self._data_names

    @property
    def label_names(self) -> list[str]:
        return self._label_names

    @property
    def output_names(self) -> list[str]:
        return self._output_names

    @property
    def data_shapes(self) -> list[tuple[str, Shape]]:
        return self._data_shapes

    @property
    def label_shapes(self) -> list[tuple[str, Shape]]:
        return self._label_shapes

    @property
    def output_shapes(self) -> list[tuple[str, Shape]]:
        shapes = dict(self._data_shapes + self._label_shapes)
        _, out, _ = self._symbol.infer_shape(**shapes)
        return list(zip(self._output_names, out, strict=True))

    # -------------------------------------------------------------------- bind
    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: str = "write") -> None:
        """Check the input names and shapes and allocate parameters (and their gradients)."""
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None and not shared_module.binded:
            raise ValueError("shared_module must be bound")
        if grad_req not in ("write", "add", "null"):
            raise ValueError(f"grad_req must be 'write', 'add' or 'null', got {grad_req!r}")
        if self.binded and self.params_initialized and self._exec_group is not None:
            # a rebind keeps the current values (MXNet keeps those last synced to the host)
            self._arg_params, self._aux_params = self._exec_group.get_params()
        data = _parse_descs(data_shapes, self._data_names, "data")
        labels = _parse_descs(label_shapes, self._label_names, "label") \
            if label_shapes is not None else []
        known = dict(data + labels)
        arg_shapes, _, aux_shapes = self._symbol._infer_shapes(**known)
        arg_shape = dict(zip(self._symbol.list_arguments(), arg_shapes, strict=True))
        unknown = [n for n in self._param_names if arg_shape[n] is None]
        if unknown or any(s is None for s in aux_shapes):
            raise ValueError(f"bind: the shapes of {unknown or self._aux_names} cannot be "
                             f"inferred from data_shapes={data}, label_shapes={labels}")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        self._data_shapes, self._label_shapes = data, labels
        grad_reqs = {name: "null" if (not for_training or name in self._fixed_param_names)
                     else grad_req for name in self._param_names}
        self._exec_group = ExecutorGroup(
            self._symbol, self._contexts, self._work_load_list, [n for n, _ in data],
            [n for n, _ in labels] or self._label_names,
            {n: arg_shape[n] for n in self._param_names},
            dict(zip(self._aux_names, aux_shapes, strict=True)), grad_reqs, inputs_need_grad,
            self._group2ctxs, _batch_axes(data_shapes, label_shapes))
        self.binded = True
        if shared_module is not None:  # the same parameter arrays (BucketingModule's buckets)
            self._exec_group.share_params(shared_module._exec_group)
            self.params_initialized = shared_module.params_initialized
            self._arg_params = self._aux_params = None
            return
        if self.params_initialized:  # e.g. Module.load(): copy the loaded values in
            self._copy_params(self._arg_params or {}, self._aux_params or {}, False, True)

    # ---------------------------------------------------------------- params
    def init_params(self, initializer: Any = None, arg_params: dict[str, Any] | None = None,
                    aux_params: dict[str, Any] | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Fill parameters from ``arg_params``/``aux_params`` or the ``initializer``."""
        if self.params_initialized and not force_init:
            self.logger.warning("Parameters already initialized and force_init=False. "
                                "init_params call ignored.")
            return
        if not self.binded:
            raise RuntimeError("call bind before initializing the parameters")
        if initializer is None and (arg_params is None or allow_missing):
            initializer = init_mod.Uniform(0.01)
        # as MXNet: names the symbol does not use are ignored here (set_params with
        # allow_missing=True is where they are refused)
        group = self._exec_group
        assert group is not None
        attrs = self._symbol.attr_dict()
        # fill the first context's arrays, then copy them to the others
        for table, source in ((group.params[0], arg_params), (group.aux[0], aux_params)):
            for name, arr in table.items():
                if source is not None and name in source:
                    copy_into(name, arr, source[name])
                elif source is not None and not allow_missing:
                    raise RuntimeError(f"{name} is not presented")
                elif initializer is not None:
                    with autograd.pause():
                        initializer(init_mod.InitDesc(name, attrs.get(name, {})), arr)
        if len(self._contexts) > 1:
            group.set_params(group.params[0], group.aux[0])
        self.params_initialized = True
        self._arg_params = self._aux_params = None

    def _copy_params(self, arg_params: dict[str, Any], aux_params: dict[str, Any],
                     allow_missing: bool, allow_extra: bool) -> None:
        self.init_params(None, arg_params, aux_params, allow_missing=allow_missing,
                         force_init=True, allow_extra=allow_extra)

    def set_params(self, arg_params: dict[str, Any], aux_params: dict[str, Any],
                   allow_missing: bool = False, force_init: bool = True,
                   allow_extra: bool = False) -> None:
        """Assign parameter values (copies them into the module's arrays)."""
        if not self.binded:  # remember them for bind, as MXNet does
            self._arg_params, self._aux_params = dict(arg_params), dict(aux_params or {})
            self.params_initialized = True
            return
        if not allow_missing:  # every parameter must be given (RuntimeError naming one)
            self.init_params(None, arg_params, aux_params, allow_missing=False,
                             force_init=force_init, allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            self.logger.warning("Parameters already initialized and force_init=False. "
                                "set_params call ignored.")
            return
        group = self._exec_group
        assert group is not None
        if not allow_extra:
            known = set(self._param_names) | set(self._aux_names)
            for name in list(arg_params) + list(aux_params or {}):
                if name not in known:
                    raise ValueError(f'Find name "{name}" that is not in the arguments')
        # the given values replace the current ones; missing names keep theirs
        group.set_params(arg_params, aux_params or {})
        self.params_initialized = True

    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        """Copies of ``(arg_params, aux_params)`` on the cpu."""
        if not self.binded or not self.params_initialized:
            raise RuntimeError("get_params needs a bound module with initialized parameters")
        assert self._exec_group is not None
        return self._exec_group.get_params()

    # ------------------------------------------------------------- optimizer
    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Create the optimizer (``rescale_grad = 1 / batch_size`` unless given) and its
        updater. ``lr_scheduler`` and other optimizer arguments go in ``optimizer_params``."""
        if not (self.binded and self.params_initialized):
            raise RuntimeError("call bind and init_params before init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring...")
            return
        group = self._exec_group
        assert group is not None
        store, update_on_kvstore = self._create_kvstore(kvstore)
        batch_size = self._data_shapes[0][1][0]
        if store is not None and "dist" in store.type and "_sync" in store.type:
            batch_size *= store.num_workers  # the gradients of all workers are summed
        rescale_grad = 1.0 / batch_size
        devices = len(self._contexts)
        if update_on_kvstore:  # one optimizer state per parameter, kept by the store
            idx2name = dict(enumerate(self._param_names))
        else:  # one per parameter and device, as MXNet numbers them
            idx2name = {i * devices + k: name for i, name in enumerate(self._param_names)
                        for k in range(devices)}
        if isinstance(optimizer, str):
            params = dict(optimizer_params or {})
            params.setdefault("rescale_grad", rescale_grad)
            optimizer = opt_mod.create(optimizer, sym=self._symbol, param_idx2name=idx2name,
                                       **params)
        else:
            if not isinstance(optimizer, opt_mod.Optimizer):
                raise TypeError("optimizer must be a name or an engine.optimizer.Optimizer")
            if optimizer.rescale_grad != rescale_grad:
                self.logger.warning(
                    "Optimizer created manually outside Module but rescale_grad is not "
                    "normalized to 1.0/batch_size/num_workers (%s vs. %s). Is this intended?",
                    optimizer.rescale_grad, rescale_grad)
            if not optimizer.idx2name:
                optimizer.idx2name = idx2name.copy()
        self._optimizer = optimizer
        self._trainable = [i for i, name in enumerate(self._param_names)
                           if group.params[0][name]._grad_req != "null"]
        self._kvstore, self._update_on_kvstore = store, update_on_kvstore
        self._updater = None
        if store is not None:
            if self._compression_params:
                store.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                store.set_optimizer(optimizer)
            # every parameter enters the store (on a dist store rank 0's value wins); only
            # a store that updates hands it back: otherwise each worker keeps its own
            for i, name in enumerate(self._param_names):
                store.init(i, group.params[0][name])
                if update_on_kvstore:
                    store.pull(i, out=[params[name] for params in group.params])
        if not update_on_kvstore:
            self._updater = opt_mod.get_updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def _create_kvstore(self, kvstore: Any) -> tuple[Any, bool]:
        """The store ``init_optimizer`` uses (or None) and whether it runs the optimizer, by
        MXNet's rules: one device and a non-dist name need no store; a store updates unless
        ``MXNET_UPDATE_ON_KVSTORE=0`` or a 'local' store holds a parameter of more than 16M
        elements."""
        update_on_kvstore = bool(int(os.environ.get("MXNET_UPDATE_ON_KVSTORE", "1")))
        if kvstore is None:
            return None, False
        if isinstance(kvstore, str):
            if len(self._contexts) == 1 and "dist" not in kvstore:
                return None, False
            store = kv_mod.create(kvstore)
            if kvstore == "local":
                assert self._exec_group is not None
                largest = max((int(numpy.prod(p.shape)) for p in
                               self._exec_group.params[0].values()), default=0)
                update_on_kvstore = update_on_kvstore and largest <= 16 * 1024 * 1024
            return store, update_on_kvstore
        if not isinstance(kvstore, kv_mod.KVStoreBase):
            raise TypeError(f"kvstore must be a name, a KVStore or None, not "
                            f"{type(kvstore).__name__}")
        return kvstore, update_on_kvstore

    def borrow_optimizer(self, shared_module: Module) -> None:
        self._optimizer = shared_module._optimizer
        self._updater = shared_module._updater
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._trainable = list(shared_module._trainable)
        self.optimizer_initialized = True

    # ------------------------------------------------------------ computation
    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Compute the outputs for ``data_batch`` (recorded for backward when training)."""
        if not (self.binded and self.params_initialized):
            raise RuntimeError("call bind and init_params before forward")
        if is_train is None:
            is_train = self.for_training
        assert self._exec_group is not None
        data = getattr(data_batch, "data", None) or []
        shapes = [tuple(getattr(arr, "shape", ())) for arr in data]
        if shapes != [shape for _, shape in self._data_shapes]:
            self._follow_batch_shapes(data_batch, shapes)
        self._exec_group.forward(data_batch, is_train)

    def _follow_batch_shapes(self, data_batch: Any, shapes: list[Shape]) -> None:
        """A batch of other shapes reshapes the module first, as MXNet's forward does (the
        graph itself runs on any shape; ``data_shapes`` must say what ran)."""
        provided = getattr(data_batch, "provide_data", None)
        data = provided or list(zip(self._data_names, shapes, strict=False))
        labels = getattr(data_batch, "provide_label", None)
        if not labels and self._label_shapes and getattr(data_batch, "label", None):
            labels = [(name, tuple(arr.shape)) for (name, _), arr in
                      zip(self._label_shapes, data_batch.label, strict=False)]
        self.reshape(data, labels or None)

    def backward(self, out_grads: Any = None) -> None:
        """Gradients of the outputs into the parameters' gradient buffers."""
        if not self.for_training:
            raise RuntimeError("backward needs a module bound with for_training=True")
        if self._exec_group is None or not self._exec_group.outputs:
            raise RuntimeError("call forward(is_train=True) before backward")
        self._exec_group.backward(out_grads)

    def update(self) -> None:
        """Apply the optimizer to every trainable parameter with its gradient."""
        if not self.optimizer_initialized:
            raise RuntimeError("call init_optimizer before update")
        group = self._exec_group
        assert group is not None
        names = self._param_names
        store = self._kvstore
        keys = self._trainable
        if store is not None:
            # all keys in one push (a dist store fuses them into a few flat buffers)
            weights = [[params[names[i]] for params in group.params] for i in keys]
            grads = [[w.grad for w in copies] for copies in weights]
            store.push(keys, grads)
            if self._update_on_kvstore:  # gradients in, updated weights out
                store.pull(keys, out=weights)
                return
            store.pull(keys, out=grads)  # the sums over devices (and workers) come back
        updater = self._updater
        devices = len(group.params)
        for i in self._trainable:
            for k, params in enumerate(group.params):
                weight = params[names[i]]
                updater(i * devices + k, weight._grad, weight)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Update ``eval_metric`` with ``labels`` and the latest outputs (by name)."""
        assert self._exec_group is not None
        self._exec_group.update_metric(eval_metric, labels)

    def get_outputs(self, merge_multi_context: bool = True) -> list[NDArray]:
        assert self._exec_group is not None
        return self._exec_group.get_outputs(merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list[NDArray]:
        if not self.inputs_need_grad:
            raise RuntimeError("bind with inputs_need_grad=True to get input gradients")
        assert self._exec_group is not None
        return self._exec_group.input_grads()

    def install_monitor(self, mon: Any) -> None:
        """Have ``mon`` (``mx.mon.Monitor``) watch every forward of this module."""
        if not self.binded:
            raise RuntimeError("call bind before install_monitor")
        assert self._exec_group is not None
        mon.install(self._exec_group)

    def reshape(self, data_shapes: Any, label_shapes: Any = None) -> None:
        """New input shapes for a bound module (parameters and optimizer are kept)."""
        if not self.binded:
            raise RuntimeError("call bind before reshape")
        data = _parse_descs(data_shapes, self._data_names, "data")
        labels = _parse_descs(label_shapes, self._label_names, "label") \
            if label_shapes is not None else []
        arg_shapes, _, _ = self._symbol._infer_shapes(**dict(data + labels))
        assert self._exec_group is not None
        for name, shape in zip(self._symbol.list_arguments(), arg_shapes, strict=True):
            current = self._exec_group.params[0].get(name)
            if current is not None and shape is not None and tuple(shape) != current.shape:
                raise ValueError(f"reshape: parameter {name!r} would change shape from "
                                 f"{current.shape} to {tuple(shape)}")
        self._data_shapes, self._label_shapes = data, labels
