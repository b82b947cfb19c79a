"""The symbolic loss heads: ``SoftmaxOutput``, the regression outputs and ``SVMOutput``.

Each computes through its :mod:`engine.ndarray.output_ops` function (one recorded op whose
backward is MXNet's fused gradient and ignores the head gradient, so a graph ending in one
is differentiated with ``backward()`` and no ``out_grads``); this module declares the nodes:
parameters, and the label shapes they infer.
"""

from __future__ import annotations

from typing import Any

from ..ndarray import output_ops
from .ops import OpSpec, Shape, _bool, _choice, _op, _prod


def _softmax_label_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    if p["multi_output"]:
        # MXNet's default is (N, spatial size); (N, *spatial) and (N, 1, *spatial) also do
        spatial = tuple(data[2:])
        accepted = [(data[0], _prod(spatial)), (data[0],) + spatial, (data[0], 1) + spatial]
        label = tuple(shapes[1]) if shapes[1] is not None and tuple(shapes[1]) in accepted \
            else accepted[0]
    else:
        label = tuple(data[:-1])
    if shapes[1] is not None and _prod(shapes[1]) == _prod(data):
        label = shapes[1]  # probability labels of the data's size
    return [data, label], data


_SOFTMAX_PARAMS = {
    "grad_scale": (float, 1.0), "ignore_label": (float, -1.0), "multi_output": (_bool, False),
    "use_ignore": (_bool, False), "preserve_shape": (_bool, False),
    "normalization": (_choice("null", "batch", "valid"), "null"), "out_grad": (_bool, False),
    "smooth_alpha": (float, 0.0),
}
_op(OpSpec("SoftmaxOutput", ("data", "label"), _SOFTMAX_PARAMS, _softmax_label_infer,
           lambda p, x: output_ops.softmax_output(x[0], x[1], **p)))


def _regression_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    if data is None:
        return shapes, None
    label = shapes[1] if shapes[1] is not None and _prod(shapes[1]) == _prod(data) else data
    return [data, label], data


_REGRESSIONS = {"linear": output_ops.linear_regression_output,
                "logistic": output_ops.logistic_regression_output,
                "mae": output_ops.mae_regression_output}


for _name, _kind in (("LinearRegressionOutput", "linear"),
                     ("LogisticRegressionOutput", "logistic"),
                     ("MAERegressionOutput", "mae")):
    _op(OpSpec(_name, ("data", "label"), {"grad_scale": (float, 1.0)}, _regression_infer,
               lambda p, x, _k=_kind: _REGRESSIONS[_k](x[0], x[1], p["grad_scale"])))


def _svm_infer(p: dict[str, Any], shapes: list[Shape | None]):
    data = shapes[0]
    return ([data, (data[0],)], data) if data is not None else (shapes, None)


_op(OpSpec("SVMOutput", ("data", "label"),
           {"margin": (float, 1.0), "regularization_coefficient": (float, 1.0),
            "use_linear": (_bool, False)},
           _svm_infer, lambda p, x: output_ops.svm_output(x[0], x[1], **p)))
