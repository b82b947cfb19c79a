"""Gluon blocks called on Symbols return Symbols (MXNet's HybridBlock with F=symbol), so a
network defined with Gluon layers can be trained by Module; ``Parameter.var()``."""

import numpy as np
import pytest

import engine as mx
from engine import autograd, gluon, nd, sym
from engine.gluon import nn
from tests.oracle import run_mxnet


def two_layer(prefix="net_"):
    net = nn.HybridSequential(prefix=prefix)
    with net.name_scope():
        net.add(nn.Dense(4, activation="relu", in_units=3), nn.Dense(2, in_units=4))
    return net


def test_gluon_network_on_a_symbol_has_mxnets_arguments_and_shapes():
    run = run_mxnet(
        "net = gluon.nn.HybridSequential(prefix='net_')\n"
        "with net.name_scope():\n"
        "    net.add(gluon.nn.Dense(4, activation='relu', in_units=3),"
        " gluon.nn.Dense(2, in_units=4))\n"
        "out = net(mx.sym.var('data'))\n"
        "args, outs, _ = out.infer_shape(data=(5, 3))\n"
        "result['type'] = type(out).__name__\n"
        "result['arguments'] = out.list_arguments()\n"
        "result['shapes'] = [list(s) for s in args + outs]\n"
    )
    out = two_layer()(sym.var("data"))
    args, outs, _ = out.infer_shape(data=(5, 3))
    assert type(out).__name__ == run.json["type"] == "Symbol"
    assert out.list_arguments() == run.json["arguments"]
    assert [list(s) for s in args + outs] == run.json["shapes"]


def test_hybridized_block_called_on_a_symbol_still_returns_a_symbol():
    net = two_layer()
    net.initialize()
    net.hybridize(static_alloc=True)
    assert isinstance(net(sym.var("data")), sym.Symbol)
    assert net(nd.ones((1, 3))).shape == (1, 2)


def test_parameter_var_carries_shape_and_multipliers_as_mxnet():
    run = run_mxnet(
        "p = gluon.Parameter('w', shape=(2, 3), lr_mult=2.0, wd_mult=0.5, init='zeros')\n"
        "v = p.var()\n"
        "result['name'] = v.name\n"
        "result['attrs'] = {k: v.attr(k) for k in"
        " ('__shape__', '__lr_mult__', '__wd_mult__', '__init__')}\n"
        "result['same'] = p.var() is v\n"
    )
    p = gluon.Parameter("w", shape=(2, 3), lr_mult=2.0, wd_mult=0.5, init="zeros")
    v = p.var()
    assert v.name == run.json["name"]
    assert {k: v.attr(k) for k in run.json["attrs"]} == run.json["attrs"]
    assert (p.var() is v) == run.json["same"]


def test_module_trains_a_gluon_defined_network_like_gluon_itself():
    """One SGD step: Module on net(sym.var('data')) + SoftmaxOutput equals the Gluon
    Trainer on the same Blocks with SoftmaxCrossEntropyLoss."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    y = rng.integers(0, 2, 6).astype(np.float32)
    net = two_layer()
    net.initialize()
    for p in net.collect_params().values():
        p.set_data(nd.array(rng.standard_normal(p.shape).astype(np.float32)))
    start = {name: p.data().copy() for name, p in net.collect_params().items()}

    head = mx.sym.SoftmaxOutput(net(sym.var("data")), name="softmax")
    mod = mx.mod.Module(head)
    mod.bind(data_shapes=[("data", x.shape)], label_shapes=[("softmax_label", y.shape)])
    mod.init_params(arg_params=start)
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5})
    mod.forward_backward(mx.io.DataBatch(data=[nd.array(x)], label=[nd.array(y)]))
    mod.update()

    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(nd.array(x)), nd.array(y))
    loss.backward()
    trainer.step(x.shape[0])

    trained, _ = mod.get_params()
    assert set(trained) == set(start)
    for name, param in net.collect_params().items():
        assert not np.array_equal(param.data().asnumpy(), start[name].asnumpy())
        np.testing.assert_allclose(trained[name].asnumpy(), param.data().asnumpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=name)


def test_scalar_input_to_a_block_is_a_value_error_hybridized_or_not():
    net = nn.Dense(2, in_units=1)
    net.initialize()
    with pytest.raises(ValueError, match="one NDArray or one Symbol"):
        net(1.0)


@pytest.mark.skipif(not all(hasattr(sym, op) for op in ("reshape_like", "square", "mean")),
                    reason="needs the symbol ops reshape_like/square/mean (symbol engineer's "
                           "branch, issue 10)")
def test_gluon_loss_on_symbols_builds_mxnets_graph():
    run = run_mxnet(
        "out = gluon.loss.L2Loss()(mx.sym.var('a'), mx.sym.var('b'))\n"
        "_, outs, _ = out.infer_shape(a=(4, 3), b=(4, 3))\n"
        "result['arguments'] = out.list_arguments()\n"
        "result['shape'] = list(outs[0])\n"
    )
    out = gluon.loss.L2Loss()(sym.var("a"), sym.var("b"))
    _, outs, _ = out.infer_shape(a=(4, 3), b=(4, 3))
    assert isinstance(out, sym.Symbol)
    assert out.list_arguments() == run.json["arguments"]
    assert list(outs[0]) == run.json["shape"]
