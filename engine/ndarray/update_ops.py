"""MXNet's fused optimizer operators (``nd.sgd_update``, ``nd.adam_update``, ...).

Each runs the same raw update rule as the matching :mod:`engine.optimizer` class, so the
operator and the optimizer cannot drift apart. As in MXNet, state arrays (momentum, mean,
...) are updated in place; the new weight goes to ``out`` (pass ``out=weight`` to update in
place) or to a new array. Adam's operator applies no bias correction (the optimizer folds it
into ``lr``), which the rule reproduces with ``t = ∞``.

>>> from engine import nd
>>> w, g = nd.ones((2,)), nd.ones((2,))
>>> nd.sgd_update(w, g, lr=0.1, out=w).asnumpy().astype(float).round(4).tolist()
[0.9, 0.9]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy

from .ndarray import NDArray

_NO_BIAS_CORRECTION = math.inf  # beta ** inf == 0: lr_t == lr


def _optimizer(name: str, **kwargs: Any) -> Any:
    from .. import optimizer

    return getattr(optimizer, name)(**kwargs)


def _finish(weight: NDArray, new_w: Any, out: NDArray | None) -> NDArray:
    if out is None:
        return NDArray(new_w.astype(weight._data.dtype, copy=False), weight.context)
    out._data[...] = new_w
    return out


def _apply(name: str, weight: NDArray, grad: NDArray, state: Any, lr: float, wd: float,
           rescale_grad: float, clip_gradient: float, out: NDArray | None,
           t: float = 1, weight32: NDArray | None = None, **hyper: Any) -> NDArray:
    """Run optimizer ``name``'s rule once; on ``weight32`` (updated in place) if given."""
    opt = _optimizer(name, learning_rate=lr, wd=wd, rescale_grad=rescale_grad,
                     clip_gradient=clip_gradient if clip_gradient > 0 else None, **hyper)
    from ..optimizer.segments import WHOLE

    if weight32 is not None:
        g = grad._data.astype(numpy.float32)
        opt._rule(weight32._data, g, state, lr, wd, t, WHOLE)
        return _finish(weight, weight32._data, out)
    w = weight._data.copy()
    opt._rule(w, grad._data, state, lr, wd, t, WHOLE)
    return _finish(weight, w, out)


def sgd_update(weight: NDArray, grad: NDArray, lr: float, wd: float = 0.0,
               rescale_grad: float = 1.0, clip_gradient: float = -1.0,
               lazy_update: bool = True, out: NDArray | None = None, **_: Any) -> NDArray:
    """``w ← (1 − lr·wd)·w − lr·C(r·g)``."""
    return _apply("SGD", weight, grad, None, lr, wd, rescale_grad, clip_gradient, out)


def sgd_mom_update(weight: NDArray, grad: NDArray, mom: NDArray, lr: float,
                   momentum: float = 0.0, wd: float = 0.0, rescale_grad: float = 1.0,
                   clip_gradient: float = -1.0, lazy_update: bool = True,
                   out: NDArray | None = None, **_: Any) -> NDArray:
    """``m ← μ·m − lr·wd·w − lr·C(r·g)``; ``w ← w + m``."""
    return _apply("SGD", weight, grad, mom._data, lr, wd, rescale_grad, clip_gradient, out,
                  momentum=momentum)


def mp_sgd_update(weight: NDArray, grad: NDArray, weight32: NDArray, lr: float,
                  wd: float = 0.0, rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                  lazy_update: bool = True, out: NDArray | None = None, **_: Any) -> NDArray:
    return _apply("SGD", weight, grad, None, lr, wd, rescale_grad, clip_gradient, out,
                  weight32=weight32)


def mp_sgd_mom_update(weight: NDArray, grad: NDArray, mom: NDArray, weight32: NDArray,
                      lr: float, momentum: float = 0.0, wd: float = 0.0,
                      rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                      lazy_update: bool = True, out: NDArray | None = None,
                      **_: Any) -> NDArray:
    return _apply("SGD", weight, grad, mom._data, lr, wd, rescale_grad, clip_gradient, out,
                  weight32=weight32, momentum=momentum)


