"""SGD and its relatives: SGD (momentum), NAG, Signum, SGLD, DCASGD, LARS.

SGD is the general rule; NAG, LARS and DCASGD are configurations of it (a different
gradient, a per-parameter lr, a look-ahead). Notation in the docstrings: r = rescale_grad,
C = clip to ±clip_gradient, lr/wd include the parameter's lr_mult/wd_mult.
"""

from __future__ import annotations

import math
from typing import Any

from ..ndarray import NDArray, zeros
from . import compiled
from .optimizer import Optimizer, _nonzero, register


def _zeros_like(weight: NDArray) -> NDArray:
    return zeros(weight.shape, weight.context, dtype=weight.dtype)


def _sgd_apply(w: Any, G: Any, mom: Any, lr: Any, wd: Any, momentum: float, seg: Any) -> None:
    """w ← (1−lr·wd)w − lr·G, or with momentum m ← μm − lr·wd·w − lr·G; w ← w + m."""
    lr_e = seg.expand(lr, w)
    decay = _nonzero(wd)
    if mom is None:
        if decay:
            w *= seg.expand(1.0 - lr * wd, w)
        w -= lr_e * G
        return
    mom *= momentum
    if decay:
        mom -= seg.expand(lr * wd, w) * w
    mom -= lr_e * G
    w += mom


