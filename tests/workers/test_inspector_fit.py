"""The submit-time model check (workers/inspector/fit.py) infers the shapes the worker's
network gets: for every layer type of a spec, and for zoo networks, the inferred output
shape and parameter count are those of the network built and run as the worker runs it;
what cannot build is refused naming the layer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import engine as mx
from core.inspection import Bounds, CheckModel, UploadedGraph
from core.jobspec import JobSpec, Layer
from core.model_forms import UploadedModelRef, ZooModel
from workers.build import build_network
from workers.inspector.fit import check_model
from workers.networks import zoo_network

BOUNDS = Bounds(max_node_elements=1 << 28, max_total_elements=1 << 32, seconds=30)
IMAGES = (4, 3, 10, 10)
ROWS = (4, 12)
# every layer type of core.jobspec.Layer, in a small network over images or rows
LAYER_CASES: list[tuple[list[dict[str, Any]], tuple[int, ...]]] = [
    ([{"type": "Dense", "units": 5, "activation": "relu"}], ROWS),
    ([{"type": "Dense", "units": 5, "flatten": False, "use_bias": False}], IMAGES),
    ([{"type": "Dropout", "rate": 0.5}, {"type": "Dense", "units": 3}], ROWS),
    ([{"type": "Activation", "activation": "tanh"}, {"type": "Dense", "units": 3}], ROWS),
    ([{"type": "Flatten"}, {"type": "Dense", "units": 3}], IMAGES),
    ([{"type": "Conv2D", "channels": 6, "kernel_size": 3, "strides": 2, "padding": 1,
       "dilation": 1, "groups": 3, "activation": "relu"}], IMAGES),
    ([{"type": "Conv2D", "channels": 4, "kernel_size": [3, 2], "dilation": 2}], IMAGES),
    ([{"type": "MaxPool2D", "pool_size": 3, "strides": 2, "ceil_mode": True}], IMAGES),
    ([{"type": "AvgPool2D", "pool_size": 2, "padding": 1, "count_include_pad": False}],
     IMAGES),
    ([{"type": "GlobalAvgPool2D"}, {"type": "Flatten"}], IMAGES),
    ([{"type": "GlobalMaxPool2D"}], IMAGES),
    ([{"type": "BatchNorm"}, {"type": "Dense", "units": 2}], IMAGES),
    ([{"type": "BatchNorm", "axis": -1, "center": False}], ROWS),
    ([{"type": "LayerNorm"}, {"type": "Dense", "units": 2}], ROWS),
    ([{"type": "Embedding", "input_dim": 20, "output_dim": 3}, {"type": "Flatten"}], ROWS),
    ([{"type": "LeakyReLU", "alpha": 0.2}], ROWS),
    ([{"type": "Reshape", "shape": [-1, 3, 2, 2]}, {"type": "Conv2D", "channels": 2,
                                                    "kernel_size": 1}], ROWS),
    ([{"type": "Reshape", "shape": [0, -1]}, {"type": "Dense", "units": 4}], IMAGES),
]


def _layers(layers: list[dict[str, Any]]) -> list[Layer]:
    spec = JobSpec.model_validate({
        "name": "x", "model": layers, "data": {"train": {"builtin": "digits"}},
        "loss": {"type": "l2"}, "optimizer": {"type": "sgd"}})
    assert isinstance(spec.model, list)
    return spec.model


def _run(net: Any, shape: tuple[int, ...]) -> tuple[list[int], int]:
    """What the worker gets: initialize, one forward on a batch, the parameter count."""
    net.initialize(mx.init.Xavier())
    data = np.random.default_rng(0).integers(0, 10, size=shape).astype(np.float32)
    out = net(mx.nd.array(data))
    count = sum(int(np.prod(p.shape)) for p in net.collect_params().values())
    return list(out.shape), count


@pytest.mark.parametrize(("layers", "shape"), LAYER_CASES,
                         ids=[f"{c[0][0]['type']}-{i}" for i, c in enumerate(LAYER_CASES)])
def test_every_layer_type_is_inferred_as_the_worker_builds_it(layers, shape):
    model = _layers(layers)
    answer = check_model(CheckModel(model=model, input_shape=list(shape), bounds=BOUNDS))
    assert answer.refused is None, answer.refused
    assert answer.fit is not None
    assert (answer.fit.output_shapes[0], answer.fit.parameter_count) == \
        _run(build_network(model), shape)


@pytest.mark.parametrize(("name", "side"), [("resnet18_v1", 64), ("mobilenetv2_0.25", 64),
                                            ("squeezenet1.1", 224)])
def test_a_zoo_network_is_inferred_as_the_worker_builds_it(name, side):
    model = ZooModel(zoo=name, classes=7)
    shape = (2, 3, side, side)
    answer = check_model(CheckModel(model=model, input_shape=list(shape), bounds=BOUNDS))
    assert answer.fit is not None, answer.refused
    assert (answer.fit.output_shapes[0], answer.fit.parameter_count) == \
        _run(zoo_network(model), shape)


@pytest.mark.parametrize(("layers", "shape", "field", "words"), [
    ([{"type": "Dense", "units": 64}, {"type": "Reshape", "shape": [-1, 1, 7, 7]}], ROWS,
     "model.1", "cannot reshape"),
    ([{"type": "Conv2D", "channels": 4, "kernel_size": 11}], IMAGES, "model.0", "Convolution"),
    ([{"type": "Flatten"}, {"type": "MaxPool2D"}], IMAGES, "model.1", "Pooling"),
    ([{"type": "Conv2D", "channels": 4, "kernel_size": 1, "groups": 2}], IMAGES, "model.0",
     "num_group"),
])
def test_a_layer_that_cannot_take_its_input_is_refused_naming_it(layers, shape, field, words):
    answer = check_model(CheckModel(model=_layers(layers), input_shape=list(shape),
                                    bounds=BOUNDS))
    assert answer.refused is not None and answer.refused.field == field, answer
    assert words in answer.refused.message and str(shape) in answer.refused.message


def test_a_zoo_network_too_deep_for_small_images_is_refused_as_the_worker_would_fail():
    model = ZooModel(zoo="squeezenet1.1", classes=7)
    answer = check_model(CheckModel(model=model, input_shape=[2, 3, 64, 64], bounds=BOUNDS))
    assert answer.refused is not None and answer.refused.field == "model.zoo"
    assert "(2, 7, 0, 0)" in answer.refused.message
    with pytest.raises(ValueError, match="larger than the padded input"):
        _run(zoo_network(model), (2, 3, 64, 64))


def test_uploaded_params_must_fit_the_shapes_the_job_needs():
    """A Module-style graph declares no parameter shapes: its Dense takes any input size,
    but the params uploaded for 3x32x32 load only where the inferred shapes are theirs."""
    conv = mx.sym.Convolution(mx.sym.var("data"), num_filter=4, kernel=(3, 3), name="conv")
    fc = mx.sym.FullyConnected(mx.sym.Flatten(conv), num_hidden=10, name="fc")
    graph = {"symbol": fc.tojson(), "input_name": "data", "input_shape": [1, 3, 32, 32]}
    model = UploadedModelRef(model="0" * 8 + "-0000-0000-0000-" + "0" * 12)
    for params, side, refused in ((True, 32, False), (True, 40, True), (False, 40, False)):
        question = CheckModel(model=model, uploaded=UploadedGraph(**graph, params=params),
                              input_shape=[16, 3, side, side], bounds=BOUNDS)
        answer = check_model(question)
        assert (answer.refused is not None) == refused, answer
    assert answer.fit is not None and answer.fit.parameter_count == 4 * 27 + 4 + 10 * 4 * 38 \
        * 38 + 10
    assert "fc_weight (10, 3600) -> (10, 5776)" in check_model(CheckModel(
        model=model, uploaded=UploadedGraph(**graph, params=True), input_shape=[16, 3, 40, 40],
        bounds=BOUNDS)).refused.message  # type: ignore[union-attr]


def test_a_network_past_the_node_bound_is_refused_as_too_large():
    layers = _layers([{"type": "Dense", "units": 100_000}, {"type": "Dense", "units": 100_000}])
    small = Bounds(max_node_elements=10**9, max_total_elements=1 << 40, seconds=30)
    answer = check_model(CheckModel(model=layers, input_shape=[2, 8], bounds=small))
    assert answer.refused is not None and answer.refused.too_large
    assert answer.refused.field == "model.1" and "10000000000 elements" in \
        answer.refused.message
