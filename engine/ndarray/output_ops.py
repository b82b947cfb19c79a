"""MXNet's loss-output operators and other legacy layer ops: ``SoftmaxOutput``, the
``*RegressionOutput`` family, ``MakeLoss``, ``SoftmaxActivation``, ``L2Normalization``,
``LRN`` and nearest ``UpSampling``.

An output operator's forward is a plain transform; its backward ignores the incoming
gradient and returns the loss gradient directly (scaled by ``grad_scale``), which is how
MXNet trains symbols that end in one of them.

>>> from engine import nd, autograd
>>> x = nd.array([[1.0, 2.0]]); x.attach_grad()
>>> with autograd.record():
...     y = nd.SoftmaxOutput(x, nd.array([1]))
>>> y.backward(); x.grad.asnumpy().astype(float).round(3).tolist()
[[0.269, -0.269]]
"""

from __future__ import annotations

from typing import Any

import numpy

from .ndarray import NDArray, apply_op, as_raw
from .nn_ops import _softmax_raw
from .ops import _sigmoid, reduce_sum, unary
from .shape_ops import concat, getitem, repeat, reshape


def softmax_output(data: NDArray, label: NDArray, grad_scale: float = 1.0,
                   ignore_label: float = -1.0, multi_output: bool = False,
                   use_ignore: bool = False, preserve_shape: bool = False,
                   normalization: str = "null", out_grad: bool = False,
                   smooth_alpha: float = 0.0, **_: Any) -> NDArray:
    """Softmax forward; backward ``(softmax − onehot(label))·grad_scale`` (normalized by
    nothing, the batch or the valid count), whatever the head gradient.

    As MXNet: the softmax runs over axis 1 with ``multi_output`` (labels (N, ...)), over the
    last axis with ``preserve_shape``, else over all but the batch axis of the data flattened
    to (N, -1). A label of the data's size is a probability target.
    """
    if normalization not in ("null", "batch", "valid"):
        raise ValueError(f"normalization must be 'null', 'batch' or 'valid', got "
                         f"{normalization!r}")
    x = data._data
    xp = data.xp
    if multi_output:
        axis, work = 1, x
    elif preserve_shape:
        axis, work = x.ndim - 1, x
    else:
        axis, work = 1, x.reshape(x.shape[0], -1)
    prob = _softmax_raw(work, axis, None)
    lab_raw = as_raw(label, data)
    classes = work.shape[axis]

    def backward(_g: Any) -> tuple[Any, None]:
        grad = prob.copy()
        if lab_raw.size == prob.size:  # a probability target of the data's shape
            target = lab_raw.reshape(work.shape)
            return ((grad - target) * grad_scale).astype(x.dtype).reshape(x.shape), None
        rows = work.shape[:axis] + work.shape[axis + 1:]
        if lab_raw.size != int(numpy.prod(rows)):
            # MXNet 1.9.1 infers a (N, d1) label for (N, d1, d2) data yet its kernel reads only
            # the first N labels; not copied: say which flag fits instead
            raise ValueError(f"SoftmaxOutput: {lab_raw.size} labels for {x.shape} data, which "
                             f"flattens to {work.shape}; use preserve_shape=True (softmax over "
                             "the last axis) or multi_output=True (over axis 1)")
        lab = lab_raw.astype(numpy.int64).reshape(rows)
        valid = (lab != int(ignore_label)) if use_ignore else None
        safe = xp.where(valid, lab, 0) if valid is not None else xp.clip(lab, 0, classes - 1)
        hit = 1.0
        if smooth_alpha:  # target: 1 - a on the label, a / (K - 1) elsewhere
            off = smooth_alpha / (classes - 1)
            grad -= off
            hit = 1.0 - smooth_alpha - off
        shape = [1] * grad.ndim
        shape[axis] = classes
        onehot = xp.expand_dims(safe, axis) == xp.arange(classes).reshape(shape)
        grad -= hit * onehot
        scale = grad_scale
        if valid is not None:
            grad *= xp.expand_dims(valid, axis)
        if normalization == "batch":
            scale = scale / x.shape[0]
        elif normalization == "valid":
            count = int(valid.sum()) if valid is not None else lab.size
            scale = scale / max(count, 1)
        return (grad * scale).astype(x.dtype).reshape(x.shape), None

    return apply_op(prob.astype(x.dtype).reshape(x.shape), (data, label), backward)


