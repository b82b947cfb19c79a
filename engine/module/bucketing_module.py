"""``BucketingModule``: one Module per bucket key (e.g. sequence length), all sharing the
parameters and the optimizer of the default bucket's module (MXNet's ``mx.mod.
BucketingModule``).

``sym_gen(bucket_key)`` returns ``(symbol, data_names, label_names)``; a batch's
``bucket_key`` (and ``provide_data``/``provide_label``) picks the module that runs it.

>>> import engine as mx
>>> def sym_gen(length):
...     data = mx.sym.var('data')
...     net = mx.sym.FullyConnected(mx.sym.sum(data, axis=1), num_hidden=2, name='fc')
...     return mx.sym.SoftmaxOutput(net, name='softmax'), ('data',), ('softmax_label',)
>>> mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=5)
>>> mod.bind(data_shapes=[('data', (4, 5, 3))], label_shapes=[('softmax_label', (4,))])
>>> mod.switch_bucket(7, [('data', (4, 7, 3))], [('softmax_label', (4,))])
>>> sorted(mod._buckets)
[5, 7]
"""

from __future__ import annotations

import logging
from typing import Any

from ..ndarray import NDArray
from .base_module import BaseModule
from .module import Module


class BucketingModule(BaseModule):
    """Modules generated per bucket key, sharing one set of parameters."""

    def __init__(self, sym_gen: Any, default_bucket_key: Any = None, logger: Any = logging,
                 context: Any = None, work_load_list: Any = None,
                 fixed_param_names: Any = None, state_names: Any = None,
                 group2ctxs: Any = None, compression_params: Any = None) -> None:
        super().__init__(logger=logger)
        if default_bucket_key is None:
            raise ValueError("BucketingModule needs a default_bucket_key")
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen
        symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        self._data_names = list(data_names or [])
        self._label_names = list(label_names or [])
        self._module_args = {"logger": logger, "context": context,
                             "work_load_list": work_load_list,
                             "fixed_param_names": fixed_param_names,
                             "state_names": state_names, "group2ctxs": group2ctxs}
        self._buckets: dict[Any, Module] = {}
        self._curr_module: Module | None = None
        self._curr_bucket_key: Any = None
        self._monitor: Any = None
        self._grad_req = "write"
        self._symbol = symbol
        self._loaded_params: tuple[dict[str, NDArray], dict[str, NDArray]] | None = None
        self._saved_keys: list[Any] = []

    def _call_sym_gen(self, key: Any) -> tuple[Any, Any, Any]:
        from ..name import NameManager

        with NameManager():  # every bucket's graph gets the same automatic names
            return self._sym_gen(key)

    def _reset_bind(self) -> None:
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    # ------------------------------------------------------------- information
    @property
    def data_names(self) -> list[str]:
        return self._data_names if not self.binded else self._module.data_names

    @property
    def output_names(self) -> list[str]:
        if self.binded:
            return self._module.output_names
        return self._call_sym_gen(self._default_bucket_key)[0].list_outputs()

    @property
    def data_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        return self._module.data_shapes

    @property
    def label_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        return self._module.label_shapes

    @property
    def output_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        return self._module.output_shapes

    @property
    def symbol(self) -> Any:
        return self._module.symbol

    @property
    def _module(self) -> Module:
        if self._curr_module is None:
            raise RuntimeError("call bind first")
        return self._curr_module

    # ------------------------------------------------------------------ params
    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        return self._module.get_params()

    def set_params(self, arg_params: dict[str, Any], aux_params: dict[str, Any],
                   allow_missing: bool = False, force_init: bool = True,
                   allow_extra: bool = False) -> None:
        self._module.set_params(arg_params, aux_params, allow_missing=allow_missing,
                                force_init=force_init, allow_extra=allow_extra)
        self.params_initialized = True

    def init_params(self, initializer: Any = None, arg_params: Any = None,
                    aux_params: Any = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        if self.params_initialized and not force_init:
            return
        self._module.init_params(initializer=initializer, arg_params=arg_params,
                                 aux_params=aux_params, allow_missing=allow_missing,
                                 force_init=force_init, allow_extra=allow_extra)
        self.params_initialized = True

    # -------------------------------------------------------------------- bind
    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: str = "write") -> None:
        """Bind the default bucket's module (the other buckets bind on first use)."""
        params = self._loaded_params if not self.binded else (
            self.get_params() if self.params_initialized else None)
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None:
            raise ValueError("shared_module for BucketingModule is not supported")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        symbol, data_names, label_names = self._call_sym_gen(self._default_bucket_key)
        module = Module(symbol, data_names, label_names, **self._module_args)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                    force_rebind=False, shared_module=None, grad_req=grad_req)
        self._curr_module = module
        self._curr_bucket_key = self._default_bucket_key
        self._buckets[self._default_bucket_key] = module
        self.binded = True
        if params is not None:  # a rebind (or a loaded checkpoint) keeps the parameters
            self._loaded_params = None
            self.set_params(*params)

    def switch_bucket(self, bucket_key: Any, data_shapes: Any, label_shapes: Any = None) -> None:
        """Make ``bucket_key``'s module current, creating it (sharing parameters) if new."""
        if not self.binded:
            raise RuntimeError("call bind before switching bucket")
        if bucket_key not in self._buckets:
            symbol, data_names, label_names = self._call_sym_gen(bucket_key)
            module = Module(symbol, data_names, label_names, **self._module_args)
            module.bind(data_shapes, label_shapes, self._module.for_training,
                        self._module.inputs_need_grad, force_rebind=False,
                        shared_module=self._buckets[self._default_bucket_key],
                        grad_req=self._grad_req)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            if self.optimizer_initialized:
                module.borrow_optimizer(self._buckets[self._default_bucket_key])
            self._buckets[bucket_key] = module
        else:
            module = self._buckets[bucket_key]
            if data_shapes is not None and module.data_shapes != _shapes(data_shapes):
                module.reshape(data_shapes, label_shapes)
        self._curr_module = module
        self._curr_bucket_key = bucket_key

    # --------------------------------------------------------------- optimizer
    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        default = self._buckets[self._default_bucket_key]
        default.init_optimizer(kvstore, optimizer, optimizer_params, force_init=force_init)
        for module in self._buckets.values():
            if module is not default:
                module.borrow_optimizer(default)
        self.optimizer_initialized = True

    # ------------------------------------------------------------- computation
    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        key = getattr(data_batch, "bucket_key", None)
        if key is None or not self.binded:
            return
        original = self._curr_bucket_key
        self.switch_bucket(key, data_batch.provide_data, data_batch.provide_label)
        self.switch_bucket(original, None, None)

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Run the batch on its bucket's module (``data_batch.bucket_key``)."""
        if not (self.binded and self.params_initialized):
            raise RuntimeError("call bind and init_params before forward")
        key = getattr(data_batch, "bucket_key", None)
        if key is None:
            key = self._default_bucket_key
        self.switch_bucket(key, getattr(data_batch, "provide_data", None),
                           getattr(data_batch, "provide_label", None))
        self._module.params_initialized = True  # its arrays are the default bucket's
        self._module.forward(data_batch, is_train=is_train)

    def backward(self, out_grads: Any = None) -> None:
        self._module.backward(out_grads=out_grads)

    def update(self) -> None:
        if not self.optimizer_initialized:
            raise RuntimeError("call init_optimizer before update")
        self._module.update()

    def get_outputs(self, merge_multi_context: bool = True) -> list[NDArray]:
        return self._module.get_outputs(merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list[NDArray]:
        return self._module.get_input_grads(merge_multi_context)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        self._module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon: Any) -> None:
        self._monitor = mon
        for module in self._buckets.values():
            module.install_monitor(mon)

    def save_checkpoint(self, prefix: str, epoch: int, remove_amp_cast: bool = False) -> None:
        """The shared parameters (``prefix-%04d.params``), every bucket's graph
        (``prefix-<key>-symbol.json``) and the bucket keys (``prefix.buckets``)."""
        from .. import nd
        from ..model import params_filename, save_params

        if not self._buckets:
            raise ValueError("Empty BucketingModule cannot be saved")
        arg, aux = self.get_params()
        save_params(params_filename(prefix, epoch), arg, aux)
        for key in self._buckets:
            self._call_sym_gen(key)[0].save(f"{prefix}-{key}-symbol.json")
        nd.save(f"{prefix}.buckets", nd.array(list(self._buckets), dtype="int32"))

    @staticmethod
    def load(prefix: str, epoch: int, sym_gen: Any = None, default_bucket_key: Any = None,
             **kwargs: Any) -> BucketingModule:
        """A module from :meth:`save_checkpoint`'s files; ``bind`` gets the parameters."""
        from .. import nd
        from ..model import load_params

        if sym_gen is None or default_bucket_key is None:
            raise ValueError("loading a BucketingModule needs sym_gen and default_bucket_key")
        saved = nd.load(f"{prefix}.buckets")
        keys = [int(k) for k in saved[0].asnumpy().tolist()]  # type: ignore[index]
        mod = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        mod._saved_keys = keys
        mod._loaded_params = load_params(prefix, epoch)
        mod.params_initialized = True
        return mod


def _shapes(descs: Any) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    for desc in descs or []:
        name, shape = (desc.name, desc.shape) if hasattr(desc, "name") else desc
        out.append((str(name), tuple(int(s) for s in shape)))
    return out
