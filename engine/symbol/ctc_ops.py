"""MXNet's ``CTCLoss`` (alias ``ctc_loss``) as a symbol operator.

The loss itself is :func:`engine.ndarray.ctc_ops.ctc_loss` (one implementation for both
APIs); this module only declares the graph node: which inputs exist depending on
``use_data_lengths``/``use_label_lengths``, the output shape (N,), and MXNet's two outputs of
which only the loss is visible.
"""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray
from ..ndarray.ctc_ops import ctc_loss
from .ops import OpSpec, Shape, _bool, _choice, _op


def _ctc_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    return shapes, None if data is None else (data[1],)


class _CTCSpec(OpSpec):
    def input_names(self, params: dict[str, Any], count: int = 0) -> tuple[str, ...]:
        return (("data", "label") + (("data_lengths",) if params["use_data_lengths"] else ())
                + (("label_lengths",) if params["use_label_lengths"] else ()))


_op(_CTCSpec(
    "CTCLoss", ("data", "label", "data_lengths", "label_lengths"),
    {"use_data_lengths": (_bool, False), "use_label_lengths": (_bool, False),
     "blank_label": (_choice("first", "last"), "first")},
    _ctc_infer, lambda p, x: ctc_loss(*x[:2], *_lengths(p, x), **p),
    num_outputs=2, outputs=lambda p: ["output0"], hint="ctcloss",
))


def _lengths(p: dict[str, Any], x: list[NDArray]) -> list[Any]:
    rest = list(x[2:])
    data_lengths = rest.pop(0) if p["use_data_lengths"] else None
    label_lengths = rest.pop(0) if p["use_label_lengths"] else None
    return [data_lengths, label_lengths]
