"""A fused recurrence for the recurrent layers: one recorded node per (layer, direction).

``recurrence(projected, h0, c0, h2h_weight, h2h_bias, mode)`` runs the time loop over inputs
whose ``i2h`` projection is already computed (one GEMM for all steps), and returns every
step's hidden state, (T, N, H), or for an LSTM (T, N, 2H) holding ``[h_t, c_t]``. Its
backward is hand-written backpropagation through time, so a long sequence is one node of
the autograd tape instead of a dozen per step. Gate orders are MXNet's: LSTM (i, f, g, o),
GRU (r, z, n) with the reset gate applied to ``W_hn h + b_hn``.

>>> import numpy as np
>>> from engine import nd
>>> out = recurrence(nd.zeros((3, 2, 4)), nd.zeros((2, 4)), None, nd.zeros((4, 4)),
...                  nd.zeros((4,)), "rnn_tanh")
>>> out.shape
(3, 2, 4)
"""

from __future__ import annotations

from typing import Any

from .ndarray import NDArray, apply_op


def _sigmoid(xp: Any, x: Any) -> Any:
    return 0.5 * (xp.tanh(0.5 * x) + 1.0)  # overflow-free logistic


def _lstm(xp: Any, proj: Any, h: Any, c: Any, w: Any, b: Any, clip: Any) -> tuple[Any, Any]:
    steps, _, width = proj.shape
    hidden = width // 4
    out = xp.empty(proj.shape[:2] + (2 * hidden,), proj.dtype)
    gates = xp.empty_like(proj)
    keep = xp.empty(proj.shape[:2] + (hidden,), bool) if clip is not None else None
    for t in range(steps):
        a = proj[t] + h @ w.T + b
        gate = gates[t]
        gate[:, : 2 * hidden] = _sigmoid(xp, a[:, : 2 * hidden])
        gate[:, 2 * hidden : 3 * hidden] = xp.tanh(a[:, 2 * hidden : 3 * hidden])
        gate[:, 3 * hidden :] = _sigmoid(xp, a[:, 3 * hidden :])
        i, f, g, o = (gate[:, k * hidden : (k + 1) * hidden] for k in range(4))
        c = f * c + i * g
        if clip is not None:
            low = -xp.inf if clip[0] is None else clip[0]
            high = xp.inf if clip[1] is None else clip[1]
            keep[t] = (c >= low) & (c <= high)
            c = xp.clip(c, low, high)
        h = o * xp.tanh(c)
        out[t, :, :hidden] = h
        out[t, :, hidden:] = c
    return out, (gates, keep)


def _lstm_backward(xp: Any, g_out: Any, out: Any, saved: Any, h0: Any, c0: Any, w: Any
                   ) -> tuple[Any, Any, Any, Any, Any]:
    gates, keep = saved
    steps = out.shape[0]
    hidden = out.shape[2] // 2
    d_proj = xp.empty_like(gates)
    dh_next = xp.zeros_like(h0)
    dc_next = xp.zeros_like(c0)
    for t in range(steps - 1, -1, -1):
        i, f, g, o = (gates[t][:, k * hidden : (k + 1) * hidden] for k in range(4))
        c = out[t, :, hidden:]
        c_prev = out[t - 1, :, hidden:] if t else c0
        dh = g_out[t, :, :hidden] + dh_next
        tanh_c = xp.tanh(c)
        dc = g_out[t, :, hidden:] + dc_next + dh * o * (1 - tanh_c * tanh_c)
        if keep is not None:
            dc = dc * keep[t]
        da = d_proj[t]
        da[:, :hidden] = dc * g * i * (1 - i)
        da[:, hidden : 2 * hidden] = dc * c_prev * f * (1 - f)
        da[:, 2 * hidden : 3 * hidden] = dc * i * (1 - g * g)
        da[:, 3 * hidden :] = dh * tanh_c * o * (1 - o)
        dc_next = dc * f
        dh_next = da @ w
    h_prev = xp.concatenate([h0[None], out[:-1, :, :hidden]], axis=0)
    flat = d_proj.reshape(-1, d_proj.shape[2])
    dw = flat.T @ h_prev.reshape(-1, hidden)
    return d_proj, dh_next, dc_next, dw, flat.sum(axis=0)