@register
class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (MXNet 1.x kernel numerics).

    ``μ = 0``: ``w ← (1 − lr·wd)·w − lr·C(r·g)``; otherwise
    ``m ← μ·m − lr·wd·w − lr·C(r·g)``, ``w ← w + m``. ``lazy_update`` only matters for
    row-sparse gradients, which the engine does not have: dense updates are exact.

    >>> import engine as mx
    >>> opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9)
    >>> w, g = mx.nd.ones((2,)), mx.nd.ones((2,))
    >>> opt.update(0, w, g, opt.create_state(0, w)); round(float(w[0].asscalar()), 4)
    0.9
    """

    _elementwise = True
    _master_last = True  # MXNet 1.x: (momentum, weight32)

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update

    def create_state(self, index: int, weight: NDArray) -> Any:
        return None if self.momentum == 0.0 else _zeros_like(weight)

    def _rule(self, w, g, state, lr, wd, t, seg):
        if not self._compiled_rule(w, g, state, lr, wd, seg):
            _sgd_apply(w, self._scaled(g), state, lr, wd, self.momentum, seg)

    def _compiled_rule(self, w: Any, g: Any, mom: Any, lr: Any, wd: Any, seg: Any) -> bool:
        """The rule above as one compiled pass (:mod:`.compiled`, the same floats), when its
        coefficients are plain scalars and the arrays plain contiguous CPU buffers."""
        clip = self.clip_gradient
        arrays = (w, g) if mom is None else (w, g, mom)
        if not (type(lr) in (float, int) and all(type(h) in (float, int) for h in (
                self.momentum, self.rescale_grad, clip or 0.0)) and compiled.applies(*arrays)):
            return False
        wd = seg.expand(wd, w)
        if type(wd) not in (float, int):
            return False
        f = w.dtype.type
        flat = [a.reshape(-1) for a in arrays]  # views: the arrays are contiguous
        compiled.sgd(flat[0], flat[1], flat[-1], mom is not None, f(self.rescale_grad),
                     f(clip or 0.0), bool(clip and clip > 0), f(self.momentum), f(lr * wd),
                     f(1.0 - lr * wd), _nonzero(wd), f(lr))
        return True


@register
class NAG(Optimizer):
    """Nesterov accelerated gradient (MXNet 1.9's ``nag_mom_update`` numbers).

    ``G = C(r·g)``; ``m' = μ·m``; ``w_new = w + μ·m' − (1+μ)·lr·(G + wd·w)``;
    ``m ← m' − lr·(G + wd·w_new)``. The momentum's decay term uses the *updated* weight:
    MXNet's kernel writes the weight in place before it updates the momentum, and 1.9's
    numbers depend on that, so Rudder keeps it. With ``μ = 0`` it is SGD.
    """

    _elementwise = True
    _master_last = True  # MXNet 1.x: (momentum, weight32)

    def __init__(self, momentum: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state(self, index: int, weight: NDArray) -> Any:
        return None if self.momentum == 0.0 else _zeros_like(weight)

    def _rule(self, w, g, mom, lr, wd, t, seg):
        G = self._scaled(g)
        decay = _nonzero(wd)
        wd_e = seg.expand(wd, w) if decay else 0.0
        lr_e = seg.expand(lr, w)
        if mom is None:
            if decay:
                G += wd_e * w
            w -= lr_e * G
            return
        step = G + wd_e * w if decay else G.copy()
        step *= lr_e
        mom *= self.momentum
        w += self.momentum * mom - (1.0 + self.momentum) * step
        if decay:
            G += wd_e * w
        G *= lr_e
        mom -= G


@register
class Signum(Optimizer):
    """Sign of the momentum (signSGD with momentum).

    ``μ > 0``: ``m ← μ·m − (1−μ)(wd·w + C(r·g))``; ``w ← (1 − lr·wd_lh)·w + lr·sign(m)``.
    ``μ = 0``: ``w ← (1 − lr·wd)·w − lr·sign(g)`` (rescale and clipping do not change a sign,
    as in MXNet).
    """

    _elementwise = True

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9,
                 wd_lh: float = 0.0, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index: int, weight: NDArray) -> Any:
        return None if self.momentum == 0.0 else _zeros_like(weight)

    def _rule(self, w, g, mom, lr, wd, t, seg):
        xp = _xp(w)
        lr_e = seg.expand(lr, w)
        if mom is None:
            if _nonzero(wd):
                w *= seg.expand(1.0 - lr * wd, w)
            w -= lr_e * xp.sign(g)
            return
        step = self._scaled(g)
        if _nonzero(wd):
            step += seg.expand(wd, w) * w
        mom *= self.momentum
        mom -= (1.0 - self.momentum) * step
        if self.wd_lh:
            w *= seg.expand(1.0 - lr * self.wd_lh, w)
        w += lr_e * xp.sign(mom)


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics: ``w ← w − lr/2·(C(r·g) + wd·w) + N(0, √lr)``.

    The noise comes from ``engine.random`` (seeded by ``engine.random.seed``).
    """

    def _rule(self, w, g, state, lr, wd, t, seg):
        from .. import random as engine_random

        xp = _xp(w)
        G = self._scaled(g)
        if _nonzero(wd):
            G += seg.expand(wd, w) * w
        w -= seg.expand(lr / 2.0, w) * G
        # Drawn as nd.random.normal(0, √lr, dtype=w.dtype) draws it (float64, then cast),
        # so a seeded run adds exactly the noise MXNet's SGLD formula describes.
        noise = engine_random.generator(xp).standard_normal(w.shape)
        noise *= seg.expand(_sqrt(lr), noise)
        w += noise.astype(w.dtype, copy=False)


@register
class DCASGD(Optimizer):
    """Delay-compensated async SGD.

    ``m ← μ·m − lr·(G + wd·w + λ·G²·(w − w_prev))`` with ``G = C(r·g)``; ``w_prev ← w``;
    ``w ← w + m``. Unlike MXNet 1.x (whose ``if mom:`` on an NDArray raises), momentum > 0
    works.
    """

    _elementwise = True

    def __init__(self, momentum: float = 0.0, lamda: float = 0.04, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = momentum
        self.weight_previous: dict = {}
        self.lamda = lamda

    def create_state(self, index: int, weight: NDArray) -> Any:
        mom = None if self.momentum == 0.0 else _zeros_like(weight)
        return (mom, weight.copy())

    def _rule(self, w, g, state, lr, wd, t, seg):
        mom, previous = state
        G = self._scaled(g)
        step = G * G
        step *= self.lamda
        step *= w - previous
        step += G
        if _nonzero(wd):
            step += seg.expand(wd, w) * w
        step *= seg.expand(lr, w)
        previous[...] = w
        if mom is None:
            w -= step
            return
        mom *= self.momentum
        mom -= step
        w += mom


@register
class LARS(Optimizer):
    """Layer-wise adaptive rate scaling on top of SGD (momentum).

    Per parameter ``lr ← lr·η·‖w‖ / (‖r·g‖ + wd·‖w‖ + eps)`` when both norms are positive
    (parameters named ``*gamma``, ``*beta``, ``*bias`` keep lr), then the SGD rule. With
    ``momentum_correction`` the momentum is scaled by ``lr_t / lr_{t−1}`` of the schedule.
    """

    _master_last = True  # MXNet 1.x: (momentum, weight32)

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, eta: float = 0.001,
                 eps: float = 0, momentum_correction: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update
        self.eta = eta
        self.eps = eps
        self.momentum_correction = momentum_correction
        self.last_lr: float | None = None
        self.prev_step_lr: float | None = None  # the schedule's lr of the previous step
        self.last_lr_step = -1

    def create_state(self, index: int, weight: NDArray) -> Any:
        return None if self.momentum == 0.0 else _zeros_like(weight)

    def _rule(self, w, g, mom, lr, wd, t, seg):
        import numpy

        G = self._scaled(g)
        w_norm = numpy.sqrt(seg.sum(w * w))
        g_norm = numpy.sqrt(seg.sum(G * G))
        names = self._segment_names(seg)
        skip = numpy.asarray([n.endswith(("gamma", "beta", "bias")) for n in names])
        wd_v = numpy.asarray(wd, dtype=numpy.float64)
        with numpy.errstate(divide="ignore", invalid="ignore"):
            ratio = self.eta * w_norm / (g_norm + wd_v * w_norm + self.eps)
        ratio = numpy.where(skip | (w_norm <= 0) | (g_norm <= 0), 1.0, ratio)
        if numpy.ndim(w_norm) == 0:  # one parameter: a plain scalar keeps float32 math
            ratio = float(numpy.ravel(ratio)[0])
        momentum = self.momentum
        base = self._base_lr()
        if self.momentum_correction and mom is not None:
            # Correct once per step: the last lr is the schedule's value at the previous step.
            if self.last_lr_step != self.num_update:
                self.prev_step_lr, self.last_lr = self.last_lr, base
                self.last_lr_step = self.num_update
            if self.prev_step_lr:
                momentum = self.momentum * base / self.prev_step_lr
        _sgd_apply(w, G, mom, lr * ratio, wd, momentum, seg)

    def _segment_names(self, seg: Any) -> list[str]:
        return [self._param_name(i) for i in seg.indices]


def _xp(raw: Any) -> Any:
    from ..backend import array_module

    return array_module(raw)


def _sqrt(x: Any) -> Any:
    import numpy

    return math.sqrt(x) if isinstance(x, float) else numpy.sqrt(x)

