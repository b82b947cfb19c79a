"""A bound graph's compiled programs (engine/symbol/compiled_graph.py): Module and Executor.

Each check runs the same graph twice from the same arrays: compiled (the default) and node
by node (CompiledGraph switched off), and compares outputs, gradients and BatchNorm's
moving statistics bit for bit over several training steps. The graph has what the program
fuses: Convolution + BatchNorm + relu + 2x2 max-pool, a residual add + relu, and
FullyConnected + Activation.
"""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine.symbol import compiled_graph
from engine.symbol.compiled_graph import CompiledGraph


def _graph():
    data = mx.sym.var("data")
    x = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=8, name="c0")
    x = mx.sym.Activation(mx.sym.BatchNorm(x, fix_gamma=False, name="bn0"), act_type="relu")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max")
    y = mx.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=8, no_bias=True, name="c1")
    y = mx.sym.BatchNorm(y, name="bn1")
    x = mx.sym.Activation(x + y, act_type="relu")  # residual add + relu
    x = mx.sym.Flatten(mx.sym.Pooling(x, global_pool=True, kernel=(1, 1), pool_type="avg"))
    x = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=16, name="fc0"), act_type="tanh")
    x = mx.sym.FullyConnected(x, num_hidden=5, name="fc1")
    return mx.sym.SoftmaxOutput(x, name="softmax")


def _train(compiled: bool, monkeypatch, steps: int = 3):
    rng = np.random.default_rng(3)
    mod = mx.mod.Module(_graph(), data_names=["data"], label_names=["softmax_label"])
    mod.bind(data_shapes=[("data", (4, 3, 8, 8))], label_shapes=[("softmax_label", (4,))])
    mx.random.seed(11)
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="adam", optimizer_params={"learning_rate": 0.01})
    outputs = []
    with monkeypatch.context() as patch:
        if not compiled:
            patch.setattr(CompiledGraph, "forward", lambda *args: None)
        for _ in range(steps):
            batch = mx.io.DataBatch(
                [mx.nd.array(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))],
                [mx.nd.array(rng.integers(0, 5, 4).astype(np.float32))])
            mod.forward_backward(batch)
            outputs.append(mod.get_outputs()[0].asnumpy())
            mod.update()
        mod.forward(batch, is_train=False)
        outputs.append(mod.get_outputs()[0].asnumpy())
    arg, aux = mod.get_params()
    programs = len(mod._exec_group._compiled[0].programs)
    return outputs, {k: v.asnumpy() for k, v in {**arg, **aux}.items()}, programs


def test_compiled_module_training_is_bit_identical_to_node_by_node(monkeypatch):
    out_c, params_c, programs = _train(True, monkeypatch)
    out_i, params_i, none = _train(False, monkeypatch)
    assert programs == 2 and none == 0  # one for training, one for prediction
    for a, b in zip(out_c, out_i, strict=True):
        np.testing.assert_array_equal(a, b)
    assert params_c.keys() == params_i.keys()
    for name in params_c:
        np.testing.assert_array_equal(params_c[name], params_i[name], err_msg=name)
    # the moving statistics moved: BatchNorm updated the bound aux arrays in place
    assert not np.allclose(params_c["bn0_moving_mean"], 0.0)


def test_fused_kernels_take_the_graph_nodes():
    """BatchNorm (with relu and pool), add + relu and FullyConnected (with its activation)
    are recorded as operator calls, so the program runs them as fused kernels."""
    from engine.gluon.hybrid.kernels import FullyConnectedKernel
    from engine.gluon.hybrid.norm_kernels import AddReluKernel, BatchNormKernel

    ex = _graph().simple_bind(mx.cpu(), data=(4, 3, 8, 8), softmax_label=(4,))
    for name, arr in ex.arg_dict.items():
        if name not in ("data", "softmax_label"):
            arr[:] = mx.nd.random.uniform(-0.5, 0.5, arr.shape)
    ex.forward(is_train=True)
    (program,) = ex._compiled.programs.values()
    kinds = [type(k) for k in program.kernels]
    assert kinds.count(BatchNormKernel) == 2
    assert kinds.count(AddReluKernel) == 1
    assert kinds.count(FullyConnectedKernel) == 2
    bn0 = next(k for k in program.kernels if isinstance(k, BatchNormKernel))
    assert bn0.relu and bn0.pool is not None


