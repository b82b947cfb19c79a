"""The symbolic operators: inputs, parameters, shape rules and NDArray forward of each.

An :class:`OpSpec` says which inputs an operator takes (``data``, ``weight``, ...; the
missing ones become variables named ``<node>_<input>``), which of them are auxiliary
states (BatchNorm's moving statistics), how to parse its attributes (MXNet's JSON keeps
them as strings), how to infer shapes, and how to run it on NDArrays. The forward reuses
the engine's differentiable ops, so evaluating a graph under ``autograd.record()`` gives
gradients without a separate executor. The loss heads are in :mod:`.loss_ops`.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy

from ..base import MXNetValueError
from ..ndarray import NDArray, nn_ops

Shape = tuple[int, ...]
_REQUIRED = object()


# ------------------------------------------------------------------ attribute parsing
def _bool(text: Any) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise ValueError(f"expected a boolean, got {text!r}")


def _tuple(text: Any) -> tuple[int, ...]:
    if isinstance(text, (tuple, list)):
        return tuple(int(v) for v in text)
    if isinstance(text, int):
        return (text,)
    value = ast.literal_eval(str(text).strip() or "()")  # literals only, never code
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def _opt_float(text: Any) -> float | None:
    if text is None or str(text) == "None":
        return None
    return float(text)


# Parsers that also check the value against the attribute's domain (a user's graph file
# may say anything; MXNet refuses what its operator's parameter spec does not allow).
def _choice(*names: str) -> Callable[[Any], str]:
    def parse(text: Any) -> str:
        value = str(text)
        if value not in names:
            raise ValueError(f"expected one of {list(names)}, got {value[:60]!r}")
        return value
    return parse


def _int_at_least(low: int) -> Callable[[Any], int]:
    def parse(text: Any) -> int:
        value = int(text)
        if value < low:
            raise ValueError(f"expected an integer >= {low}, got {value}")
        return value
    return parse


def _ints_at_least(low: int) -> Callable[[Any], tuple[int, ...]]:
    def parse(text: Any) -> tuple[int, ...]:
        value = _tuple(text)
        if any(v < low for v in value):
            raise ValueError(f"expected integers >= {low}, got {value}")
        return value
    return parse


def _rate(text: Any) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError(f"expected a rate in [0, 1), got {value}")
    return value


_POSITIVE = _int_at_least(1)
_DTYPE = _choice("float16", "float32", "float64", "uint8", "int8", "int32", "int64")
_SIZES = _ints_at_least(1)  # kernel, stride, dilate
_PADS = _ints_at_least(0)
_CUDNN_TUNE = _choice("None", "off", "limited_workspace", "fastest")


# MXNet's type flags, the form ``__dtype__`` takes in its graphs
_TYPE_FLAGS = ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool",
               "int16", "uint16", "uint32", "uint64"]


def dtype_flag(dtype: Any) -> str:
    """MXNet's ``__dtype__`` text for a dtype (``float16`` -> ``'2'``)."""
    return str(_TYPE_FLAGS.index(numpy.dtype(dtype).name))


def dtype_of_flag(text: str) -> numpy.dtype:
    """The dtype of a ``__dtype__`` attribute (MXNet's flag, or a dtype name)."""
    return numpy.dtype(_TYPE_FLAGS[int(text)] if text.isdigit() else text)


