"""MXNet's dtype inference rules for :mod:`.inference`, in both directions.

Most operators have one dtype for their inputs and outputs, so a dtype known anywhere
spreads through them both ways (``FullyConnected``'s weight takes its data's dtype, and the
data its weight's). The exceptions, as MXNet 1.9.1 infers them:

- ``Cast``/``cast`` and operators with a ``dtype`` argument set their output's dtype and
  leave their inputs free; ``shape_array``/``size_array`` give int64; ``one_hot`` and the
  operators without inputs (``zeros``, samplers) float32 unless told;
- index-like inputs are free (``pick``'s and ``take``'s indices, ``Embedding``'s data,
  ``where``'s condition, the ``*_like`` operators' shape reference, ...); ``Embedding``'s
  weight and output have its ``dtype`` (float32 by default);
- ``BatchNorm`` keeps float32 parameters and statistics for float16 data.
"""

from __future__ import annotations

from typing import Any

import numpy

from .inference import Conflict

Partial = numpy.dtype | None
_FLOAT32 = numpy.dtype(numpy.float32)

_CASTS = frozenset({"Cast", "cast", "amp_cast"})
_INT64_OUTPUT = frozenset({"shape_array", "size_array"})
_FLOAT32_DEFAULT = frozenset({"one_hot", "Embedding"})  # their dtype argument's default
_BATCH_NORMS = frozenset({"BatchNorm", "BatchNorm_v1", "SyncBatchNorm"})
# input positions that do not share the operator's dtype
_FREE_INPUTS: dict[str, frozenset[int]] = {
    "pick": frozenset({1}), "choose_element_0index": frozenset({1}), "take": frozenset({1}),
    "batch_take": frozenset({1}), "one_hot": frozenset({0}), "where": frozenset({0}),
    "gather_nd": frozenset({1}), "scatter_nd": frozenset({1}), "Embedding": frozenset({0}),
    "SequenceMask": frozenset({1}), "SequenceLast": frozenset({1}),
    "SequenceReverse": frozenset({1}), "slice_like": frozenset({1}),
    "reshape_like": frozenset({1}), "broadcast_like": frozenset({1}),
    "_identity_with_attr_like_rhs": frozenset({1}), "CTCLoss": frozenset({1, 2, 3}),
}


def merge(old: Partial, new: Partial) -> Partial:
    if old is None:
        return new
    if new is None or new == old:
        return old
    raise Conflict(old, new)


def _declared(params: dict[str, Any]) -> Partial:
    value = params.get("dtype")
    if value in (None, "None"):
        return None
    return numpy.dtype(value)


def refine(node: Any, ins: list[Partial], outs: list[Partial]) -> tuple[list[Partial],
                                                                          list[Partial]]:
    """What ``node`` says about its inputs' and outputs' dtypes, given the current ones."""
    op, params = node.op, node.params()
    if op in _BATCH_NORMS:
        data = merge(ins[0], outs[0]) if ins else outs[0]
        stats = None if data is None else (_FLOAT32 if data == numpy.float16 else data)
        return [data] + [stats] * (len(ins) - 1), [data] + [stats] * (len(outs) - 1)
    fixed = _output_dtype(op, params, ins)
    free = _FREE_INPUTS.get(op, frozenset())
    if op == "Embedding":  # the weight has the output's dtype, the indices any
        return [ins[0], fixed] + list(ins[2:]), [fixed] * len(outs)
    if fixed is not None:
        return list(ins), [fixed] * len(outs)
    shared: Partial = None
    for i, dtype in enumerate(ins):
        if i not in free:
            shared = merge(shared, dtype)
    for dtype in outs:
        shared = merge(shared, dtype)
    return ([dtype if i in free else shared for i, dtype in enumerate(ins)],
            [shared] * len(outs))


def _output_dtype(op: str, params: dict[str, Any], ins: list[Partial]) -> Partial:
    """The output dtype an operator sets whatever its inputs' (None: it follows them)."""
    declared = _declared(params)
    if op in _CASTS or declared is not None:
        return declared
    if op in _INT64_OUTPUT:
        return numpy.dtype(numpy.int64)
    if op in _FLOAT32_DEFAULT or not ins:
        return _FLOAT32
    return None
