"""Each optimizer's update written out in plain numpy (float64), one step at a time.

``REFERENCES[name] = (init_state, step)``: ``init_state(w)`` gives the state dict,
``step(o, w, g, s, lr, wd, t)`` returns the new weight (and mutates ``s``), where ``o`` is the
hyperparameter dict the engine optimizer was built with (defaults filled in), ``lr``/``wd``
already include the multipliers and ``t`` is the 1-based update count.
"""

from __future__ import annotations

import numpy as np


def clip(o, x):
    c = o.get("clip_gradient")
    return np.clip(x, -c, c) if c else x


def grad_1x(o, g, w, wd):
    """MXNet 1.x: C(r·g + wd·w)."""
    return clip(o, o["rescale_grad"] * g + wd * w)


def grad_plain(o, g):
    return clip(o, o["rescale_grad"] * g)


def zeros(*names):
    return lambda w: {n: np.zeros_like(w) for n in names}


def sgd(o, w, g, s, lr, wd, t):
    G = grad_plain(o, g)
    if o["momentum"] == 0:
        return (1 - lr * wd) * w - lr * G
    s["m"] = o["momentum"] * s["m"] - lr * wd * w - lr * G
    return w + s["m"]


def nag(o, w, g, s, lr, wd, t):
    """MXNet 1.9's kernel: the momentum's wd term sees the already-updated weight."""
    G = grad_plain(o, g)
    mu = o["momentum"]
    if mu == 0:
        return w - lr * (G + wd * w)
    s["m"] = mu * s["m"]
    new = w + mu * s["m"] - (1 + mu) * lr * (G + wd * w)
    s["m"] = s["m"] - lr * (G + wd * new)
    return new


def signum(o, w, g, s, lr, wd, t):
    mu = o["momentum"]
    if mu == 0:
        return (1 - lr * wd) * w - lr * np.sign(g)
    s["m"] = mu * s["m"] - (1 - mu) * (wd * w + grad_plain(o, g))
    return (1 - lr * o["wd_lh"]) * w + lr * np.sign(s["m"])


def dcasgd(o, w, g, s, lr, wd, t):
    G = grad_plain(o, g)
    step = lr * (G + wd * w + o["lamda"] * G * G * (w - s["prev"]))
    s["prev"] = w.copy()
    if o["momentum"] == 0:
        return w - step
    s["m"] = o["momentum"] * s["m"] - step
    return w + s["m"]


def lars(o, w, g, s, lr, wd, t):
    G = grad_plain(o, g)
    wn, gn = np.linalg.norm(w), np.linalg.norm(G)
    if wn > 0 and gn > 0:
        lr = lr * o["eta"] * wn / (gn + wd * wn + o["eps"])
    return sgd(o, w, g, s, lr, wd, t)


def test_opt(o, w, g, s, lr, wd, t):
    new = w + o["rescale_grad"] * g
    s["copy"] = new.copy()
    return new


def adam(o, w, g, s, lr, wd, t):
    b1, b2 = o["beta1"], o["beta2"]
    G = grad_1x(o, g, w, wd)
    s["m"] = b1 * s["m"] + (1 - b1) * G
    s["v"] = b2 * s["v"] + (1 - b2) * G * G
    lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return w - lr_t * s["m"] / (np.sqrt(s["v"]) + o["epsilon"])


def adamw(o, w, g, s, lr, wd, t):
    b1, b2 = o["beta1"], o["beta2"]
    G = grad_plain(o, g)
    s["m"] = b1 * s["m"] + (1 - b1) * G
    s["v"] = b2 * s["v"] + (1 - b2) * G * G
    lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return w - lr_t * (s["m"] / (np.sqrt(s["v"]) + o["epsilon"]) + wd * w)


def adamax(o, w, g, s, lr, wd, t):
    b1, b2 = o["beta1"], o["beta2"]
    G = grad_1x(o, g, w, wd)
    s["m"] = b1 * s["m"] + (1 - b1) * G
    s["u"] = np.maximum(b2 * s["u"], np.abs(G))
    return w - lr / (1 - b1 ** t) * s["m"] / (s["u"] + o["epsilon"])


def nadam(o, w, g, s, lr, wd, t):
    b1, b2, sd = o["beta1"], o["beta2"], o["schedule_decay"]

    def mu(k):
        return b1 * (1 - 0.5 * 0.96 ** (k * sd))

    sched = np.prod([mu(k) for k in range(1, t + 1)])
    G = grad_1x(o, g, w, wd)
    s["m"] = b1 * s["m"] + (1 - b1) * G
    s["v"] = b2 * s["v"] + (1 - b2) * G * G
    m_bar = (1 - mu(t)) * G / (1 - sched) + mu(t + 1) * s["m"] / (1 - sched * mu(t + 1))
    return w - lr * m_bar / (np.sqrt(s["v"] / (1 - b2 ** t)) + o["epsilon"])