def _gru(xp: Any, proj: Any, h: Any, w: Any, b: Any) -> tuple[Any, Any]:
    steps, _, width = proj.shape
    hidden = width // 3
    out = xp.empty(proj.shape[:2] + (hidden,), proj.dtype)
    saved = xp.empty(proj.shape[:2] + (4 * hidden,), proj.dtype)  # r, z, n, W_hn h + b_hn
    for t in range(steps):
        hh = h @ w.T + b
        x = proj[t]
        r = _sigmoid(xp, x[:, :hidden] + hh[:, :hidden])
        z = _sigmoid(xp, x[:, hidden : 2 * hidden] + hh[:, hidden : 2 * hidden])
        hn = hh[:, 2 * hidden :]
        n = xp.tanh(x[:, 2 * hidden :] + r * hn)
        h = (1 - z) * n + z * h
        out[t] = h
        saved[t] = xp.concatenate([r, z, n, hn], axis=1)
    return out, saved


def _gru_backward(xp: Any, g_out: Any, out: Any, saved: Any, h0: Any, w: Any
                  ) -> tuple[Any, Any, Any, Any]:
    steps, _, hidden = out.shape
    d_proj = xp.empty(out.shape[:2] + (3 * hidden,), out.dtype)
    d_hh = xp.empty_like(d_proj)
    dh_next = xp.zeros_like(h0)
    for t in range(steps - 1, -1, -1):
        r, z, n, hn = (saved[t][:, k * hidden : (k + 1) * hidden] for k in range(4))
        h_prev = out[t - 1] if t else h0
        dh = g_out[t] + dh_next
        da_n = dh * (1 - z) * (1 - n * n)
        da_r = da_n * hn * r * (1 - r)
        da_z = dh * (h_prev - n) * z * (1 - z)
        d_proj[t] = xp.concatenate([da_r, da_z, da_n], axis=1)
        d_hh[t] = xp.concatenate([da_r, da_z, da_n * r], axis=1)
        dh_next = dh * z + d_hh[t] @ w
    h_prev_all = xp.concatenate([h0[None], out[:-1]], axis=0)
    flat = d_hh.reshape(-1, 3 * hidden)
    dw = flat.T @ h_prev_all.reshape(-1, hidden)
    return d_proj, dh_next, dw, flat.sum(axis=0)


def _simple(xp: Any, proj: Any, h: Any, w: Any, b: Any, relu: bool) -> Any:
    out = xp.empty_like(proj)
    for t in range(proj.shape[0]):
        a = proj[t] + h @ w.T + b
        h = xp.maximum(a, 0) if relu else xp.tanh(a)
        out[t] = h
    return out


def _simple_backward(xp: Any, g_out: Any, out: Any, h0: Any, w: Any, relu: bool
                     ) -> tuple[Any, Any, Any, Any]:
    d_proj = xp.empty_like(out)
    dh_next = xp.zeros_like(h0)
    for t in range(out.shape[0] - 1, -1, -1):
        h = out[t]
        slope = (h > 0).astype(h.dtype) if relu else 1 - h * h
        d_proj[t] = (g_out[t] + dh_next) * slope
        dh_next = d_proj[t] @ w
    hidden = out.shape[2]
    h_prev = xp.concatenate([h0[None], out[:-1]], axis=0)
    flat = d_proj.reshape(-1, hidden)
    return d_proj, dh_next, flat.T @ h_prev.reshape(-1, hidden), flat.sum(axis=0)


def recurrence(projected: NDArray, h0: NDArray, c0: NDArray | None, h2h_weight: NDArray,
               h2h_bias: NDArray, mode: str, clip: tuple[Any, Any] | None = None) -> NDArray:
    """Every step's state of one recurrent layer direction; see the module docstring.
    ``mode``: 'lstm', 'gru', 'rnn_tanh' or 'rnn_relu'; ``clip`` bounds an LSTM's cell."""
    xp = projected.xp
    proj, h, w, b = projected._data, h0._data, h2h_weight._data, h2h_bias._data
    if mode == "lstm":
        assert c0 is not None
        out, saved = _lstm(xp, proj, h, c0._data, w, b, clip)
        inputs: tuple[NDArray, ...] = (projected, h0, c0, h2h_weight, h2h_bias)

        def backward(g: Any) -> tuple[Any, ...]:
            return _lstm_backward(xp, g, out, saved, h, c0._data, w)

        return apply_op(out, inputs, backward)
    if mode == "gru":
        out, saved = _gru(xp, proj, h, w, b)
        return apply_op(out, (projected, h0, h2h_weight, h2h_bias),
                        lambda g: _gru_backward(xp, g, out, saved, h, w))
    relu = mode == "rnn_relu"
    out = _simple(xp, proj, h, w, b, relu)
    return apply_op(out, (projected, h0, h2h_weight, h2h_bias),
                    lambda g: _simple_backward(xp, g, out, h, w, relu))
