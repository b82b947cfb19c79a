"""Convolution layers: ``Conv1D/2D/3D`` and ``Conv1DTranspose/2DTranspose/3DTranspose``,
channels-first (NCW/NCHW/NCDHW, the default) or channels-last (NWC/NHWC/NDHWC) as MXNet's.

Weights have MXNet's shapes: a convolution's is (channels, in_channels/groups, *kernel)
channels-first and (channels, *kernel, in_channels/groups) channels-last; a transposed
convolution's is (in_channels, channels/groups, *kernel), resp. (in_channels, *kernel,
channels/groups). ``in_channels=0`` is inferred at the first forward.

>>> import engine as mx
>>> net = mx.gluon.nn.HybridSequential()
>>> net.add(mx.gluon.nn.Conv2D(4, 3, padding=1, activation="relu"), mx.gluon.nn.MaxPool2D())
>>> net.initialize(); net(mx.nd.ones((2, 1, 8, 8))).shape
(2, 4, 4, 4)
>>> up = mx.gluon.nn.Conv2DTranspose(2, 3, strides=2, output_padding=1, in_channels=4)
>>> up.initialize(); up(mx.nd.ones((1, 4, 5, 5))).shape
(1, 2, 12, 12)
"""

from __future__ import annotations

from typing import Any

from ..block import HybridBlock
from ..hybrid.hybrid_block import graph_name
from .activations import Activation
from .registry import register

DEFAULT_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def spatial(value: Any, ndim: int, name: str) -> tuple[int, ...]:
    """A layer's size argument (an int, or one value per spatial dim) as a tuple."""
    if isinstance(value, int):
        return (value,) * ndim
    value = tuple(int(v) for v in value)
    if len(value) != ndim:
        raise ValueError(f"{name} must be an int or {ndim} values, got {value}")
    return value


def check_layout(layout: str, ndim: int) -> None:
    if layout not in LAYOUTS[ndim]:
        raise ValueError(f"layout {layout!r} is not supported for {ndim}-D data; use one of "
                         f"{LAYOUTS[ndim]}")