def test_new_shapes_trace_again_and_monitor_runs_node_by_node():
    x = mx.sym.var("x")
    graph = mx.sym.FullyConnected(x, num_hidden=3, name="fc")
    ex = graph.simple_bind(mx.cpu(), x=(2, 4))
    ex.arg_dict["fc_weight"][:] = 0.5
    first = ex.forward(is_train=True)[0].asnumpy()
    again = ex.forward(is_train=True)[0].asnumpy()
    np.testing.assert_array_equal(first, again)
    assert len(ex._compiled.programs) == 1
    ex.arg_dict["x"] = mx.nd.ones((5, 4))  # a new signature
    assert ex.forward(is_train=True)[0].shape == (5, 3)
    assert len(ex._compiled.programs) == 2
    seen = []
    ex.set_monitor_callback(lambda name, arr: seen.append(name))
    ex.forward(is_train=True)
    assert "fc_output" in seen and len(ex._compiled.programs) == 2


def test_untraceable_graph_warns_once_and_runs_node_by_node(monkeypatch):
    from engine.gluon.hybrid import program as program_module

    def refuse(*args, **kwargs):
        raise program_module.Untraceable("for the test")

    monkeypatch.setattr(program_module, "Program", refuse)
    x = mx.sym.var("x")
    ex = (x * 3).simple_bind(mx.cpu(), x=(2,))
    ex.arg_dict["x"][:] = 2
    with pytest.warns(UserWarning, match="cannot be compiled"):
        assert ex.forward()[0].asnumpy().tolist() == [6.0, 6.0]
    assert ex._compiled.failure is not None
    assert ex.forward()[0].asnumpy().tolist() == [6.0, 6.0]  # no second warning needed
    assert compiled_graph.CompiledGraph.forward(ex._compiled, {}, False) is None


def test_grad_req_add_accumulates_as_node_by_node(monkeypatch):
    results = []
    for compiled in (True, False):
        with monkeypatch.context() as patch:
            if not compiled:
                patch.setattr(CompiledGraph, "forward", lambda *args: None)
            x = mx.sym.var("x")
            graph = mx.sym.sum(mx.sym.Activation(
                mx.sym.FullyConnected(x, num_hidden=3, name="fc"), act_type="relu"))
            ex = graph.simple_bind(mx.cpu(), grad_req="add", x=(2, 4))
            ex.arg_dict["x"][:] = mx.nd.array(np.arange(8).reshape(2, 4) / 7.0)
            ex.arg_dict["fc_weight"][:] = mx.nd.array(np.linspace(-1, 1, 12).reshape(3, 4))
            for _ in range(3):
                ex.forward(is_train=True)
                ex.backward()
            assert len(ex._compiled.programs) == (1 if compiled else 0)
            results.append({k: v.asnumpy() for k, v in ex.grad_dict.items()})
    assert results[0]["fc_bias"].tolist() == [0.0, 6.0, 6.0]  # three backward passes summed
    for name in results[0]:
        np.testing.assert_array_equal(results[0][name], results[1][name], err_msg=name)


def test_an_error_while_tracing_falls_back_and_a_real_error_still_raises(monkeypatch):
    from engine.gluon.hybrid import trace

    def broken_tracer(*args, **kwargs):
        raise RuntimeError("a tracing problem")

    monkeypatch.setattr(trace, "traced_node", broken_tracer)
    x = mx.sym.var("x")
    ex = (x * 3).simple_bind(mx.cpu(), x=(2,))
    ex.arg_dict["x"][:] = 2
    with pytest.warns(UserWarning, match="RuntimeError while tracing"):
        assert ex.forward()[0].asnumpy().tolist() == [6.0, 6.0]
    with pytest.raises(ValueError, match="dot"):  # a real error: bind refuses it, as MXNet
        mx.sym.dot(x, x).bind(mx.cpu(), {"x": mx.nd.ones((2, 3))})
    from engine.symbol.compiled_graph import CompiledGraph

    with pytest.raises(ValueError, match="dot"):  # and so does the program
        CompiledGraph(mx.sym.dot(x, x)).forward({"x": mx.nd.ones((2, 3))}, False)