def nag_mom_update(weight: NDArray, grad: NDArray, mom: NDArray, lr: float,
                   momentum: float = 0.0, wd: float = 0.0, rescale_grad: float = 1.0,
                   clip_gradient: float = -1.0, out: NDArray | None = None,
                   **_: Any) -> NDArray:
    return _apply("NAG", weight, grad, mom._data, lr, wd, rescale_grad, clip_gradient, out,
                  momentum=momentum)


def mp_nag_mom_update(weight: NDArray, grad: NDArray, mom: NDArray, weight32: NDArray,
                      lr: float, momentum: float = 0.0, wd: float = 0.0,
                      rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                      out: NDArray | None = None, **_: Any) -> NDArray:
    return _apply("NAG", weight, grad, mom._data, lr, wd, rescale_grad, clip_gradient, out,
                  weight32=weight32, momentum=momentum)


def adam_update(weight: NDArray, grad: NDArray, mean: NDArray, var: NDArray, lr: float,
                beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                wd: float = 0.0, rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                lazy_update: bool = True, out: NDArray | None = None, **_: Any) -> NDArray:
    """Adam's step without bias correction: ``w ← w − lr·m/(√v + ε)``."""
    return _apply("Adam", weight, grad, (mean._data, var._data), lr, wd, rescale_grad,
                  clip_gradient, out, t=_NO_BIAS_CORRECTION, beta1=beta1, beta2=beta2,
                  epsilon=epsilon)


def rmsprop_update(weight: NDArray, grad: NDArray, n: NDArray, lr: float,
                   gamma1: float = 0.95, epsilon: float = 1e-8, wd: float = 0.0,
                   rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                   clip_weights: float = -1.0, out: NDArray | None = None,
                   **_: Any) -> NDArray:
    return _apply("RMSProp", weight, grad, (n._data,), lr, wd, rescale_grad, clip_gradient,
                  out, gamma1=gamma1, epsilon=epsilon,
                  clip_weights=clip_weights if clip_weights > 0 else None)


def rmspropalex_update(weight: NDArray, grad: NDArray, n: NDArray, g: NDArray,
                       delta: NDArray, lr: float, gamma1: float = 0.95, gamma2: float = 0.9,
                       epsilon: float = 1e-8, wd: float = 0.0, rescale_grad: float = 1.0,
                       clip_gradient: float = -1.0, clip_weights: float = -1.0,
                       out: NDArray | None = None, **_: Any) -> NDArray:
    """Centered RMSProp (Graves 2013)."""
    return _apply("RMSProp", weight, grad, (n._data, g._data, delta._data), lr, wd,
                  rescale_grad, clip_gradient, out, gamma1=gamma1, gamma2=gamma2,
                  epsilon=epsilon, centered=True,
                  clip_weights=clip_weights if clip_weights > 0 else None)


def ftrl_update(weight: NDArray, grad: NDArray, z: NDArray, n: NDArray, lr: float,
                lamda1: float = 0.01, beta: float = 1.0, wd: float = 0.0,
                rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                out: NDArray | None = None, **_: Any) -> NDArray:
    return _apply("Ftrl", weight, grad, (z._data, n._data), lr, wd, rescale_grad,
                  clip_gradient, out, lamda1=lamda1, beta=beta)


def ftml_update(weight: NDArray, grad: NDArray, d: NDArray, v: NDArray, z: NDArray,
                lr: float, t: int, beta1: float = 0.6, beta2: float = 0.999,
                epsilon: float = 1e-8, wd: float = 0.0, rescale_grad: float = 1.0,
                clip_grad: float = -1.0, out: NDArray | None = None, **_: Any) -> NDArray:
    return _apply("FTML", weight, grad, (d._data, v._data, z._data), lr, wd, rescale_grad,
                  clip_grad, out, t=t, beta1=beta1, beta2=beta2, epsilon=epsilon)


def signsgd_update(weight: NDArray, grad: NDArray, lr: float, wd: float = 0.0,
                   rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                   out: NDArray | None = None, **_: Any) -> NDArray:
    """``w ← (1 − lr·wd)·w − lr·sign(g)``."""
    return _apply("Signum", weight, grad, None, lr, wd, rescale_grad, clip_gradient, out,
                  momentum=0.0)


def signum_update(weight: NDArray, grad: NDArray, mom: NDArray, lr: float,
                  momentum: float = 0.0, wd: float = 0.0, rescale_grad: float = 1.0,
                  clip_gradient: float = -1.0, wd_lh: float = 0.0,
                  out: NDArray | None = None, **_: Any) -> NDArray:
    return _apply("Signum", weight, grad, mom._data, lr, wd, rescale_grad, clip_gradient, out,
                  momentum=momentum, wd_lh=wd_lh)