class _Conv(HybridBlock):
    """Shared body of the convolution layers (``op_name`` picks the operator)."""

    _ndim = 2
    _op_name = "Convolution"

    def __init__(self, channels: int, kernel_size: Any, strides: Any, padding: Any,
                 dilation: Any, groups: int, layout: str, in_channels: int = 0,
                 activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 adj: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        n = self._ndim
        check_layout(layout, n)
        if groups < 1 or channels % groups or (in_channels and in_channels % groups):
            raise ValueError(f"channels={channels} and in_channels={in_channels} must be "
                             f"divisible by groups={groups}")
        self._channels, self._in_channels, self._layout = channels, in_channels, layout
        self._kwargs: dict[str, Any] = {
            "kernel": spatial(kernel_size, n, "kernel_size"),
            "stride": spatial(strides, n, "strides"), "dilate": spatial(dilation, n, "dilation"),
            "pad": spatial(padding, n, "padding"), "num_filter": channels, "num_group": groups,
            "no_bias": not use_bias, "layout": layout}
        if adj is not None:
            self._kwargs["adj"] = spatial(adj, n, "output_padding")
        with self.name_scope():
            self.weight = self.params.get("weight", shape=self._weight_shape(in_channels),
                                          init=weight_initializer, allow_deferred_init=True)
            self.bias = (self.params.get("bias", shape=(channels,), init=bias_initializer,
                                         allow_deferred_init=True) if use_bias else None)
            self.act = Activation(activation, prefix=activation + "_") if activation else None

    def _weight_shape(self, in_channels: int) -> tuple[int, ...]:
        groups, kernel = self._kwargs["num_group"], self._kwargs["kernel"]
        if self._op_name == "Convolution":
            lead, per_group = self._channels, in_channels // groups
        else:
            lead, per_group = in_channels, self._channels // groups
        if self._layout.endswith("C"):
            return (lead, *kernel, per_group)
        return (lead, per_group, *kernel)

    def _alias(self) -> str:
        return "conv"

    def infer_shape(self, x: Any, *args: Any) -> None:
        if x.ndim != self._ndim + 2:
            raise ValueError(f"{self.name}: {type(self).__name__} expects {self._layout} "
                             f"input, got shape {x.shape}")
        in_channels = x.shape[self._layout.find("C")]
        if in_channels % self._kwargs["num_group"]:
            raise ValueError(f"{self.name}: input has {in_channels} channels, not divisible "
                             f"by groups={self._kwargs['num_group']}")
        self.weight.shape = self._weight_shape(in_channels)

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:  # noqa: N803
        op = getattr(F, self._op_name)
        try:
            out = op(x, weight, bias, **self._kwargs, **graph_name(F))
        except ValueError as err:
            raise ValueError(f"{self.name} ({type(self).__name__}): {err}") from err
        return self.act(out) if self.act is not None else out

    def __repr__(self) -> str:
        # MXNet prints weight.shape[1] -> weight.shape[0] for every layout and op (for a
        # transposed or grouped convolution that is not in -> out) and never output_padding;
        # kept so that printed networks are identical
        shape = self.weight.shape
        k = self._kwargs
        n = len(k["kernel"])
        text = (f"{type(self).__name__}({shape[1] or None} -> {shape[0]}, "
                f"kernel_size={k['kernel']}, stride={k['stride']}")
        if k["pad"] != (0,) * n:
            text += f", padding={k['pad']}"
        if k["dilate"] != (1,) * n:
            text += f", dilation={k['dilate']}"
        if k["num_group"] != 1:
            text += f", groups={k['num_group']}"
        if self.bias is None:
            text += ", bias=False"
        if self.act is not None:
            text += f", {self.act}"
        return text + ")"


class _ConvTranspose(_Conv):
    _op_name = "Deconvolution"


def _conv_class(name: str, ndim: int, base: type[_Conv], doc: str) -> type[_Conv]:
    """A public layer class with MXNet's constructor signature for ``ndim`` spatial dims."""
    unit: Any = 1 if ndim == 1 else (1,) * ndim
    zero: Any = 0 if ndim == 1 else (0,) * ndim
    layout0 = DEFAULT_LAYOUTS[ndim]

    if base is _ConvTranspose:
        def __init__(self, channels: int, kernel_size: Any, strides: Any = unit,
                     padding: Any = zero, output_padding: Any = zero, dilation: Any = unit,
                     groups: int = 1, layout: str = layout0, activation: str | None = None,
                     use_bias: bool = True, weight_initializer: Any = None,
                     bias_initializer: Any = "zeros", in_channels: int = 0,
                     **kwargs: Any) -> None:
            base.__init__(self, channels, kernel_size, strides, padding, dilation, groups,
                          layout, in_channels, activation, use_bias, weight_initializer,
                          bias_initializer, adj=output_padding, **kwargs)
    else:
        def __init__(self, channels: int, kernel_size: Any, strides: Any = unit,  # type: ignore[misc]
                     padding: Any = zero, dilation: Any = unit, groups: int = 1,
                     layout: str = layout0, activation: str | None = None,
                     use_bias: bool = True, weight_initializer: Any = None,
                     bias_initializer: Any = "zeros", in_channels: int = 0,
                     **kwargs: Any) -> None:
            base.__init__(self, channels, kernel_size, strides, padding, dilation, groups,
                          layout, in_channels, activation, use_bias, weight_initializer,
                          bias_initializer, **kwargs)

    cls = type(name, (base,), {"__init__": __init__, "__doc__": doc, "_ndim": ndim,
                               "__module__": __name__, "__qualname__": name})
    return register(cls)


Conv1D = _conv_class("Conv1D", 1, _Conv, "1-D convolution over NCW (or NWC) input.")
Conv2D = _conv_class("Conv2D", 2, _Conv, "2-D convolution over NCHW (or NHWC) input.")
Conv3D = _conv_class("Conv3D", 3, _Conv, "3-D convolution over NCDHW (or NDHWC) input.")
Conv1DTranspose = _conv_class(
    "Conv1DTranspose", 1, _ConvTranspose,
    "1-D transposed convolution; output length ``(w-1)·stride + dilation·(k-1) + 1 - "
    "2·padding + output_padding``.")
Conv2DTranspose = _conv_class(
    "Conv2DTranspose", 2, _ConvTranspose,
    "2-D transposed convolution (a learned upsampling); see Conv1DTranspose for its size.")
Conv3DTranspose = _conv_class(
    "Conv3DTranspose", 3, _ConvTranspose,
    "3-D transposed convolution; see Conv1DTranspose for its size.")
