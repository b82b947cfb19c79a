"""Per-coordinate adaptive rates: RMSProp (plain, centered), AdaGrad, AdaDelta, Ftrl.

Notation: r = rescale_grad, C = clip to ±clip_gradient, lr/wd include multipliers.
"""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray, zeros
from .optimizer import Optimizer, _nonzero, register


def _zeros_like(weight: NDArray) -> NDArray:
    return zeros(weight.shape, weight.context, dtype=weight.dtype)


def _xp(raw: Any) -> Any:
    from ..backend import array_module

    return array_module(raw)


@register
class RMSProp(Optimizer):
    """RMSProp (1.x numerics: ε inside the square root).

    ``G = C(r·g + wd·w)``; ``n ← (1−γ1)·G² + γ1·n``; plain: ``w ← w − lr·G/√(n + ε)``.
    Centered (Graves 2013): ``ḡ ← (1−γ1)·G + γ1·ḡ``; ``Δ ← γ2·Δ − lr·G/√(n − ḡ² + ε)``;
    ``w ← w + Δ``. ``clip_weights`` clips the weights to ±clip_weights after the update.
    """

    _elementwise = True

    def __init__(self, learning_rate: float = 0.001, gamma1: float = 0.9, gamma2: float = 0.9,
                 epsilon: float = 1e-8, centered: bool = False,
                 clip_weights: float | None = None, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.centered = centered
        self.epsilon = epsilon
        self.clip_weights = clip_weights

    def create_state(self, index: int, weight: NDArray) -> Any:
        if self.centered:
            return (_zeros_like(weight), _zeros_like(weight), _zeros_like(weight))
        return (_zeros_like(weight),)

    def _rule(self, w, g, state, lr, wd, t, seg):
        xp = _xp(w)
        G = self._scaled(g, w, wd, seg)
        n = state[0]
        n *= self.gamma1
        n += (1.0 - self.gamma1) * (G * G)
        lr_e = seg.expand(lr, w)
        if not self.centered:
            denom = n + self.epsilon
            xp.sqrt(denom, out=denom)
            G /= denom
            G *= lr_e
            w -= G
        else:
            _, mean, delta = state
            mean *= self.gamma1
            mean += (1.0 - self.gamma1) * G
            denom = n - mean * mean
            denom += self.epsilon
            xp.sqrt(denom, out=denom)
            G /= denom
            G *= lr_e
            delta *= self.gamma2
            delta -= G
            w += delta
        if self.clip_weights:
            c = float(self.clip_weights)
            xp.clip(w, -c, c, out=w)


@register
class AdaGrad(Optimizer):
    """AdaGrad (1.x numerics).

    ``G = C(r·g)``; ``h ← h + G²``; ``w ← w − lr·(G/√(h + eps) + wd·w)``.
    """

    _elementwise = True

    def __init__(self, eps: float = 1e-7, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index: int, weight: NDArray) -> Any:
        return _zeros_like(weight)

    def _rule(self, w, g, history, lr, wd, t, seg):
        xp = _xp(w)
        G = self._scaled(g)
        history += G * G
        denom = history + self.float_stable_eps
        xp.sqrt(denom, out=denom)
        G /= denom
        if _nonzero(wd):
            G += seg.expand(wd, w) * w
        G *= seg.expand(lr, w)
        w -= G


@register
class AdaDelta(Optimizer):
    """AdaDelta (Zeiler 2012), 1.x numerics: no learning rate.

    ``G = C(r·g)``; ``acc_g ← ρ·acc_g + (1−ρ)·G²``;
    ``Δ = √(acc_Δ + ε)/√(acc_g + ε)·G``; ``acc_Δ ← ρ·acc_Δ + (1−ρ)·Δ²``;
    ``w ← w − Δ − wd·w``. As in MXNet 1.x the learning rate is not used. Difference from
    MXNet 1.x: the caller's gradient is not rescaled in place.
    """

    _elementwise = True

    def __init__(self, rho: float = 0.90, epsilon: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index: int, weight: NDArray) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, w, g, state, lr, wd, t, seg):
        xp = _xp(w)
        acc_g, acc_delta = state
        G = self._scaled(g)
        acc_g *= self.rho
        acc_g += (1.0 - self.rho) * (G * G)
        delta = xp.sqrt(acc_delta + self.epsilon)
        delta /= xp.sqrt(acc_g + self.epsilon)
        delta *= G
        acc_delta *= self.rho
        acc_delta += (1.0 - self.rho) * (delta * delta)
        if _nonzero(wd):
            w -= delta + seg.expand(wd, w) * w
        else:
            w -= delta


@register
class Ftrl(Optimizer):
    """FTRL-proximal (McMahan et al. 2013).

    ``G = C(r·g)``; ``z ← z + G − (√(n + G²) − √n)·w/lr``; ``n ← n + G²``;
    ``w ← (sign(z)·λ1 − z)/((β + √n)/lr + wd)`` where ``|z| > λ1``, else 0.
    """

    _elementwise = True

    def __init__(self, lamda1: float = 0.01, learning_rate: float = 0.1, beta: float = 1,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.lamda1 = lamda1
        self.beta = beta

    def create_state(self, index: int, weight: NDArray) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))  # z, n

    def _rule(self, w, g, state, lr, wd, t, seg):
        xp = _xp(w)
        z, n = state
        lr_e = seg.expand(lr, w)
        G = self._scaled(g)
        G2 = G * G
        sqrt_n = xp.sqrt(n)
        z += G - (xp.sqrt(n + G2) - sqrt_n) * w / lr_e
        n += G2
        denom = xp.sqrt(n)
        denom += self.beta
        denom /= lr_e
        if _nonzero(wd):
            denom += seg.expand(wd, w)
        out = xp.sign(z) * self.lamda1 - z
        out /= denom
        out *= xp.abs(z) > self.lamda1
        w[...] = out