# ------------------------------------------------------------------------- LAMB


def lamb_update_phase1(weight: NDArray, grad: NDArray, mean: NDArray, var: NDArray,
                       beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-6,
                       t: int = 1, bias_correction: bool = True, wd: float = 0.0,
                       rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                       out: NDArray | None = None, **_: Any) -> NDArray:
    """LAMB's direction ``m̂/(√v̂ + ε) + wd·w``; ``mean``/``var`` are updated in place."""
    xp = weight.xp
    w = weight._data
    g = grad._data.astype(numpy.float32) * rescale_grad
    if clip_gradient >= 0:
        g = xp.clip(g, -clip_gradient, clip_gradient)
    m, v = mean._data, var._data
    m[...] = beta1 * m + (1 - beta1) * g
    v[...] = beta2 * v + (1 - beta2) * g * g
    m_hat, v_hat = (m / (1 - beta1**t), v / (1 - beta2**t)) if bias_correction else (m, v)
    direction = m_hat / (xp.sqrt(v_hat) + epsilon) + wd * w
    return _finish(weight, direction, out)


def lamb_update_phase2(weight: NDArray, g: NDArray, r1: NDArray, r2: NDArray, lr: float,
                       lower_bound: float = -1.0, upper_bound: float = -1.0,
                       out: NDArray | None = None, **_: Any) -> NDArray:
    """``w ← w − lr·(r1/r2)·g`` with ``r1`` clamped to the bounds (ratio 1 if either is 0)."""
    n1, n2 = float(r1.asnumpy().reshape(-1)[0]), float(r2.asnumpy().reshape(-1)[0])
    if lower_bound >= 0:
        n1 = max(n1, lower_bound)
    if upper_bound >= 0:
        n1 = min(n1, upper_bound)
    ratio = n1 / n2 if n1 != 0 and n2 != 0 else 1.0
    return _finish(weight, weight._data - lr * ratio * g._data, out)


def mp_lamb_update_phase1(weight: NDArray, grad: NDArray, mean: NDArray, var: NDArray,
                          weight32: NDArray, **kwargs: Any) -> NDArray:
    out = kwargs.pop("out", None)
    result = lamb_update_phase1(weight32, grad, mean, var, **kwargs)
    return _finish(weight32, result._data, out)


def mp_lamb_update_phase2(weight: NDArray, g: NDArray, r1: NDArray, r2: NDArray,
                          weight32: NDArray, lr: float, **kwargs: Any) -> NDArray:
    out = kwargs.pop("out", None)
    lamb_update_phase2(weight32, g, r1, r2, lr, out=weight32, **kwargs)
    return _finish(weight, weight32._data, out)


# --------------------------------------------------------- many weights at once


def _groups(data: Sequence[NDArray], size: int, num_weights: int) -> list[Sequence[NDArray]]:
    return [data[i * size:(i + 1) * size] for i in range(num_weights)]


def _multi(kind: str, size: int, data: Sequence[NDArray], lrs: Sequence[float],
           wds: Sequence[float], out: Any, num_weights: int, **kw: Any) -> list[NDArray]:
    outs = list(out) if isinstance(out, (list, tuple)) else [None] * num_weights
    results = []
    for i, group in enumerate(_groups(data, size, num_weights)):
        w, g = group[0], group[1]
        lr, wd = float(lrs[i]), float(wds[i])
        if kind == "sgd":
            r = sgd_update(w, g, lr, wd, out=outs[i], **kw)
        elif kind == "sgd_mom":
            r = sgd_mom_update(w, g, group[2], lr, wd=wd, out=outs[i], **kw)
        elif kind == "mp_sgd":
            r = mp_sgd_update(w, g, group[2], lr, wd, out=outs[i], **kw)
        else:
            r = mp_sgd_mom_update(w, g, group[2], group[3], lr, wd=wd, out=outs[i], **kw)
        results.append(r)
    return results


def _preloaded(data: Sequence[NDArray]) -> tuple[list[NDArray], Any, Any]:
    return list(data[:-2]), data[-2].asnumpy().reshape(-1), data[-1].asnumpy().reshape(-1)


