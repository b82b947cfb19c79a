"""Pooling layers: ``MaxPool``, ``AvgPool``, ``GlobalMaxPool``, ``GlobalAvgPool`` in 1-D, 2-D
and 3-D, channels-first (default) or channels-last, with MXNet's constructor arguments.

``strides`` defaults to ``pool_size``; ``ceil_mode=True`` rounds the output size up (MXNet's
``pooling_convention='full'``); ``count_include_pad`` (AvgPool) counts padding in the mean.

>>> import engine as mx
>>> mx.gluon.nn.MaxPool3D()(mx.nd.ones((1, 2, 4, 4, 4))).shape
(1, 2, 2, 2, 2)
>>> mx.gluon.nn.GlobalAvgPool2D(layout="NHWC")(mx.nd.ones((1, 5, 5, 3))).shape
(1, 1, 1, 3)
"""

from __future__ import annotations

from typing import Any

from ..block import HybridBlock
from ..hybrid.hybrid_block import graph_name
from .conv_layers import DEFAULT_LAYOUTS, check_layout, spatial
from .registry import register


class _Pooling(HybridBlock):
    _ndim = 2

    def __init__(self, pool_size: Any, strides: Any, padding: Any, ceil_mode: bool,
                 global_pool: bool, pool_type: str, layout: str,
                 count_include_pad: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        n = self._ndim
        check_layout(layout, n)
        if strides is None:
            strides = pool_size
        self._layout = layout
        self._kwargs: dict[str, Any] = {
            "kernel": spatial(pool_size, n, "pool_size"), "stride": spatial(strides, n, "strides"),
            "pad": spatial(padding, n, "padding"), "global_pool": global_pool,
            "pool_type": pool_type, "pooling_convention": "full" if ceil_mode else "valid",
            "layout": layout}
        if count_include_pad is not None:
            self._kwargs["count_include_pad"] = count_include_pad

    def _alias(self) -> str:
        return "pool"

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.Pooling(x, **self._kwargs, **graph_name(F))

    def __repr__(self) -> str:
        k = self._kwargs
        return (f"{type(self).__name__}(size={k['kernel']}, stride={k['stride']}, "
                f"padding={k['pad']}, ceil_mode={k['pooling_convention'] == 'full'}, "
                f"global_pool={k['global_pool']}, pool_type={k['pool_type']}, "
                f"layout={self._layout})")


def _pool_class(name: str, ndim: int, pool_type: str, global_pool: bool) -> type[_Pooling]:
    """A public pooling layer with MXNet's signature for ``ndim`` spatial dims."""
    size: Any = 2 if ndim == 1 else (2,) * ndim
    layout0 = DEFAULT_LAYOUTS[ndim]
    kind = "Max" if pool_type == "max" else "Average"
    if global_pool:
        doc = f"{kind} over each channel's whole {ndim}-D extent (output size 1 per dim)."

        def __init__(self, layout: str = layout0, **kwargs: Any) -> None:
            _Pooling.__init__(self, 1, None, 0, True, True, pool_type, layout, **kwargs)
    elif pool_type == "max":
        doc = f"{kind} pooling over {ndim}-D windows; ``strides`` defaults to ``pool_size``."

        def __init__(self, pool_size: Any = size, strides: Any = None,  # type: ignore[misc]
                     padding: Any = 0, layout: str = layout0, ceil_mode: bool = False,
                     **kwargs: Any) -> None:
            _Pooling.__init__(self, pool_size, strides, padding, ceil_mode, False, "max",
                              layout, **kwargs)
    elif ndim == 1:
        doc = "Average pooling over 1-D windows; padding counts unless count_include_pad=False."

        def __init__(self, pool_size: Any = size, strides: Any = None,  # type: ignore[misc]
                     padding: Any = 0, layout: str = layout0, ceil_mode: bool = False,
                     count_include_pad: bool = True, **kwargs: Any) -> None:
            _Pooling.__init__(self, pool_size, strides, padding, ceil_mode, False, "avg",
                              layout, count_include_pad, **kwargs)
    else:  # MXNet's 2-D and 3-D AvgPool put ceil_mode before layout
        doc = (f"Average pooling over {ndim}-D windows; padding counts unless "
               f"count_include_pad=False.")

        def __init__(self, pool_size: Any = size, strides: Any = None,  # type: ignore[misc]
                     padding: Any = 0, ceil_mode: bool = False, layout: str = layout0,
                     count_include_pad: bool = True, **kwargs: Any) -> None:
            _Pooling.__init__(self, pool_size, strides, padding, ceil_mode, False, "avg",
                              layout, count_include_pad, **kwargs)

    cls = type(name, (_Pooling,), {"__init__": __init__, "__doc__": doc, "_ndim": ndim,
                                   "__module__": __name__, "__qualname__": name})
    return register(cls)


MaxPool1D = _pool_class("MaxPool1D", 1, "max", False)
MaxPool2D = _pool_class("MaxPool2D", 2, "max", False)
MaxPool3D = _pool_class("MaxPool3D", 3, "max", False)
AvgPool1D = _pool_class("AvgPool1D", 1, "avg", False)
AvgPool2D = _pool_class("AvgPool2D", 2, "avg", False)
AvgPool3D = _pool_class("AvgPool3D", 3, "avg", False)
GlobalMaxPool1D = _pool_class("GlobalMaxPool1D", 1, "max", True)
GlobalMaxPool2D = _pool_class("GlobalMaxPool2D", 2, "max", True)
GlobalMaxPool3D = _pool_class("GlobalMaxPool3D", 3, "max", True)
GlobalAvgPool1D = _pool_class("GlobalAvgPool1D", 1, "avg", True)
GlobalAvgPool2D = _pool_class("GlobalAvgPool2D", 2, "avg", True)
GlobalAvgPool3D = _pool_class("GlobalAvgPool3D", 3, "avg", True)
