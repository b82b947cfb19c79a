"""Adam and its relatives: Adam, AdamW, Adamax, Nadam, LAMB, FTML.

They share the moment updates ``m ← β1·m + (1−β1)·G``, ``v ← β2·v + (1−β2)·G²``
(:func:`_moments`); the rest is how the step is scaled. Notation: r = rescale_grad,
C = clip to ±clip_gradient, t = the parameter's update count, lr/wd include multipliers.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy

from ..backend import array_module
from ..ndarray import NDArray, zeros
from . import compiled
from .optimizer import Optimizer, _nonzero, register


def _zeros_like(weight: NDArray) -> NDArray:
    return zeros(weight.shape, weight.context, dtype=weight.dtype)


def _xp(raw: Any) -> Any:
    return numpy if type(raw) is numpy.ndarray else array_module(raw)


def _moments(G: Any, m: Any, v: Any, beta1: float, beta2: float) -> None:
    m *= beta1
    m += (1.0 - beta1) * G
    v *= beta2
    v += (1.0 - beta2) * (G * G)


def _f(x: Any) -> Any:
    """numpy scalars → Python float (so float32 math stays float32); vectors unchanged."""
    return float(x) if numpy.ndim(x) == 0 else x


@register
class Adam(Optimizer):
    """Adam (1.x kernel numerics).

    ``G = C(r·g + wd·w)``; moments; ``lr_t = lr·√(1−β2^t)/(1−β1^t)``;
    ``w ← w − lr_t·m/(√v + ε)``. ``lazy_update`` only matters for sparse gradients.

    >>> import engine as mx
    >>> opt = mx.optimizer.Adam(learning_rate=0.1)
    >>> w, g = mx.nd.ones((1,)), mx.nd.ones((1,))
    >>> opt.update(0, w, g, opt.create_state(0, w)); round(float(w.asscalar()), 4)
    0.9
    """

    _elementwise = True

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, lazy_update: bool = True, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lazy_update = lazy_update

    def create_state(self, index: int, weight: NDArray) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, w, g, state, lr, wd, t, seg):
        m, v = state
        if self._compiled_rule(w, g, m, v, lr, wd, t, seg):
            return
        # Written with out= into two scratch arrays: a step allocates no big temporaries.
        xp = _xp(w)
        G, tmp = self._scratch(w, 2)
        r = float(self.rescale_grad)
        if _nonzero(wd) or (self.clip_gradient and self.clip_gradient > 0):
            self._scaled_into(G, g, w, wd, seg, tmp)
            r = 1.0
        else:
            G = g  # G = r·g is folded into the moment coefficients: one pass less
        m *= self.beta1
        xp.multiply(G, (1.0 - self.beta1) * r, out=tmp)
        m += tmp
        v *= self.beta2
        xp.multiply(G, G, out=tmp)
        tmp *= (1.0 - self.beta2) * r * r
        v += tmp
        if isinstance(lr, float) and isinstance(t, float):  # math.sqrt: the same double
            lr_t = lr * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        else:
            lr_t = _f(lr * numpy.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t))
        xp.sqrt(v, out=tmp)
        tmp += self.epsilon
        xp.divide(m, tmp, out=tmp)
        tmp *= seg.expand(lr_t, w)
        w -= tmp

    def _compiled_rule(self, w, g, m, v, lr, wd, t, seg) -> bool:
        """The rule above as one compiled pass (:mod:`.compiled`, the same floats), when
        its coefficients are plain scalars and the arrays plain contiguous CPU buffers."""
        clip = self.clip_gradient
        hyper = (self.beta1, self.beta2, self.epsilon, self.rescale_grad, clip or 0.0)
        # lr and the step count arrive as Python numbers (one parameter, or all alike)
        if not (type(lr) in (float, int) and type(t) in (float, int)
                and all(type(h) in (float, int) for h in hyper)
                and compiled.applies(w, g, m, v)):
            return False
        wd = seg.expand(wd, w)
        if not isinstance(wd, float):
            return False
        use_wd, use_clip = _nonzero(wd), bool(clip and clip > 0)
        r = 1.0 if use_wd or use_clip else float(self.rescale_grad)
        lr_t = lr * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        f = w.dtype.type
        flat = [a.reshape(-1) for a in (w, g, m, v)]  # views: the arrays are contiguous
        compiled.adam(*flat, f(self.rescale_grad), f(wd), use_wd, f(clip or 0.0),
                      use_clip, f(self.beta1), f((1.0 - self.beta1) * r), f(self.beta2),
                      f((1.0 - self.beta2) * r * r), f(self.epsilon), f(lr_t))
        return True


@register
class AdamW(Optimizer):
    """Adam with decoupled weight decay (MXNet 2.x ``adamW`` semantics; 1.x had only an op).

    ``G = C(r·g)`` (no wd); moments; ``lr_t = lr·√(1−β2^t)/(1−β1^t)`` when
    ``correct_bias``; ``w ← w − lr_t·(m/(√v + ε) + wd·w)`` (the decay is scaled by the
    bias-corrected lr, as in MXNet).
    """

    _elementwise = True

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, correct_bias: bool = True, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.correct_bias = correct_bias

    def create_state(self, index: int, weight: NDArray) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, w, g, state, lr, wd, t, seg):
        m, v = state
        G = self._scaled(g)
        _moments(G, m, v, self.beta1, self.beta2)
        lr_t = lr
        if self.correct_bias:
            lr_t = _f(lr * numpy.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t))
        denom = _xp(w).sqrt(v)
        denom += self.epsilon
        step = m / denom
        if _nonzero(wd):
            step += seg.expand(wd, w) * w
        step *= seg.expand(lr_t, w)
        w -= step


@register
class Adamax(Optimizer):
    """Adamax: the infinity-norm variant of Adam.

    ``G = C(r·g + wd·w)``; ``m ← β1·m + (1−β1)·G``; ``u ← max(β2·u, |G|)``;
    ``w ← w − lr/(1−β1^t)·m/(u + ε)``. Difference from MXNet 1.x: ``ε`` (default 1e-8, as
    in 2.x) guards the division, so a parameter whose gradient is always 0 stays finite
    instead of becoming NaN.
    """

    _elementwise = True

    def __init__(self, learning_rate: float = 0.002, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index: int, weight: NDArray) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, w, g, state, lr, wd, t, seg):
        xp = _xp(w)
        m, u = state
        G = self._scaled(g, w, wd, seg)
        m *= self.beta1
        m += (1.0 - self.beta1) * G
        u *= self.beta2
        xp.maximum(u, xp.abs(G), out=u)
        denom = u + self.epsilon
        step = m / denom
        step *= seg.expand(_f(lr / (1.0 - self.beta1 ** t)), w)
        w -= step


_NADAM_PRODUCTS: dict[tuple[float, float], list[float]] = {}
_NADAM_LOCK = threading.Lock()


def _nadam_schedule(beta1: float, decay: float, t: int) -> float:
    """∏_{k≤t} μ_k with μ_k = β1·(1 − ½·0.96^{k·decay}): the momentum schedule at step t."""
    with _NADAM_LOCK:  # parallel chunks of one step may ask at the same time
        products = _NADAM_PRODUCTS.setdefault((beta1, decay), [1.0])
        while len(products) <= t:
            k = len(products)
            products.append(products[-1] * beta1 * (1.0 - 0.5 * 0.96 ** (k * decay)))
        return products[t]


@register
class Nadam(Optimizer):
    """Adam with Nesterov momentum (Dozat 2016).

    ``μ_t = β1(1 − ½·0.96^{t·sd})``, ``S_t = ∏_{k≤t} μ_k``; ``G = C(r·g + wd·w)``; moments;
    ``m̄ = (1−μ_t)·G/(1−S_t) + μ_{t+1}·m/(1−S_t·μ_{t+1})``;
    ``w ← w − lr·m̄/(√(v/(1−β2^t)) + ε)``. Difference from MXNet 1.x: the schedule product
    S_t is a function of the step t, so it advances once per step, not once per parameter
    (MXNet multiplied one global ``m_schedule`` on every parameter's update).
    """

    _elementwise = True

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, schedule_decay: float = 0.004, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.schedule_decay = schedule_decay

    def create_state(self, index: int, weight: NDArray) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def _mu(self, t: Any) -> Any:
        return self.beta1 * (1.0 - 0.5 * 0.96 ** (numpy.asarray(t) * self.schedule_decay))

    def _rule(self, w, g, state, lr, wd, t, seg):
        m, v = state
        G = self._scaled(g, w, wd, seg)
        _moments(G, m, v, self.beta1, self.beta2)
        steps = numpy.atleast_1d(numpy.asarray(t, dtype=numpy.int64))
        sched = numpy.asarray([_nadam_schedule(self.beta1, self.schedule_decay, int(k))
                               for k in steps]).reshape(numpy.shape(t))
        mu_t, mu_next = self._mu(t), self._mu(numpy.asarray(t) + 1)
        sched_next = sched * mu_next
        v_hat = v * seg.expand(_f(1.0 / (1.0 - self.beta2 ** numpy.asarray(t))), w)
        denom = _xp(w).sqrt(v_hat)
        denom += self.epsilon
        m_bar = G * seg.expand(_f((1.0 - mu_t) / (1.0 - sched)), w)
        m_bar += seg.expand(_f(mu_next / (1.0 - sched_next)), w) * m
        m_bar /= denom
        m_bar *= seg.expand(lr, w)
        w -= m_bar


@register
class LAMB(Optimizer):
    """Layer-wise adaptive moments (LAMB).

    ``G = C(r·g)``; moments; ``m̂, v̂`` bias-corrected when ``bias_correction``;
    ``u = m̂/(√v̂ + ε) + wd·w``; ``r1 = clamp(‖w‖, lower_bound, upper_bound)``, ``r2 = ‖u‖``;
    ``w ← w − lr·(r1/r2 if both ≠ 0 else 1)·u``. Norms are per parameter.
    """

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, lower_bound: float | None = None,
                 upper_bound: float | None = None, bias_correction: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.bias_correction = bias_correction

    def create_state(self, index: int, weight: NDArray) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, w, g, state, lr, wd, t, seg):
        xp = _xp(w)
        m, v = state
        G = self._scaled(g)
        _moments(G, m, v, self.beta1, self.beta2)
        if self.bias_correction:
            t_arr = numpy.asarray(t)
            m_hat = m * seg.expand(_f(1.0 / (1.0 - self.beta1 ** t_arr)), w)
            v_hat = v * seg.expand(_f(1.0 / (1.0 - self.beta2 ** t_arr)), w)
        else:
            m_hat, v_hat = m, v
        denom = xp.sqrt(v_hat)
        denom += self.epsilon
        u = m_hat / denom
        if _nonzero(wd):
            u += seg.expand(wd, w) * w
        r1 = numpy.sqrt(seg.sum(w * w))
        if self.lower_bound is not None and self.lower_bound >= 0:
            r1 = numpy.maximum(r1, self.lower_bound)
        if self.upper_bound is not None and self.upper_bound >= 0:
            r1 = numpy.minimum(r1, self.upper_bound)
        r2 = numpy.sqrt(seg.sum(u * u))
        with numpy.errstate(divide="ignore", invalid="ignore"):
            trust = numpy.where((r1 == 0) | (r2 == 0), 1.0, r1 / r2)
        u *= seg.expand(_f(lr * trust), w)
        w -= u


@register
class FTML(Optimizer):
    """Follow the moving leader.

    ``G = C(r·g + wd·w)``; ``v ← β2·v + (1−β2)·G²``;
    ``d_t = (1−β1^t)/lr·(√(v/(1−β2^t)) + ε)``; ``z ← β1·z + (1−β1)·G − (d_t − β1·d)·w``;
    ``d ← d_t``; ``w ← −z/d_t``. State order (d, v, z) as in MXNet.
    """

    _elementwise = True

    def __init__(self, beta1: float = 0.6, beta2: float = 0.999, epsilon: float = 1e-8,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index: int, weight: NDArray) -> Any:
        return (_zeros_like(weight), _zeros_like(weight), _zeros_like(weight))

    def _rule(self, w, g, state, lr, wd, t, seg):
        xp = _xp(w)
        d, v, z = state
        G = self._scaled(g, w, wd, seg)
        t_arr = numpy.asarray(t)
        v *= self.beta2
        v += (1.0 - self.beta2) * (G * G)
        d_t = v * seg.expand(_f(1.0 / (1.0 - self.beta2 ** t_arr)), w)
        xp.sqrt(d_t, out=d_t)
        d_t += self.epsilon
        d_t *= seg.expand(_f((1.0 - self.beta1 ** t_arr) / numpy.asarray(lr)), w)
        z *= self.beta1
        z += (1.0 - self.beta1) * G
        z -= (d_t - self.beta1 * d) * w
        d[...] = d_t
        xp.divide(z, d_t, out=w)
        xp.negative(w, out=w)
