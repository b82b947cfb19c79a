"""Symbolic layers with learned inputs whose shapes follow from the data: ``Embedding``,
``LayerNorm``, ``InstanceNorm``, ``GroupNorm`` and ``Deconvolution``.

Each spec infers its weights' shapes from the data's, so ``Module.bind`` can allocate them,
and computes through the engine.ndarray operator of the same name.
"""

from __future__ import annotations

from typing import Any

from ..ndarray import NDArray, deconv_ops, group_norm_ops
from .ops import (
    _CUDNN_TUNE,
    _DTYPE,
    _PADS,
    _POSITIVE,
    _REQUIRED,
    _SIZES,
    OpSpec,
    Shape,
    _bool,
    _check_window,
    _layout_kwargs,
    _op,
    _spatial,
    channels_last,
    infer_channels_last,
)


def _embedding_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    weight = (p["input_dim"], p["output_dim"])
    return [data, weight], None if data is None else tuple(data) + (p["output_dim"],)


def _embedding_forward(p: dict[str, Any], x: list[NDArray]) -> NDArray:
    from ..ndarray.norm_ops import embedding

    return embedding(x[0], x[1], input_dim=p["input_dim"], output_dim=p["output_dim"])


_op(OpSpec(
    "Embedding", ("data", "weight"),
    {"input_dim": (_POSITIVE, _REQUIRED), "output_dim": (_POSITIVE, _REQUIRED),
     "dtype": (_DTYPE, "float32"),
     "sparse_grad": (_bool, False)},
    _embedding_infer, _embedding_forward,
))


def _channel_infer(axis_key: str | None, default_axis: int):
    def infer(p: dict[str, Any], shapes: list[Shape | None]):
        data = shapes[0]
        if data is None:
            return shapes, None
        axis = p[axis_key] if axis_key else default_axis
        channels = (data[axis % len(data)],)
        return [data, channels, channels], data

    return infer


def _layer_norm_forward(p: dict[str, Any], x: list[NDArray]) -> Any:
    from ..ndarray.norm_ops import layer_norm

    return layer_norm(x[0], x[1], x[2], axis=p["axis"], eps=p["eps"],
                      output_mean_var=p["output_mean_var"])


_op(OpSpec(
    "LayerNorm", ("data", "gamma", "beta"),
    {"axis": (int, -1), "eps": (float, 1e-5), "output_mean_var": (_bool, False)},
    _channel_infer("axis", -1), _layer_norm_forward, num_outputs=3,
    outputs=lambda p: ["output", "mean", "std"] if p["output_mean_var"] else ["output"],
))


def _instance_norm_forward(p: dict[str, Any], x: list[NDArray]) -> NDArray:
    return group_norm_ops.instance_norm(x[0], x[1], x[2], eps=p["eps"])


_op(OpSpec(
    "InstanceNorm", ("data", "gamma", "beta"), {"eps": (float, 1e-3)},
    _channel_infer(None, 1), _instance_norm_forward,
))


def _group_norm_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    groups = (p["num_groups"],)  # MXNet 1.9: one gamma/beta per group, not per channel
    return [data, groups, groups], data


def _group_norm_forward(p: dict[str, Any], x: list[NDArray]) -> NDArray:
    return group_norm_ops.group_norm(x[0], x[1], x[2], num_groups=p["num_groups"],
                                     eps=p["eps"])


_op(OpSpec(
    "GroupNorm", ("data", "gamma", "beta"),
    {"num_groups": (_POSITIVE, 1), "eps": (float, 1e-5), "output_mean_var": (_bool, False)},
    _group_norm_infer, _group_norm_forward, num_outputs=3,
))


def _deconv_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    if channels_last(p):
        return infer_channels_last(_deconv_infer, p, data)
    kernel = p["kernel"]
    nsp = len(kernel)
    _check_window(p, data, nsp)
    stride, dilate, pad, adj = (_spatial(p, k, nsp, d) for k, d in
                                (("stride", 1), ("dilate", 1), ("pad", 0), ("adj", 0)))
    nf, groups = p["num_filter"], p["num_group"]
    if data[1] % groups or nf % groups:
        raise ValueError(f"num_group {groups} must divide the {data[1]} input channels and "
                         f"the {nf} filters")
    weight = (data[1], nf // groups) + tuple(kernel)
    shapes = [data, weight] + ([(nf,)] if not p["no_bias"] else [])
    if p["target_shape"]:
        return shapes, (data[0], nf) + tuple(p["target_shape"])
    out = tuple((data[2 + i] - 1) * stride[i] - 2 * pad[i] + dilate[i] * (kernel[i] - 1)
                + adj[i] + 1 for i in range(nsp))
    return shapes, (data[0], nf) + out


def _deconv_forward(p: dict[str, Any], x: list[NDArray]) -> NDArray:
    nsp = len(p["kernel"])
    return deconv_ops.deconvolution(
        x[0], x[1], None if p["no_bias"] else x[2], kernel=p["kernel"],
        stride=_spatial(p, "stride", nsp, 1), dilate=_spatial(p, "dilate", nsp, 1),
        pad=_spatial(p, "pad", nsp, 0), adj=_spatial(p, "adj", nsp, 0),
        target_shape=p["target_shape"] or None, num_filter=p["num_filter"],
        num_group=p["num_group"], no_bias=p["no_bias"], **_layout_kwargs(p))


_op(OpSpec(
    "Deconvolution", ("data", "weight", "bias"),
    {"kernel": (_SIZES, _REQUIRED), "stride": (_SIZES, ()), "dilate": (_SIZES, ()),
     "pad": (_PADS, ()), "adj": (_PADS, ()), "target_shape": (_SIZES, ()),
     "num_filter": (_POSITIVE, _REQUIRED), "num_group": (_POSITIVE, 1), "workspace": (int, 512),
     "no_bias": (_bool, True), "cudnn_tune": (_CUDNN_TUNE, "None"), "cudnn_off": (_bool, False),
     "layout": (str, "None")},
    _deconv_infer, _deconv_forward,
))
