"""Connectionist temporal classification loss (``CTCLoss``, Graves et al. 2006).

``data`` holds unnormalized scores (T, N, C); the op applies the softmax itself, sums the
probability of every alignment of each label sequence with the forward-backward recursion in
log space, and returns ``-log p`` per sample. Its backward rule is the closed form
``softmax - posterior(label class)`` per frame (frames beyond a sample's length get zero).

>>> from engine import nd
>>> scores = nd.zeros((2, 1, 2))  # two frames, classes {a, blank}, uniform
>>> round(float(nd.CTCLoss(scores, nd.array([[0]]), blank_label="last").asscalar()), 4)
0.2877
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import backend
from .ndarray import NDArray, apply_op, as_raw

_NEG_INF = -numpy.inf


def _label_rows(label: numpy.ndarray, lengths: numpy.ndarray | None, padding: int,
                offset: int) -> list[numpy.ndarray]:
    rows = []
    for n, row in enumerate(label.astype(numpy.int64)):
        if lengths is not None:
            row = row[: int(lengths[n])]
        else:
            stop = numpy.nonzero(row == padding)[0]
            row = row[: stop[0]] if stop.size else row
        rows.append(row - offset)
    return rows


def _extended(rows: list[numpy.ndarray], blank: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Labels with blanks between and around (``l'``), padded with blanks; and their lengths."""
    width = 2 * max((len(r) for r in rows), default=0) + 1
    ext = numpy.full((len(rows), width), blank, dtype=numpy.int64)
    for n, row in enumerate(rows):
        ext[n, 1 : 2 * len(row) : 2] = row
    return ext, numpy.array([2 * len(r) + 1 for r in rows], dtype=numpy.int64)


def _logsumexp(*terms: numpy.ndarray) -> numpy.ndarray:
    stacked = numpy.stack(terms)
    peak = stacked.max(axis=0)
    safe = numpy.where(numpy.isfinite(peak), peak, 0.0)
    with numpy.errstate(divide="ignore"):
        return safe + numpy.log(numpy.exp(stacked - safe).sum(axis=0))


