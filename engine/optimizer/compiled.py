"""One-pass compiled update rules for flat numpy buffers (numba).

An elementwise rule written as numpy ``out=`` calls streams the weights, gradients and
states through memory once per operation: Adam is ten passes over 4-5 arrays. On the MLP of
bench/engine_mlp.py (269k float32 parameters, 1 thread) that was 0.45-0.55 ms of a 2.3 ms
training step; the one pass here reads each element once and takes about 0.1 ms. SGD with
momentum is about eight passes over three arrays: on model-zoo resnet18_v1 (11.2M
parameters) it was a quarter of the step's CPU time. The Trainer's flat update splits a
large buffer into chunks over the engine's threads (engine.optimizer.parallel), each chunk
one call of these serial kernels.

Each kernel does the numpy rule's float operations in the numpy rule's order, in the
arrays' own dtype (the scalar coefficients are passed already rounded to it, as numpy
rounds a Python float against a float32 array), with no fused multiply-add: the results
are bit-identical to the numpy path (tests/engine/optimizer/test_compiled_rules.py).
``applies`` says when a kernel can take the arrays: numba present, contiguous CPU arrays of
float32 or float64; the calling rule also keeps numpy for per-parameter coefficients.

>>> import numpy as np
>>> w, g = np.ones(3, np.float32), np.full(3, 0.5, np.float32)
>>> m, v = np.zeros(3, np.float32), np.zeros(3, np.float32)
>>> one = np.float32(1.0)
>>> adam(w, g, m, v, one, np.float32(0.0), False, np.float32(0.0), False, np.float32(0.9),
...      np.float32(0.1), np.float32(0.999), np.float32(0.001), np.float32(1e-8),
...      np.float32(0.1))
>>> [round(float(x), 4) for x in (m[0], v[0])]
[0.05, 0.0003]
"""

from __future__ import annotations

import math
from typing import Any

import numpy

from ..ndarray.cpu_kernels import ENABLED, _jit, numba

_u = numba.uint64 if ENABLED else int


def applies(*arrays: Any) -> bool:
    """Whether the compiled rules can update ``arrays`` in place: all C-contiguous numpy
    arrays of one float dtype (float32 or float64)."""
    if not ENABLED:
        return False
    dtype = arrays[0].dtype
    return dtype in (numpy.float32, numpy.float64) and all(
        type(a) is numpy.ndarray and a.dtype == dtype and a.flags.c_contiguous for a in arrays)


@_jit
def sgd(w: Any, g: Any, mom: Any, use_mom: bool, rescale: Any, clip: Any, use_clip: bool,
        momentum: Any, lr_wd: Any, decay: Any, use_decay: bool, lr: Any) -> None:
    """SGD (1.x numerics), in place: ``G = C(r·g)``; with momentum
    ``m = μ·m - (lr·wd)·w - lr·G``, ``w += m``; without, ``w = w·(1 - lr·wd) - lr·G``
    (``decay`` is 1 - lr·wd, ``lr_wd`` is lr·wd, each already rounded to the dtype)."""
    for i in range(_u(w.size)):
        gi = g[i] * rescale
        if use_clip:  # numpy's clip: NaN stays NaN
            if gi < -clip:
                gi = -clip
            elif gi > clip:
                gi = clip
        if use_mom:
            m = mom[i] * momentum
            if use_decay:
                m = m - lr_wd * w[i]
            m = m - lr * gi
            mom[i] = m
            w[i] = w[i] + m
        else:
            wi = w[i]
            if use_decay:
                wi = wi * decay
            w[i] = wi - lr * gi


@_jit
def adam(w: Any, g: Any, m: Any, v: Any, rescale: Any, wd: Any, use_wd: bool, clip: Any,
         use_clip: bool, beta1: Any, coef1: Any, beta2: Any, coef2: Any, eps: Any,
         lr_t: Any) -> None:
    """Adam (1.x numerics), in place: ``G = C(r·g + wd·w)`` when ``use_wd or use_clip``,
    else ``G = g`` with the rescale folded into ``coef1``/``coef2`` by the caller;
    ``m = β1·m + coef1·G``, ``v = β2·v + coef2·G²``, ``w -= lr_t·m/(√v + ε)``."""
    scaled = use_wd or use_clip
    for i in range(_u(w.size)):
        gi = g[i]
        if scaled:
            gi = gi * rescale
            if use_wd:
                gi = gi + w[i] * wd
            if use_clip:  # numpy's clip: NaN stays NaN
                if gi < -clip:
                    gi = -clip
                elif gi > clip:
                    gi = clip
        mi = m[i] * beta1 + gi * coef1
        vi = v[i] * beta2 + (gi * gi) * coef2
        m[i] = mi
        v[i] = vi
        w[i] = w[i] - (mi / (math.sqrt(vi) + eps)) * lr_t