def multi_sgd_update(*data: NDArray, lrs: Sequence[float], wds: Sequence[float],
                     num_weights: int = 1, out: Any = None, **kw: Any) -> list[NDArray]:
    return _multi("sgd", 2, data, lrs, wds, out, num_weights, **kw)


def multi_sgd_mom_update(*data: NDArray, lrs: Sequence[float], wds: Sequence[float],
                         num_weights: int = 1, out: Any = None, **kw: Any) -> list[NDArray]:
    return _multi("sgd_mom", 3, data, lrs, wds, out, num_weights, **kw)


def multi_mp_sgd_update(*data: NDArray, lrs: Sequence[float], wds: Sequence[float],
                        num_weights: int = 1, out: Any = None, **kw: Any) -> list[NDArray]:
    return _multi("mp_sgd", 3, data, lrs, wds, out, num_weights, **kw)


def multi_mp_sgd_mom_update(*data: NDArray, lrs: Sequence[float], wds: Sequence[float],
                            num_weights: int = 1, out: Any = None,
                            **kw: Any) -> list[NDArray]:
    return _multi("mp_sgd_mom", 4, data, lrs, wds, out, num_weights, **kw)


def preloaded_multi_sgd_update(*data: NDArray, num_weights: int = 1, out: Any = None,
                               **kw: Any) -> list[NDArray]:
    arrays, lrs, wds = _preloaded(data)
    return _multi("sgd", 2, arrays, lrs, wds, out, num_weights, **kw)


def preloaded_multi_sgd_mom_update(*data: NDArray, num_weights: int = 1, out: Any = None,
                                   **kw: Any) -> list[NDArray]:
    arrays, lrs, wds = _preloaded(data)
    return _multi("sgd_mom", 3, arrays, lrs, wds, out, num_weights, **kw)


def preloaded_multi_mp_sgd_update(*data: NDArray, num_weights: int = 1, out: Any = None,
                                  **kw: Any) -> list[NDArray]:
    arrays, lrs, wds = _preloaded(data)
    return _multi("mp_sgd", 3, arrays, lrs, wds, out, num_weights, **kw)


def preloaded_multi_mp_sgd_mom_update(*data: NDArray, num_weights: int = 1, out: Any = None,
                                      **kw: Any) -> list[NDArray]:
    arrays, lrs, wds = _preloaded(data)
    return _multi("mp_sgd_mom", 4, arrays, lrs, wds, out, num_weights, **kw)


def multi_sum_sq(*arrays: NDArray, num_arrays: int | None = None, **_: Any) -> NDArray:
    """The sum of squares of each array, as one float32 vector."""
    xp = arrays[0].xp
    sums = [float((a._data.astype(numpy.float32) ** 2).sum()) for a in arrays]
    return NDArray(xp.asarray(sums, dtype=numpy.float32), arrays[0].context)


def multi_lars(lrs: NDArray, weights_sum_sq: NDArray, grads_sum_sq: NDArray, wds: NDArray,
               eta: float, eps: float, rescale_grad: float = 1.0, **_: Any) -> NDArray:
    """LARS learning rates: ``lr·η·‖w‖/(r·‖g‖ + wd·‖w‖ + eps)`` where both norms are > 0."""
    xp = lrs.xp
    w_norm, g_norm = xp.sqrt(weights_sum_sq._data), xp.sqrt(grads_sum_sq._data) * rescale_grad
    scaled = lrs._data * eta * w_norm / (g_norm + wds._data * w_norm + eps)
    out = xp.where((w_norm > 0) & (g_norm > 0), scaled, lrs._data).astype(lrs._data.dtype)
    return NDArray(out, lrs.context)


def all_finite(data: NDArray, init_output: bool = True, **_: Any) -> NDArray:
    """``[1.0]`` when every element is finite, else ``[0.0]``."""
    ok = bool(data.xp.isfinite(data._data).all())
    return NDArray(data.xp.asarray([float(ok)], dtype=numpy.float32), data.context)


def multi_all_finite(*arrays: NDArray, num_arrays: int = 1, init_output: bool = True,
                     **_: Any) -> NDArray:
    ok = all(bool(a.xp.isfinite(a._data).all()) for a in arrays)
    return NDArray(arrays[0].xp.asarray([float(ok)], dtype=numpy.float32), arrays[0].context)