def lamb(o, w, g, s, lr, wd, t):
    b1, b2 = o["beta1"], o["beta2"]
    G = grad_plain(o, g)
    s["m"] = b1 * s["m"] + (1 - b1) * G
    s["v"] = b2 * s["v"] + (1 - b2) * G * G
    m_hat, v_hat = s["m"] / (1 - b1 ** t), s["v"] / (1 - b2 ** t)
    u = m_hat / (np.sqrt(v_hat) + o["epsilon"]) + wd * w
    r1, r2 = np.linalg.norm(w), np.linalg.norm(u)
    if o["lower_bound"] is not None:
        r1 = max(r1, o["lower_bound"])
    if o["upper_bound"] is not None:
        r1 = min(r1, o["upper_bound"])
    ratio = r1 / r2 if r1 != 0 and r2 != 0 else 1.0
    return w - lr * ratio * u


def ftml(o, w, g, s, lr, wd, t):
    b1, b2 = o["beta1"], o["beta2"]
    G = grad_1x(o, g, w, wd)
    s["v"] = b2 * s["v"] + (1 - b2) * G * G
    d_t = (1 - b1 ** t) / lr * (np.sqrt(s["v"] / (1 - b2 ** t)) + o["epsilon"])
    s["z"] = b1 * s["z"] + (1 - b1) * G - (d_t - b1 * s["d"]) * w
    s["d"] = d_t
    return -s["z"] / d_t


def rmsprop(o, w, g, s, lr, wd, t):
    g1, g2, eps = o["gamma1"], o["gamma2"], o["epsilon"]
    G = grad_1x(o, g, w, wd)
    s["n"] = (1 - g1) * G * G + g1 * s["n"]
    if not o["centered"]:
        w = w - lr * G / np.sqrt(s["n"] + eps)
    else:
        s["gbar"] = (1 - g1) * G + g1 * s["gbar"]
        s["delta"] = g2 * s["delta"] - lr * G / np.sqrt(s["n"] - s["gbar"] ** 2 + eps)
        w = w + s["delta"]
    cw = o["clip_weights"]
    return np.clip(w, -cw, cw) if cw else w


def adagrad(o, w, g, s, lr, wd, t):
    G = grad_plain(o, g)
    s["h"] = s["h"] + G * G
    return w - lr * (G / np.sqrt(s["h"] + o["float_stable_eps"]) + wd * w)


def adadelta(o, w, g, s, lr, wd, t):
    rho, eps = o["rho"], o["epsilon"]
    G = grad_plain(o, g)
    s["acc_g"] = rho * s["acc_g"] + (1 - rho) * G * G
    delta = np.sqrt(s["acc_d"] + eps) / np.sqrt(s["acc_g"] + eps) * G
    s["acc_d"] = rho * s["acc_d"] + (1 - rho) * delta * delta
    return w - delta - wd * w


def ftrl(o, w, g, s, lr, wd, t):
    G = grad_plain(o, g)
    s["z"] = s["z"] + G - (np.sqrt(s["n"] + G * G) - np.sqrt(s["n"])) * w / lr
    s["n"] = s["n"] + G * G
    out = (np.sign(s["z"]) * o["lamda1"] - s["z"]) / ((o["beta"] + np.sqrt(s["n"])) / lr + wd)
    return out * (np.abs(s["z"]) > o["lamda1"])


def lbsgd(o, w, g, s, lr, wd, t):
    """batch_scale accumulated grads, then SGD with lr × linear warmup multiplier."""
    s["cum"] = s["cum"] + g
    s["num"] = s.get("num", 0) + 1
    if s["num"] % o["batch_scale"]:
        return w
    nwup = o["warmup_epochs"] * o["updates_per_epoch"]
    mult = 1.0 + (o["batch_scale"] - 1) * s["num"] / nwup
    new = sgd(o, w, s["cum"] / o["batch_scale"], s, lr * mult, wd, t)
    s["cum"] = np.zeros_like(w)
    return new


REFERENCES = {
    "sgd": (zeros("m"), sgd),
    "nag": (zeros("m"), nag),
    "signum": (zeros("m"), signum),
    "dcasgd": (lambda w: {"m": np.zeros_like(w), "prev": w.copy()}, dcasgd),
    "lars": (zeros("m"), lars),
    "test": (zeros("copy"), test_opt),
    "adam": (zeros("m", "v"), adam),
    "adamw": (zeros("m", "v"), adamw),
    "adamax": (zeros("m", "u"), adamax),
    "nadam": (zeros("m", "v"), nadam),
    "lamb": (zeros("m", "v"), lamb),
    "ftml": (zeros("d", "v", "z"), ftml),
    "rmsprop": (zeros("n", "gbar", "delta"), rmsprop),
    "adagrad": (zeros("h"), adagrad),
    "adadelta": (zeros("acc_g", "acc_d"), adadelta),
    "ftrl": (zeros("z", "n"), ftrl),
    "lbsgd": (zeros("m", "cum"), lbsgd),
}