def to_attr_string(value: Any) -> str:
    """MXNet's string form of an attribute value (``(3, 3)``, ``True``, ``0.5``)."""
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(str(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


# --------------------------------------------------------------------- the op table
@dataclass
class OpSpec:
    name: str
    inputs: tuple[str, ...]
    params: dict[str, tuple[Callable[[Any], Any], Any]]
    infer: Callable[[dict[str, Any], list[Shape | None]], tuple[list[Shape | None], Shape | None]]
    forward: Callable[..., NDArray]
    aux: tuple[str, ...] = ()
    hint: str = ""
    num_outputs: int = 1  # outputs in MXNet's graph (only the first is visible)
    variadic: bool = False
    aux_init: dict[str, str] = field(default_factory=dict)  # __init__ of created variables
    outputs: Callable[[dict[str, Any]], list[str]] | None = None  # visible output suffixes
    # How a compiled program records the node, where ``forward`` is one engine.nd operator
    # call: ``step(params, n_inputs)`` -> (operator name, function, keyword arguments) with
    # ``function(*inputs, **kwargs)`` computing what ``forward`` does, or None. The program
    # then fuses the node as it fuses a Gluon layer's call (FullyConnected + Activation,
    # BatchNorm + relu + max-pool, add + relu); without it the node replays as one opaque step.
    step: Callable[[dict[str, Any], int], tuple[str, Callable[..., Any], dict[str, Any]] | None] \
        | None = None

    def output_suffixes(self, params: dict[str, Any]) -> list[str]:
        return self.outputs(params) if self.outputs is not None else ["output"]

    def count_outputs(self, params: dict[str, Any]) -> int:
        return len(self.output_suffixes(params))

    def parse(self, attrs: dict[str, str]) -> dict[str, Any]:
        unknown = [k for k in attrs if k not in self.params and not k.startswith("__")]
        ignorable = {"workspace", "cudnn_tune", "cudnn_off", "layout", "num_args", "attr"}
        unknown = [k for k in unknown if k not in ignorable]
        if unknown:
            raise MXNetValueError(f"{self.name}: unknown argument(s) {unknown}; "
                                  f"expected {sorted(self.params)}")
        out: dict[str, Any] = {}
        for key, (parse, default) in self.params.items():
            if key in attrs:
                try:
                    out[key] = parse(attrs[key])
                except (ValueError, TypeError, SyntaxError) as exc:
                    raise ValueError(f"{self.name}: attribute {key!r}: {exc}") from None
            elif default is _REQUIRED:
                raise ValueError(f"{self.name}: required argument {key!r} is missing")
            else:
                out[key] = default
        layout = str(attrs.get("layout", "None"))
        if layout not in _LAYOUTS:
            raise ValueError(f"{self.name}: invalid layout {layout!r}; valid values are "
                             f"{sorted(_LAYOUTS)}")
        return out

    def input_names(self, params: dict[str, Any], count: int = 0) -> tuple[str, ...]:
        if self.variadic:
            return tuple(f"arg{i}" for i in range(count))
        names = self.inputs
        if params.get("no_bias") and "bias" in names:
            names = tuple(n for n in names if n != "bias")
        if "gamma" in names and params.get("act_type", "prelu") != "prelu" \
                and self.name == "LeakyReLU":
            names = tuple(n for n in names if n != "gamma")
        return names


OPS: dict[str, OpSpec] = {}
_LAYOUTS = {"None", "NC", "NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC"}


def channels_last(p: dict[str, Any]) -> bool:
    """Whether the operator's ``layout`` puts channels last (NWC, NHWC, NDHWC)."""
    return str(p.get("layout", "None")) in ("NWC", "NHWC", "NDHWC")


def to_channels_first(shape: Shape) -> Shape:
    return (shape[0], shape[-1]) + tuple(shape[1:-1])


def to_channels_last(shape: Shape) -> Shape:
    return (shape[0],) + tuple(shape[2:]) + (shape[1],)


def infer_channels_last(infer: Any, p: dict[str, Any], data: Shape) -> Any:
    """Run a channel-first ``infer`` for channels-last data, then move the channels of the
    data, the weight (O, I, *k -> O, *k, I) and the output back to the end."""
    filled, out = infer({**p, "layout": "None"}, [to_channels_first(data)])
    weight = filled[1]
    filled = [data, (weight[0],) + tuple(weight[2:]) + (weight[1],)] + filled[2:]
    return filled, to_channels_last(out)


def _layout_kwargs(p: dict[str, Any]) -> dict[str, Any]:
    return {} if str(p.get("layout", "None")) == "None" else {"layout": p["layout"]}


def _op(spec: OpSpec) -> OpSpec:
    OPS[spec.name] = spec
    return spec


def _same(params: dict[str, Any], shapes: list[Shape | None]):
    return shapes, shapes[0]


def _prod(shape: Shape) -> int:
    return int(math.prod(shape))


# ---- FullyConnected
def _fc_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    nh = p["num_hidden"]
    in_units = _prod(data[1:]) if p["flatten"] else data[-1]
    shapes = [data, (nh, in_units)] + ([(nh,)] if not p["no_bias"] else [])
    out = (data[0], nh) if p["flatten"] else tuple(data[:-1]) + (nh,)
    return shapes, out


_op(OpSpec(
    "FullyConnected", ("data", "weight", "bias"),
    {"num_hidden": (_POSITIVE, _REQUIRED), "no_bias": (_bool, False),
     "flatten": (_bool, True)},
    _fc_infer,
    lambda p, x: nn_ops.fully_connected(x[0], x[1], None if p["no_bias"] else x[2],
                                        num_hidden=p["num_hidden"], no_bias=p["no_bias"],
                                        flatten=p["flatten"]),
    step=lambda p, n: ("FullyConnected", nn_ops.fully_connected,
                       {"num_hidden": p["num_hidden"], "no_bias": p["no_bias"],
                        "flatten": p["flatten"]}) if n == (2 if p["no_bias"] else 3) else None,
))

_op(OpSpec("Activation", ("data",),
           {"act_type": (_choice(*nn_ops.ACTIVATION_TYPES), _REQUIRED)}, _same,
           lambda p, x: nn_ops.activation(x[0], p["act_type"]),
           step=lambda p, n: ("Activation", nn_ops.activation, {"act_type": p["act_type"]})))

def _leaky_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None or p["act_type"] != "prelu":
        return shapes, data
    if len(shapes) > 1 and shapes[1] is not None:  # a known gamma may be (1,): broadcast
        return shapes, data
    return [data, (data[1] if len(data) > 1 else 1,)], data


_op(OpSpec(
    "LeakyReLU", ("data", "gamma"),
    {"act_type": (_choice(*nn_ops.LEAKY_RELU_TYPES), "leaky"), "slope": (float, 0.25),
     "lower_bound": (float, 0.125),
     "upper_bound": (float, 0.334)},
    _leaky_infer,
    lambda p, x: nn_ops.leaky_relu(x[0], p["act_type"], p["slope"],
                                   x[1] if len(x) > 1 else None),
    aux_init={"gamma": '["Constant", {"value": 0.25}]'},
))

_op(OpSpec(
    "Dropout", ("data",),
    {"p": (_rate, 0.5), "mode": (_choice("training", "always"), "training"),
     "axes": (_tuple, ()),
     "cudnn_off": (_bool, False)},
    _same, lambda p, x: nn_ops.dropout(x[0], p["p"], p["axes"], p["mode"]), num_outputs=2,
))


# ---- Convolution and Pooling
def _spatial(p: dict[str, Any], key: str, n: int, default: int) -> tuple[int, ...]:
    value = p[key]
    return tuple(value) if value else (default,) * n


def _check_window(p: dict[str, Any], data: Shape, spatial: int) -> None:
    """A window of ``spatial`` sizes over (N, C, *spatial) data, with that many strides,
    dilations and pads."""
    if not 1 <= spatial <= 3 or len(data) != spatial + 2:
        raise ValueError(f"a {spatial}-D kernel needs (N, C, {spatial} spatial) data, got "
                         f"{tuple(data)}")
    for key in ("stride", "dilate", "pad"):
        if p.get(key) and len(p[key]) != spatial:
            raise ValueError(f"{key} {p[key]} must have {spatial} values, like the kernel")


def _conv_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    if channels_last(p):
        return infer_channels_last(_conv_infer, p, data)
    kernel = p["kernel"]
    nsp = len(kernel)
    _check_window(p, data, nsp)
    stride, dilate, pad = (_spatial(p, k, nsp, d) for k, d in
                           (("stride", 1), ("dilate", 1), ("pad", 0)))
    nf, groups = p["num_filter"], p["num_group"]
    if data[1] % groups or nf % groups:
        raise ValueError(f"num_group {groups} must divide the {data[1]} input channels and "
                         f"the {nf} filters")
    shapes = [data, (nf, data[1] // groups) + tuple(kernel)] + (
        [(nf,)] if not p["no_bias"] else [])
    out = tuple(
        (data[2 + i] + 2 * pad[i] - dilate[i] * (kernel[i] - 1) - 1) // stride[i] + 1
        for i in range(nsp)
    )
    return shapes, (data[0], nf) + out


def _conv_forward(p: dict[str, Any], x: list[NDArray]) -> NDArray:
    from ..ndarray.conv_ops import convolution

    nsp = len(p["kernel"])
    return convolution(x[0], x[1], None if p["no_bias"] else x[2], kernel=p["kernel"],
                       stride=_spatial(p, "stride", nsp, 1), dilate=_spatial(p, "dilate", nsp, 1),
                       pad=_spatial(p, "pad", nsp, 0), num_filter=p["num_filter"],
                       num_group=p["num_group"], no_bias=p["no_bias"], **_layout_kwargs(p))


_op(OpSpec(
    "Convolution", ("data", "weight", "bias"),
    {"kernel": (_SIZES, _REQUIRED), "stride": (_SIZES, ()), "dilate": (_SIZES, ()),
     "pad": (_PADS, ()), "num_filter": (_POSITIVE, _REQUIRED), "num_group": (_POSITIVE, 1),
     "no_bias": (_bool, False), "workspace": (int, 1024), "cudnn_tune": (_CUDNN_TUNE, "None"),
     "cudnn_off": (_bool, False), "layout": (str, "None")},
    _conv_infer, _conv_forward,
))


def _pool_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    if channels_last(p):
        _, out = _pool_infer({**p, "layout": "None"}, [to_channels_first(data)])
        return shapes, to_channels_last(out)  # type: ignore[arg-type]
    if p["global_pool"]:
        return shapes, tuple(data[:2]) + (1,) * (len(data) - 2)
    kernel = p["kernel"]
    nsp = len(kernel)
    _check_window(p, data, nsp)
    from ..ndarray.pool_ops import _pool_out  # the operator's own size rule

    stride, pad = _spatial(p, "stride", nsp, 1), _spatial(p, "pad", nsp, 0)
    out = tuple(_pool_out(data[2 + i], kernel[i], stride[i], pad[i], p["pooling_convention"])
                for i in range(nsp))
    return shapes, tuple(data[:2]) + out


def _pool_kwargs(p: dict[str, Any]) -> dict[str, Any]:
    nsp = len(p["kernel"]) or 2
    return {"kernel": p["kernel"] or (1, 1), "pool_type": p["pool_type"],
            "global_pool": p["global_pool"], "stride": _spatial(p, "stride", nsp, 1),
            "pad": _spatial(p, "pad", nsp, 0), "pooling_convention": p["pooling_convention"],
            "count_include_pad": p["count_include_pad"], **_layout_kwargs(p)}


def _pooling(*args: Any, **kwargs: Any) -> NDArray:
    from ..ndarray.pool_ops import pooling

    return pooling(*args, **kwargs)


def _pool_forward(p: dict[str, Any], x: list[NDArray]) -> NDArray:
    return _pooling(x[0], **_pool_kwargs(p))


_op(OpSpec(
    "Pooling", ("data",),
    {"kernel": (_SIZES, ()), "pool_type": (_choice("max", "avg", "sum"), "max"),
     "global_pool": (_bool, False), "stride": (_SIZES, ()), "pad": (_PADS, ()),
     "pooling_convention": (_choice("valid", "full", "same"), "valid"),
     "count_include_pad": (_bool, True), "cudnn_off": (_bool, False), "layout": (str, "None")},
    _pool_infer, _pool_forward,
    step=lambda p, n: ("Pooling", _pooling, _pool_kwargs(p)) if n == 1 else None,
))


# ---- BatchNorm
def _bn_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    if not -len(data) <= p["axis"] < len(data):
        raise ValueError(f"axis {p['axis']} is out of range for {len(data)} dimensions")
    channels = (data[p["axis"] % len(data)],)
    return [data, channels, channels, channels, channels], data


def _bn_kwargs(p: dict[str, Any]) -> dict[str, Any]:
    return {key: p[key] for key in ("eps", "momentum", "fix_gamma", "use_global_stats", "axis",
                                    "output_mean_var")}


def _batch_norm(*args: Any, **kwargs: Any) -> NDArray:
    from ..ndarray.norm_ops import batch_norm

    return batch_norm(*args, **kwargs)


def _bn_forward(p: dict[str, Any], x: list[NDArray]) -> NDArray:
    return _batch_norm(x[0], x[1], x[2], x[3], x[4], **_bn_kwargs(p))


_op(OpSpec(
    "BatchNorm", ("data", "gamma", "beta"),
    {"eps": (float, 1e-3), "momentum": (float, 0.9), "fix_gamma": (_bool, True),
     "use_global_stats": (_bool, False), "output_mean_var": (_bool, False), "axis": (int, 1),
     "cudnn_off": (_bool, False), "min_calib_range": (_opt_float, None),
     "max_calib_range": (_opt_float, None)},
    _bn_infer, _bn_forward, aux=("moving_mean", "moving_var"), num_outputs=3,
    outputs=lambda p: ["output", "mean", "var"] if p["output_mean_var"] else ["output"],
    aux_init={"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'},
    step=lambda p, n: ("BatchNorm", _batch_norm, _bn_kwargs(p)) if n == 5 else None,
))


# The loss heads and the other layers live in their own modules; importing them
# registers them in OPS.
from . import arith_ops, ctc_ops, layer_ops, loss_ops, reshape_ops, rnn_ops  # noqa: E402, F401

# MXNet's deprecated first versions take the same inputs and (a subset of) the parameters
for _legacy in ("BatchNorm", "Convolution", "Pooling"):
    _op(replace(OPS[_legacy], name=f"{_legacy}_v1", hint=f"{_legacy.lower()}_v1"))

# MXNet's other names of the elementwise operators (older or hand-written graphs use them);
# a node keeps the name its file gives it
for _target, _aliases in (("elemwise_add", ("_Plus", "_plus", "_add")),
                          ("elemwise_sub", ("_Minus", "_minus", "_sub")),
                          ("elemwise_mul", ("_Mul", "_mul")),
                          ("elemwise_div", ("_Div", "_div"))):
    for _alias in _aliases:
        _op(replace(OPS[_target], name=_alias))
