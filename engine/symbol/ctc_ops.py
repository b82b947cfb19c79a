"""MXNet's ``CTCLoss`` (alias ``ctc_loss``) on symbols: connectionist temporal
classification loss of activations (T, N, C) against padded label sequences (N, L).

The forward runs the CTC forward-backward recursion in log space per sample; the
gradient with respect to the activations is ``softmax - posterior occupancy`` times the
head gradient. With ``blank_label='first'`` the blank is class 0 and labels pad with 0;
with ``'last'`` the blank is class C-1 and labels pad with -1. ``data_lengths`` and
``label_lengths`` are used when their flags say so.
"""

from __future__ import annotations

from typing import Any

import numpy

from ..ndarray import NDArray, apply_op
from ..ndarray.ndarray import as_raw
from .ops import OpSpec, Shape, _bool, _op


def _logsumexp(xp: Any, a: Any, b: Any) -> Any:
    top = xp.maximum(a, b)
    safe = xp.where(xp.isfinite(top), top, 0.0)
    return xp.where(xp.isfinite(top), safe + xp.log(xp.exp(a - safe) + xp.exp(b - safe)),
                    top)


def _sequence(xp: Any, log_probs: Any, labels: Any, blank: int) -> tuple[float, Any]:
    """Negative log-likelihood of one sample and its gradient wrt the activations."""
    steps = log_probs.shape[0]
    ext = xp.full(2 * len(labels) + 1, blank, dtype=numpy.int64)
    ext[1::2] = labels
    size = ext.shape[0]
    emit = log_probs[:, ext]  # (T, S)
    skip = xp.zeros(size, dtype=bool)
    if size > 2:
        skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    alpha = xp.full((steps, size), -numpy.inf)
    alpha[0, 0] = emit[0, 0]
    if size > 1:
        alpha[0, 1] = emit[0, 1]
    for t in range(1, steps):
        prev = alpha[t - 1]
        total = prev.copy()
        total[1:] = _logsumexp(xp, total[1:], prev[:-1])
        total[2:] = xp.where(skip[2:], _logsumexp(xp, total[2:], prev[:-2]), total[2:])
        alpha[t] = total + emit[t]
    beta = xp.full((steps, size), -numpy.inf)
    beta[-1, -1] = emit[-1, -1]
    if size > 1:
        beta[-1, -2] = emit[-1, -2]
    skip_back = xp.zeros(size, dtype=bool)
    skip_back[:-2] = skip[2:]
    for t in range(steps - 2, -1, -1):
        nxt = beta[t + 1]
        total = nxt.copy()
        total[:-1] = _logsumexp(xp, total[:-1], nxt[1:])
        total[:-2] = xp.where(skip_back[:-2], _logsumexp(xp, total[:-2], nxt[2:]),
                              total[:-2])
        beta[t] = total + emit[t]
    log_likelihood = alpha[-1, -1] if size == 1 else _logsumexp(xp, alpha[-1, -1],
                                                                alpha[-1, -2])
    occupancy = xp.exp(alpha + beta - emit - log_likelihood)  # (T, S)
    posterior = xp.zeros_like(log_probs)
    for s in range(size):
        posterior[:, int(ext[s])] += occupancy[:, s]
    return float(-log_likelihood), xp.exp(log_probs) - posterior


def ctc_loss(data: NDArray, label: Any, data_lengths: Any = None, label_lengths: Any = None,
             use_data_lengths: bool = False, use_label_lengths: bool = False,
             blank_label: str = "first") -> NDArray:
    x = data.raw
    xp = data.xp
    x64 = x.astype(numpy.float64)
    shifted = x64 - x64.max(axis=2, keepdims=True)
    log_probs = shifted - xp.log(xp.exp(shifted).sum(axis=2, keepdims=True))
    labels = as_raw(label, data).astype(numpy.int64)
    blank = 0 if blank_label == "first" else x.shape[2] - 1
    pad = 0 if blank_label == "first" else -1
    steps_of = as_raw(data_lengths, data).astype(numpy.int64) if use_data_lengths else None
    lens_of = as_raw(label_lengths, data).astype(numpy.int64) if use_label_lengths else None
    losses = xp.zeros(x.shape[1], dtype=numpy.float64)
    grad = xp.zeros_like(x64)
    for n in range(x.shape[1]):
        row = labels[n]
        if lens_of is not None:
            row = row[:int(lens_of[n])]
        else:
            ends = xp.nonzero(row == pad)[0]
            row = row[:int(ends[0])] if len(ends) else row
        steps = int(steps_of[n]) if steps_of is not None else x.shape[0]
        with numpy.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf paths
            losses[n], grad[:steps, n] = _sequence(xp, log_probs[:steps, n], row, blank)

    def backward(g: Any) -> tuple[Any]:
        return ((grad * g.reshape(1, -1, 1)).astype(x.dtype, copy=False),)

    return apply_op(losses.astype(x.dtype), (data,), backward)


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
     "blank_label": (str, "first")},
    _ctc_infer, lambda p, x: ctc_loss(*x[:2], *_lengths(p, x), **p),
    num_outputs=2, outputs=lambda p: ["output0"], hint="ctcloss",
))


def _lengths(p: dict[str, Any], x: list[NDArray]) -> list[Any]:
    rest = list(x[2:])
    data_lengths = rest.pop(0) if p["use_data_lengths"] else None
    label_lengths = rest.pop(0) if p["use_label_lengths"] else None
    return [data_lengths, label_lengths]