def _regression(transform: str):
    def op(data: NDArray, label: NDArray, grad_scale: float = 1.0, **_: Any) -> NDArray:
        x = data._data
        out = _sigmoid(x) if transform == "logistic" else x.copy()
        batch = x.shape[0] if x.ndim else 1
        per_sample = max(int(numpy.prod(as_raw(label).shape)) // max(batch, 1), 1)

        def backward(g: Any) -> tuple[Any, None]:
            diff = out - as_raw(label, data).reshape(out.shape)
            if transform == "mae":
                diff = data.xp.sign(diff)
            return (diff * (grad_scale / per_sample)).astype(x.dtype), None

        return apply_op(out, (data, label), backward)

    return op


linear_regression_output = _regression("linear")
logistic_regression_output = _regression("logistic")
mae_regression_output = _regression("mae")


def make_loss(data: NDArray, grad_scale: float = 1.0, valid_thresh: float = 0.0,
              normalization: str = "null", **_: Any) -> NDArray:
    """Identity forward; backward ``grad_scale`` everywhere (the data is the loss)."""
    x = data._data
    xp = data.xp

    def backward(g: Any) -> tuple[Any]:
        scale = grad_scale
        if normalization == "batch":
            scale /= x.shape[0]
        elif normalization == "valid":
            scale /= max(float((x > valid_thresh).sum()), 1.0)
        return (xp.full(x.shape, scale, dtype=x.dtype),)

    return apply_op(x.copy(), (data,), backward)


def make_loss_simple(data: NDArray, **_: Any) -> NDArray:
    """Lower-case ``make_loss``: identity forward, gradient one everywhere (it takes no
    scaling or normalisation, unlike ``MakeLoss``)."""
    x = data._data
    return apply_op(x.copy(), (data,), lambda g: (data.xp.ones_like(x),))


def softmax_activation(data: NDArray, mode: str = "instance", **_: Any) -> NDArray:
    """Softmax over each instance (all axes but the first) or over channels (axis 1)."""
    from .nn_ops import softmax

    if mode == "channel":
        return softmax(data, axis=1)
    flat = reshape(data, (data.shape[0], -1))
    return reshape(softmax(flat, axis=-1), data.shape)


def l2_normalization(data: NDArray, eps: float = 1e-10, mode: str = "instance",
                     **_: Any) -> NDArray:
    """``x / √(Σx² + eps)`` per instance, per channel position, or per spatial map."""
    if mode == "instance":
        axes: Any = tuple(range(1, data.ndim))
    elif mode == "channel":
        axes = 1
    elif mode == "spatial":
        axes = tuple(range(2, data.ndim))
    else:
        raise ValueError(f"L2Normalization mode must be instance, channel or spatial: {mode!r}")
    norm = unary("sqrt", reduce_sum(unary("square", data), axis=axes, keepdims=True) + eps)
    return data / norm


def lrn(data: NDArray, alpha: float = 1e-4, beta: float = 0.75, knorm: float = 2.0,
        nsize: int = 5, **_: Any) -> NDArray:
    """Local response normalisation across ``nsize`` neighbouring channels (NCHW)."""
    sq = unary("square", data)
    half = nsize // 2
    c = data.shape[1]
    zeros = NDArray(data.xp.zeros((data.shape[0], half) + data.shape[2:], data._data.dtype),
                    data.context)
    padded = concat(zeros, sq, zeros, dim=1) if half else sq
    window = None
    for k in range(nsize):
        part = getitem(padded, (slice(None), slice(k, k + c)))
        window = part if window is None else window + part
    return data / ((window * (alpha / nsize) + knorm) ** beta)


def upsampling(*data: NDArray, scale: int = 1, sample_type: str = "nearest",
               num_args: int = 1, **_: Any) -> NDArray:
    """Nearest-neighbour upsampling of NCHW maps by an integer ``scale``."""
    if sample_type != "nearest":
        raise NotImplementedError("UpSampling supports sample_type='nearest' only")
    outs = [repeat(repeat(x, scale, axis=2), scale, axis=3) for x in data]
    return outs[0] if len(outs) == 1 else concat(*outs, dim=1)


def svm_output(data: NDArray, label: NDArray, margin: float = 1.0,
               regularization_coefficient: float = 1.0, use_linear: bool = False,
               **_: Any) -> NDArray:
    """Identity forward; backward the one-vs-rest hinge (L1) or squared hinge (L2) gradient.

    With y the label's class and c the coefficient: at y, ``−c·[m > x]`` (L1) or
    ``−2c·(m − x)⁺`` (L2); elsewhere ``c·[m > −x]`` or ``2c·(m + x)⁺``.
    """
    x = data._data
    xp = data.xp
    flat = x.reshape(x.shape[0], -1)
    lab = as_raw(label).reshape(-1).astype(numpy.int64)

    def backward(g: Any) -> tuple[Any, None]:
        is_label = xp.zeros(flat.shape, dtype=bool)
        is_label[xp.arange(flat.shape[0]), lab] = True
        c = regularization_coefficient
        if use_linear:
            at_label = -c * (margin > flat)
            others = c * (margin > -flat)
        else:
            at_label = -2 * c * xp.maximum(margin - flat, 0)
            others = 2 * c * xp.maximum(margin + flat, 0)
        grad = xp.where(is_label, at_label, others).astype(x.dtype)
        return grad.reshape(x.shape), None

    return apply_op(x.copy(), (data, label), backward)


def identity_attach_kl_sparse_reg(data: NDArray, moving_avg: NDArray,
                                  sparseness_target: float = 0.1, penalty: float = 0.001,
                                  momentum: float = 0.9, **_: Any) -> NDArray:
    """Identity forward; the backward adds a KL sparsity penalty pulling each unit's mean
    activation toward ``sparseness_target``. ``moving_avg`` (one value per unit of the
    flattened input) is updated in place during backward, as MXNet's auxiliary state."""
    x = data._data
    flat = x.reshape(x.shape[0], -1)

    def backward(g: Any) -> tuple[Any, None]:
        avg = moving_avg._data
        avg[...] = momentum * avg + (1 - momentum) * flat.mean(axis=0)
        extra = penalty * (-sparseness_target / avg + (1 - sparseness_target) / (1 - avg))
        return (g.reshape(flat.shape) + extra).reshape(x.shape).astype(x.dtype), None

    return apply_op(x.copy(), (data, moving_avg), backward)