def _forward_backward(log_probs: numpy.ndarray, ext: numpy.ndarray, ext_len: numpy.ndarray,
                      frames: numpy.ndarray, blank: int) -> tuple[Any, Any, Any]:
    steps, batch, _ = log_probs.shape
    width = ext.shape[1]
    emit = numpy.take_along_axis(log_probs, numpy.broadcast_to(ext, (steps,) + ext.shape),
                                 axis=2)  # (T, N, S): log-probability of each l'(s)
    valid_s = numpy.arange(width)[None, :] < ext_len[:, None]
    shifted2 = numpy.zeros_like(ext, dtype=bool)
    shifted2[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    pad1 = numpy.full((batch, 1), _NEG_INF)
    pad2 = numpy.full((batch, 2), _NEG_INF)

    alpha = numpy.full((steps, batch, width), _NEG_INF)
    alpha[0, :, :2] = emit[0, :, :2]
    alpha[0] = numpy.where(valid_s, alpha[0], _NEG_INF)
    for t in range(1, steps):
        prev = alpha[t - 1]
        skip = numpy.where(shifted2, numpy.concatenate([pad2, prev[:, :-2]], axis=1), _NEG_INF)
        step = _logsumexp(prev, numpy.concatenate([pad1, prev[:, :-1]], axis=1), skip) + emit[t]
        alpha[t] = numpy.where(valid_s & (t < frames)[:, None], step, prev)

    last = frames - 1
    end = alpha[last, numpy.arange(batch)]
    tail = numpy.take_along_axis(end, (ext_len - 1)[:, None], axis=1)[:, 0]
    before = numpy.take_along_axis(end, numpy.maximum(ext_len - 2, 0)[:, None], axis=1)[:, 0]
    log_p = _logsumexp(tail, numpy.where(ext_len > 1, before, _NEG_INF))

    # beta[t, s]: log-probability of the rest of the label after being at s at frame t
    beta = numpy.full((steps, batch, width), _NEG_INF)
    final = numpy.full((batch, width), _NEG_INF)
    final[numpy.arange(batch), ext_len - 1] = 0.0
    final[numpy.arange(batch), numpy.maximum(ext_len - 2, 0)] = 0.0
    beta[steps - 1] = final
    next_skip = numpy.zeros_like(shifted2)
    next_skip[:, :-2] = shifted2[:, 2:]
    for t in range(steps - 2, -1, -1):
        nxt = beta[t + 1] + emit[t + 1]
        skip = numpy.where(next_skip, numpy.concatenate([nxt[:, 2:], pad2], axis=1), _NEG_INF)
        step = _logsumexp(nxt, numpy.concatenate([nxt[:, 1:], pad1], axis=1), skip)
        beta[t] = numpy.where((t < last)[:, None], step,
                              numpy.where((t == last)[:, None], final, _NEG_INF))
    return alpha, beta, log_p


def ctc_loss(data: NDArray, label: Any, data_lengths: Any = None, label_lengths: Any = None,
             use_data_lengths: bool = False, use_label_lengths: bool = False,
             blank_label: str = "first", **_: Any) -> NDArray:
    """Per-sample CTC loss of scores ``data`` (T, N, C) against ``label`` (N, L).

    ``blank_label='first'``: class 0 is the blank, labels are 1..C-1, padded with 0;
    ``'last'``: class C-1 is the blank, labels 0..C-2, padded with -1.
    """
    if blank_label not in ("first", "last"):
        raise ValueError(f"blank_label must be 'first' or 'last', got {blank_label!r}")
    scores = backend.to_numpy(data._data).astype(numpy.float64)
    steps, batch, classes = scores.shape
    blank = 0 if blank_label == "first" else classes - 1
    lab = backend.to_numpy(as_raw(label))
    lab_len = backend.to_numpy(as_raw(label_lengths)) if use_label_lengths else None
    rows = _label_rows(numpy.asarray(lab), lab_len, 0 if blank_label == "first" else -1, 0)
    frames = numpy.full(batch, steps, dtype=numpy.int64)
    if use_data_lengths:
        frames = numpy.asarray(backend.to_numpy(as_raw(data_lengths))).astype(numpy.int64)
    ext, ext_len = _extended(rows, blank)

    shifted = scores - scores.max(axis=2, keepdims=True)
    log_probs = shifted - numpy.log(numpy.exp(shifted).sum(axis=2, keepdims=True))
    alpha, beta, log_p = _forward_backward(log_probs, ext, ext_len, frames, blank)
    # a label that no alignment fits in the frames (too long, too many repeats) has p = 0;
    # MXNet 1.9.1 reports a loss of 0 with a zero gradient for it, not inf
    loss = numpy.where(numpy.isfinite(log_p), -log_p, 0.0).astype(data._data.dtype)
    xp = data.xp
    out = xp.asarray(loss)

    def backward(g: Any) -> tuple[Any, ...]:
        with numpy.errstate(invalid="ignore"):
            posterior = numpy.exp(alpha + beta - log_p[None, :, None])  # (T, N, S)
        posterior = numpy.nan_to_num(posterior, nan=0.0, posinf=0.0)
        occupancy = numpy.zeros((steps, batch, classes))
        t_idx, n_idx = numpy.meshgrid(numpy.arange(steps), numpy.arange(batch), indexing="ij")
        for s in range(ext.shape[1]):
            numpy.add.at(occupancy, (t_idx, n_idx, ext[None, :, s].repeat(steps, 0)),
                         posterior[:, :, s] * (s < ext_len)[None, :])
        grad = numpy.exp(log_probs) - occupancy
        grad *= (numpy.arange(steps)[:, None] < frames[None, :])[:, :, None]
        grad[:, ~numpy.isfinite(log_p)] = 0.0
        head = backend.to_numpy(g).astype(numpy.float64).reshape(1, batch, 1)
        return (xp.asarray((grad * head).astype(data._data.dtype)),)

    return apply_op(out, (data,), backward)


CTCLoss = ctc_loss
