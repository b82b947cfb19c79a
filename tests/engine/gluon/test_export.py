"""HybridBlock.export -> SymbolBlock.imports for every layer a user network is made of, and
numerically checked gradients of a graph written with MXNet's operator names (SymbolBlock is
trainable, so every imported operator must differentiate correctly)."""

import json

import numpy as np
import pytest

from engine import autograd, gluon, nd, symbol
from engine.symbol import load_json
from tests.engine.gradcheck import check_grad

nn = gluon.nn

LAYERS = {
    "Dense": (lambda: nn.Dense(4, activation="tanh"), (2, 5)),
    "Conv1D": (lambda: nn.Conv1D(4, 3), (2, 3, 8)),
    "Conv2D": (lambda: nn.Conv2D(4, 3, strides=2, padding=1, activation="relu"), (2, 3, 8, 8)),
    "Conv3D": (lambda: nn.Conv3D(2, 3), (1, 2, 5, 5, 5)),
    "Conv2DTranspose": (lambda: nn.Conv2DTranspose(4, 3, strides=2), (2, 3, 4, 4)),
    "BatchNorm": (lambda: nn.BatchNorm(), (2, 3, 4, 4)),
    "LayerNorm": (lambda: nn.LayerNorm(), (2, 6)),
    "InstanceNorm": (lambda: nn.InstanceNorm(), (2, 3, 4, 4)),
    "GroupNorm": (lambda: nn.GroupNorm(num_groups=2), (2, 4, 4, 4)),
    "Embedding": (lambda: nn.Embedding(10, 4), (2, 3)),
    "MaxPool2D": (lambda: nn.MaxPool2D(3, 2, ceil_mode=True), (1, 2, 8, 8)),
    "AvgPool1D": (lambda: nn.AvgPool1D(2), (1, 2, 4)),
    "GlobalAvgPool2D": (lambda: nn.GlobalAvgPool2D(), (1, 2, 4, 4)),
    "GlobalMaxPool2D": (lambda: nn.GlobalMaxPool2D(), (1, 2, 4, 4)),
    "Flatten": (lambda: nn.Flatten(), (2, 3, 4)),
    "Dropout": (lambda: nn.Dropout(0.5), (2, 3)),
    "Activation": (lambda: nn.Activation("softrelu"), (2, 3)),
    "LeakyReLU": (lambda: nn.LeakyReLU(0.2), (2, 3)),
    "PReLU": (lambda: nn.PReLU(), (2, 3)),
    "ELU": (lambda: nn.ELU(), (2, 3)),
    "SELU": (lambda: nn.SELU(), (2, 3)),
    "GELU": (lambda: nn.GELU(), (2, 3)),
    "Swish": (lambda: nn.Swish(), (2, 3)),
    "HybridLambda": (lambda: nn.HybridLambda(lambda F, x: F.relu(x) * 2), (2, 3)),
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_every_layer_exports_and_imports_to_the_same_function(layer, tmp_path):
    make, shape = LAYERS[layer]
    net = nn.HybridSequential()
    net.add(make(), nn.Dense(3))
    net.initialize()
    rng = np.random.RandomState(0)
    x = nd.array(rng.randint(0, 10, size=shape) if layer == "Embedding"
                 else rng.uniform(-2, 2, size=shape))
    expected = net(x)
    sym_file, params_file = net.export(str(tmp_path / layer))
    back = gluon.SymbolBlock.imports(sym_file, ["data"], params_file)
    np.testing.assert_allclose(back(x).asnumpy(), expected.asnumpy(), rtol=1e-6, atol=1e-6)
    with autograd.record():
        loss = back(x).sum()
    loss.backward()
    trained = [p for p in back.collect_params().values() if p.grad_req != "null"]
    assert trained and all(np.isfinite(p.grad().asnumpy()).all() for p in trained)
    assert np.abs(trained[-1].grad().asnumpy()).sum() > 0


def _node(op, name, inputs, **attrs):
    return {"op": op, "name": name, "attrs": {k: str(v) for k, v in attrs.items()},
            "inputs": [[i, 0, 0] for i in inputs]}


# A graph written the way MXNet's exporter writes it (op names and string attributes), with
# the operators the issue lists that a Gluon export does not already cover.
GRAPH = {"nodes": [
    _node("null", "data", []),                                                  # 0 (2, 3, 4)
    _node("null", "w", []),                                                     # 1 (2, 4, 3)
    _node("transpose", "t", [0], axes=(0, 2, 1)),                               # 2 (2, 4, 3)
    _node("_Plus", "plus", [2, 1]),                                             # 3
    _node("broadcast_mul", "bmul", [3, 1]),                                     # 4
    _node("slice", "sl", [4], begin=(None, 1, 0), end=(None, 4, 3)),            # 5 (2, 3, 3)
    _node("slice_axis", "sa", [5], axis=2, begin=0, end=2),                     # 6 (2, 3, 2)
    _node("softmax", "sm", [6], axis=-1),                                       # 7
    _node("log_softmax", "lsm", [6], axis=1),                                   # 8
    _node("elemwise_mul", "em", [7, 8]),                                        # 9
    _node("mean", "mn", [9], axis=1, keepdims=True),                            # 10 (2, 1, 2)
    _node("broadcast_add", "badd", [10, 6]),                                    # 11
    _node("clip", "cl", [11], a_min=-1.5, a_max=1.5),                           # 12
    _node("_mul_scalar", "ms", [12], scalar=0.5),                               # 13
    _node("_copy", "cp", [13]),                                                 # 14
    _node("Reshape", "rs", [14], shape=(0, -1)),                                # 15 (2, 6)
    _node("SoftmaxActivation", "sact", [15]),                                   # 16
    _node("elemwise_add", "out", [16, 15]),                                     # 17
], "heads": [[17, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}}


def test_a_graph_of_mxnet_operator_names_differentiates_correctly():
    symbol = load_json(json.dumps(GRAPH))
    assert symbol.infer_shape(data=(2, 3, 4), w=(2, 4, 3))[1] == [(2, 6)]
    rng = np.random.RandomState(0)
    check_grad(lambda data, w: symbol.eval(data=data, w=w)[0],
               [rng.uniform(-1, 1, (2, 3, 4)), rng.uniform(-1, 1, (2, 4, 3))])


def test_softmax_output_head_loads_and_gives_its_gradient():
    graph = {"nodes": [_node("null", "data", []), _node("null", "fc_weight", []),
                       _node("null", "fc_bias", []),
                       _node("FullyConnected", "fc", [0, 1, 2], num_hidden=3),
                       _node("null", "softmax_label", []),
                       _node("SoftmaxOutput", "softmax", [3, 4])],
             "heads": [[5, 0, 0]]}
    block = gluon.SymbolBlock(load_json(json.dumps(graph)),
                              [symbol.var("data"), symbol.var("softmax_label")])
    block.initialize()
    x, label = nd.array(np.ones((2, 4))), nd.array([0, 2])
    with autograd.record():
        out = block(x, label)
    out.backward()
    probs = out.asnumpy()
    np.testing.assert_allclose(probs.sum(axis=1), [1, 1], rtol=1e-6)
    onehot = np.eye(3)[[0, 2]]
    # SoftmaxOutput's gradient is (p - onehot) whatever the head gradient, summed over x's ones
    np.testing.assert_allclose(block.collect_params()["fc_bias"].grad().asnumpy(),
                               (probs - onehot).sum(axis=0), rtol=1e-5, atol=1e-6)


def test_features_of_an_imported_graph_compose_into_a_new_network_that_exports(tmp_path):
    base = nn.HybridSequential()
    base.add(nn.Dense(4, activation="relu"), nn.Dense(3))
    base.initialize()
    x = nd.array(np.random.RandomState(0).uniform(-1, 1, (2, 5)))
    base(x)
    sym_file, params_file = base.export(str(tmp_path / "base"))
    internals = symbol.load(sym_file).get_internals()
    hidden = [n for n in internals.list_outputs() if "_relu_fwd" in n][0]  # MXNet's name
    both = gluon.SymbolBlock([internals[hidden], symbol.load(sym_file)], symbol.var("data"))
    both.collect_params().load(params_file, ignore_extra=True)
    features, logits = both(x)
    np.testing.assert_allclose(features.asnumpy(), base[0](x).asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(logits.asnumpy(), base(x).asnumpy(), rtol=1e-6)

    extractor = gluon.SymbolBlock(internals[hidden], symbol.var("data"))
    extractor.collect_params().load(params_file, ignore_extra=True)
    head = nn.Dense(2)
    net = nn.HybridSequential()
    net.add(extractor, head)
    head.initialize()
    expected = net(x)
    again = gluon.SymbolBlock.imports(*_export(net, tmp_path / "composed"))
    np.testing.assert_allclose(again(x).asnumpy(), expected.asnumpy(), rtol=1e-6)


def _export(net, path):
    sym_file, params_file = net.export(str(path))
    return sym_file, ["data"], params_file


def test_exported_in_memory_is_what_export_writes(tmp_path):
    from engine.gluon.symbol_block import exported
    from engine.ndarray.mxnet_format import read_params

    net = nn.HybridSequential()
    net.add(nn.Conv2D(2, 3), nn.BatchNorm(), nn.Flatten(), nn.Dense(2))
    net.initialize()
    with pytest.raises(RuntimeError, match="run a forward"):
        exported(net)
    net(nd.ones((1, 1, 4, 4)))
    text, blob = exported(net)
    sym_file, params_file = net.export(str(tmp_path / "n"), epoch=12)
    assert params_file.endswith("-0012.params")
    with open(sym_file) as handle:
        assert handle.read() == text
    with open(params_file, "rb") as handle:
        assert handle.read() == blob
    names = read_params(blob, max_bytes=1 << 20)
    assert {k.split(":")[0] for k in names} == {"arg", "aux"}
    assert sorted(k for k in names if k.startswith("aux:")) == sorted(
        f"aux:{n}" for n in net.collect_params() if "running" in n)


def test_an_imported_block_hybridizes_alone_and_inside_a_network_without_falling_back(
        tmp_path):
    import warnings

    base = nn.HybridSequential()
    base.add(nn.Conv2D(4, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.Flatten(),
             nn.Dense(3))
    base.initialize()
    x = nd.array(np.random.RandomState(0).uniform(-1, 1, (2, 2, 5, 5)))
    base(x)
    sym_file, params_file = base.export(str(tmp_path / "b"))
    for wrap in (False, True):
        block = gluon.SymbolBlock.imports(sym_file, ["data"], params_file)
        net = block
        if wrap:
            net = nn.HybridSequential()
            net.add(block, nn.Dense(2))
            net[1].initialize()
        reference = gluon.SymbolBlock.imports(sym_file, ["data"], params_file)
        net.hybridize()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a fallback to imperative would warn
            for _ in range(3):  # trace, then replay the program
                with autograd.record():
                    out = net(x)
                out.backward()
        for _ in range(3):  # the same training forwards move the same BatchNorm statistics
            with autograd.record():
                reference(x)
        expected = reference(x)
        if wrap:
            expected = net[1](expected)
        net(x)  # traces the predict-mode program; the next call replays it
        np.testing.assert_allclose(net(x).asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-6)
        grad = block.collect_params()[sorted(block.collect_params())[0]].grad()
        assert np.abs(grad.asnumpy()).sum() > 0
        assert net._cached_graph is not None and net._cached_graph.programs


def test_an_imported_block_with_two_inputs_exports_under_its_own_input_names(tmp_path):
    a, b = symbol.var("image"), symbol.var("mask")
    graph = symbol.FullyConnected(a * b, num_hidden=2, name="fc")
    block = gluon.SymbolBlock(graph, [a, b])
    block.initialize()
    x, m = nd.ones((1, 3)), nd.array([[1, 0, 1]])
    expected = block(x, m)
    sym_file, params_file = block.export(str(tmp_path / "two"))
    back = gluon.SymbolBlock.imports(sym_file, ["image", "mask"], params_file)
    np.testing.assert_allclose(back(x, m).asnumpy(), expected.asnumpy(), rtol=1e-6)
