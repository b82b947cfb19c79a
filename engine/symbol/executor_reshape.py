"""``Executor.reshape``: the same bound graph for other input shapes, sharing memory.

MXNet's rules: an array whose shape does not change is shared as is; a smaller one is a
view of the first elements of the original's memory (so the two executors must not run at
once); a larger one is refused unless ``allow_up_sizing`` (then it is a new array). Only
the arguments named may change shape unless ``partial_shaping``.

>>> import engine as mx
>>> y = mx.sym.FullyConnected(mx.sym.var('x'), num_hidden=2, name='fc')
>>> exe = y.simple_bind(mx.cpu(), x=(4, 3))
>>> small = exe.reshape(x=(2, 3))
>>> small.arg_dict['fc_weight'] is exe.arg_dict['fc_weight'], small.outputs[0].shape
(True, (2, 2))
"""

from __future__ import annotations

import math
from typing import Any

from ..base import MXNetShapeError
from ..ndarray import NDArray, zeros


def _view_or_new(name: str, old: NDArray, shape: tuple[int, ...], allow_up_sizing: bool
                 ) -> NDArray:
    if old.shape == shape:
        return old
    size = math.prod(shape)
    if size > old.size:
        if not allow_up_sizing:
            raise MXNetShapeError(
                f"New shape of arg: {name} {shape} is larger than the original "
                f"{old.shape}. First making a big executor and then down sizing it is more "
                "efficient than the reverse; set allow_up_sizing=True to allocate new "
                "arrays.")
        return zeros(shape, ctx=old.context, dtype=old.dtype)
    flat = old.raw.reshape(-1)  # a view: bound arrays are contiguous
    return NDArray(flat[:size].reshape(shape), old.context)


def reshaped_executor(exe: Any, partial_shaping: bool, allow_up_sizing: bool,
                      shapes: dict[str, Any]) -> Any:
    from .executor import Executor

    symbol = exe._symbol
    names = symbol.list_arguments()
    aux_names = symbol.list_auxiliary_states()
    given = {k: tuple(v) for k, v in shapes.items() if isinstance(v, (tuple, list))}
    arg_shapes, _, aux_shapes = symbol._infer_shapes(**given)
    unknown = [n for n, s in zip(names + aux_names, arg_shapes + aux_shapes, strict=True)
               if s is None]
    if unknown:
        raise ValueError(f"reshape: shapes {given} do not determine the shapes of {unknown}")
    args, grads, aux = {}, {}, {}
    for name, shape in zip(names, arg_shapes, strict=True):
        old = exe.arg_dict[name]
        if shape != old.shape and name not in given and not partial_shaping:
            raise MXNetShapeError(
                f"Shape of unspecified array arg: {name} changed from {old.shape} to {shape}. "
                "This can cause the new executor to not share parameters with the old one. "
                "Please check for error in network. If this is intended, set "
                "partial_shaping=True to suppress this warning.")
        args[name] = _view_or_new(name, old, shape, allow_up_sizing)
        if name in exe.grad_dict:
            grads[name] = _view_or_new(name, exe.grad_dict[name], shape, allow_up_sizing)
    for name, shape in zip(aux_names, aux_shapes, strict=True):
        old = exe.aux_dict[name]
        if shape != old.shape and not partial_shaping:
            raise MXNetShapeError(f"Shape of unspecified array aux: {name} changed from "
                             f"{old.shape} to {shape}; set partial_shaping=True if intended.")
        aux[name] = _view_or_new(name, old, shape, allow_up_sizing)
    new = Executor(symbol, exe._ctx, args, grads or None, exe._grad_req, aux, exe._group2ctx)
    # the outputs too live in the original's memory where they fit
    new.outputs = [fresh if fresh.size > old.size or fresh.dtype != old.dtype
                   else _view_or_new(name, old, fresh.shape, False)
                   for name, old, fresh in zip(symbol.list_outputs(), exe.outputs,
                                               new.outputs, strict=True)]
    return new
