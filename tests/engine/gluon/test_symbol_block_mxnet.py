"""HybridBlock.export / SymbolBlock.imports against MXNet 1.9.1, both directions: a user-style
network (Conv + BatchNorm + residual add + Reshape codes + Dense + LayerNorm ...) exported by
one side loads in the other and computes the same forward (1e-4) and the same gradients."""

import numpy as np
import pytest

import engine as mx
from engine import autograd, gluon, nd
from tests.oracle import needs_mxnet, run_mxnet

# The same source builds the network in MXNet and in the engine (whose API is MXNet's).
NET_SOURCE = '''
class UserNet(gluon.HybridBlock):
    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.conv1 = gluon.nn.Conv2D(8, 3, padding=1, in_channels=3)
            self.bn1 = gluon.nn.BatchNorm(in_channels=8)
            self.conv2 = gluon.nn.Conv2D(8, 3, padding=1, in_channels=8, use_bias=False)
            self.bn2 = gluon.nn.BatchNorm(in_channels=8)
            self.proj = gluon.nn.Conv2D(8, 1, in_channels=3)
            self.pool = gluon.nn.MaxPool2D(3, strides=2, ceil_mode=True)
            self.avg = gluon.nn.AvgPool2D(3, strides=2, padding=1)
            self.drop = gluon.nn.Dropout(0.0)  # MXNet writes _copy for a rate of 0
            self.out = gluon.nn.Dense(10, in_units=8 * 2 * 2 + 8)
            self.ln = gluon.nn.LayerNorm(in_channels=10)
            self.emb = gluon.nn.Embedding(5, 10)

    def hybrid_forward(self, F, x):
        y = F.Activation(self.bn1(self.conv1(x)), act_type="relu")
        y = self.bn2(self.conv2(y))
        y = F.LeakyReLU(y + self.proj(x), slope=0.1)
        y = self.avg(self.pool(y))
        g = F.Pooling(y, kernel=(1, 1), global_pool=True, pool_type="avg")
        y = F.reshape(y, shape=(0, -3, -2))
        y = F.reshape(y, shape=(0, -4, 4, -1, -2))
        y = F.reshape(y, shape=(0, -1))
        y = F.concat(y, F.flatten(g), dim=1)
        y = F.Dropout(self.drop(y), p=0.0)  # the op itself; a rate of 0 is deterministic
        y = self.out(y) * 0.5
        tokens = F.zeros_like(F.slice_axis(y, axis=1, begin=0, end=1))
        y = F.clip(y, -3, 3) + F.reshape(self.emb(tokens), shape=(0, -1))
        y = F.broadcast_add(F.reshape(F.mean(y, axis=1, keepdims=True), shape=(-1, 1)), y)
        y = F.transpose(F.broadcast_mul(y, F.sigmoid(y)), axes=(1, 0))
        return F.log_softmax(self.ln(F.transpose(y)))
'''

BUILD = NET_SOURCE + '''
mx.random.seed(0)
net = UserNet(prefix="user_")
net.initialize(mx.init.Xavier())
for p in net.collect_params().values():
    if "running" in p.name:
        p.set_data(nd.array(np.random.RandomState(1).uniform(0.5, 1.5, size=p.shape)))
net.hybridize()
'''

# the predict-mode forward, and the training-mode forward (batch statistics) with the
# gradients of a weighted sum of its outputs, per parameter. (MXNet's Pooling has no correct
# backward under record(train_mode=False), so gradients are compared in training mode; and
# its average pooling with pooling_convention='full' divides the gradient of a window that
# overhangs the padding by the whole kernel while its forward divides by the clipped window,
# so the network avoids that corner: the engine's gradient is that of its forward.)
GRADS = '''
def outputs_and_grads(net, x, weights):
    predicted = net(x)
    params = net.collect_params()
    params.zero_grad()
    with autograd.record():
        y = net(x)
        loss = (y * weights).sum()
    loss.backward()
    return predicted, y, {k: p.grad() for k, p in params.items() if p.grad_req != "null"}
'''


def _inputs():
    rng = np.random.RandomState(0)
    return {"x": rng.normal(size=(2, 3, 8, 8)).astype(np.float32),
            "w": rng.normal(size=(2, 10)).astype(np.float32)}


def _engine_namespace():
    space = {"mx": mx, "gluon": gluon, "nd": nd, "np": np, "autograd": autograd}
    exec(NET_SOURCE + GRADS, space)  # noqa: S102 - the test's own source, not user input
    return space


def _check_against(run, predicted, y, grads):
    np.testing.assert_allclose(predicted.asnumpy(), run["predicted"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y.asnumpy(), run["y"], rtol=1e-4, atol=1e-4)
    names = run.json["grad_names"]
    assert sorted(names) == sorted(grads)
    for i, name in enumerate(names):
        np.testing.assert_allclose(grads[name].asnumpy(), run[f"g{i}"], rtol=1e-4, atol=1e-4,
                                   err_msg=name)


@needs_mxnet
def test_a_network_mxnet_exported_imports_runs_and_differentiates_the_same(tmp_path):
    prefix = str(tmp_path / "user")
    run = run_mxnet(BUILD + GRADS + f'''
x, w = nd.array(inputs["x"]), nd.array(inputs["w"])
net(x)
net.export({prefix!r}, epoch=3)
predicted, y, grads = outputs_and_grads(net, x, w)
outputs["predicted"], outputs["y"] = predicted, y
names = sorted(grads)
result["grad_names"] = names
for i, n in enumerate(names):
    outputs["g%d" % i] = grads[n]
''', _inputs())
    space = _engine_namespace()
    net = gluon.SymbolBlock.imports(f"{prefix}-symbol.json", ["data"], f"{prefix}-0003.params")
    assert sorted(net.collect_params()) == sorted(run.json["grad_names"] + [
        f"user_batchnorm{i}_running_{s}" for i in (0, 1) for s in ("mean", "var")])
    x, w = nd.array(_inputs()["x"]), nd.array(_inputs()["w"])
    _check_against(run, *space["outputs_and_grads"](net, x, w))


@needs_mxnet
def test_a_network_the_engine_exports_imports_in_mxnet_the_same(tmp_path):
    prefix = str(tmp_path / "ours")
    space = _engine_namespace()
    exec(BUILD, space)  # noqa: S102
    net = space["net"]
    x, w = nd.array(_inputs()["x"]), nd.array(_inputs()["w"])
    net(x)
    sym_file, params_file = net.export(prefix, epoch=7)
    assert (sym_file, params_file) == (f"{prefix}-symbol.json", f"{prefix}-0007.params")
    ours = space["outputs_and_grads"](net, x, w)
    run = run_mxnet(GRADS + f'''
net = gluon.SymbolBlock.imports({sym_file!r}, ["data"], {params_file!r})
predicted, y, grads = outputs_and_grads(net, nd.array(inputs["x"]), nd.array(inputs["w"]))
outputs["predicted"], outputs["y"] = predicted, y
names = sorted(grads)
result["grad_names"] = names
for i, n in enumerate(names):
    outputs["g%d" % i] = grads[n]
''', _inputs())
    _check_against(run, *ours)


@needs_mxnet
def test_checkpoints_and_parameter_files_travel_both_ways(tmp_path):
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    run_mxnet(f'''
data = mx.sym.var("data")
fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
bn = mx.sym.BatchNorm(fc, name="bn")
net = mx.sym.SoftmaxOutput(bn, name="softmax")
arg = {{"fc_weight": nd.array(np.arange(12).reshape(3, 4)), "fc_bias": nd.ones((3,)),
        "bn_gamma": nd.ones((3,)), "bn_beta": nd.zeros((3,))}}
aux = {{"bn_moving_mean": nd.array([1, 2, 3]), "bn_moving_var": nd.ones((3,))}}
mx.model.save_checkpoint({theirs!r}, 4, net, arg, aux)
dense = gluon.nn.Dense(2, in_units=3)
dense.initialize(mx.init.One())
dense.save_parameters({theirs + ".dense"!r})
nd.save({theirs + ".list"!r}, [nd.ones((2,)), nd.array([1, 2], dtype="int32")])
''')
    sym, arg, aux = mx.model.load_checkpoint(theirs, 4)
    assert sym.list_arguments() == ["data", "fc_weight", "fc_bias", "bn_gamma", "bn_beta",
                                    "softmax_label"]
    assert arg["fc_weight"].asnumpy().tolist() == np.arange(12).reshape(3, 4).tolist()
    assert aux["bn_moving_mean"].asnumpy().tolist() == [1, 2, 3]
    dense = gluon.nn.Dense(2, in_units=3)
    dense.load_parameters(theirs + ".dense")
    assert dense.weight.data().asnumpy().tolist() == [[1, 1, 1]] * 2
    listed = nd.load(theirs + ".list")
    assert [a.dtype for a in listed] == [np.float32, np.int32]
    with open(theirs + ".list", "rb") as handle:
        assert [a.shape for a in nd.load_frombuffer(handle.read())] == [(2,), (2,)]

    mx.model.save_checkpoint(ours, 2, sym, arg, aux)
    dense.weight.set_data(nd.array([[1, 2, 3], [4, 5, 6]]))
    dense.save_parameters(ours + ".dense", format="mxnet")
    dense.collect_params().save(ours + ".dict", format="mxnet")
    nd.save(ours + ".nd", {"a": nd.array([[1.5, 2]]), "b": nd.array([7], dtype="int64")})
    run = run_mxnet(f'''
sym, arg, aux = mx.model.load_checkpoint({ours!r}, 2)
result["args"] = sym.list_arguments()
outputs["w"] = arg["fc_weight"]
outputs["mean"] = aux["bn_moving_mean"]
loaded = nd.load({ours + ".nd"!r})
outputs["a"], outputs["b"] = loaded["a"], loaded["b"]
dense = gluon.nn.Dense(2, in_units=3)
dense.load_parameters({ours + ".dense"!r})
outputs["dense"] = dense.weight.data()
result["dict"] = sorted(nd.load({ours + ".dict"!r}))
''')
    assert run.json["args"] == sym.list_arguments()
    assert run["w"].tolist() == np.arange(12).reshape(3, 4).tolist()
    assert run["mean"].tolist() == [1, 2, 3]
    assert run["a"].tolist() == [[1.5, 2]] and run["b"].dtype == np.int64
    assert run["dense"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert run.json["dict"] == sorted(dense.collect_params())


def test_an_imported_network_trains_and_its_loss_falls(tmp_path):
    space = _engine_namespace()
    exec(BUILD, space)  # noqa: S102
    net = space["net"]
    x = nd.array(_inputs()["x"])
    net(x)
    sym_file, params_file = net.export(str(tmp_path / "net"))
    block = gluon.SymbolBlock.imports(sym_file, "data", params_file)
    block.hybridize()  # a graph already: nothing to trace, no warning
    np.testing.assert_allclose(block(x).asnumpy(), net(x).asnumpy(), rtol=1e-5, atol=1e-6)
    trainer = gluon.Trainer(block.collect_params(), "adam", {"learning_rate": 0.01})
    labels = nd.array([1, 7])
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss(from_logits=True)
    losses = []
    for _ in range(15):
        with autograd.record():
            loss = loss_fn(block(x), labels)
        loss.backward()
        trainer.step(2)
        losses.append(float(loss.mean().asscalar()))
    assert losses[-1] < losses[0] * 0.5
    moving = block.collect_params()["user_batchnorm0_running_mean"].data().asnumpy()
    assert not np.allclose(moving, net.collect_params()["user_batchnorm0_running_mean"]
                           .data().asnumpy())  # training updated the auxiliary states
    # the trained block exports again, and a fresh import computes the same
    again = block.export(str(tmp_path / "trained"), epoch=1)
    back = gluon.SymbolBlock.imports(again[0], ["data"], again[1])
    np.testing.assert_allclose(back(x).asnumpy(), block(x).asnumpy(), rtol=1e-5, atol=1e-6)


def test_imports_name_what_is_wrong(tmp_path):
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    sym_file, params_file = net.export(str(tmp_path / "d"))
    with pytest.raises(ValueError, match="'image'.* not inputs of the graph"):
        gluon.SymbolBlock.imports(sym_file, ["image"], params_file)
    other = gluon.nn.Dense(2, in_units=5, prefix=net.prefix)
    other.initialize()
    _, wrong_params = other.export(str(tmp_path / "o"))
    wrong = gluon.SymbolBlock.imports(sym_file, ["data"], wrong_params)
    with pytest.raises(ValueError, match="FullyConnected 'dense[0-9]+_fwd'.*shape"):
        wrong(nd.ones((1, 3)))
    unused = gluon.nn.Dense(2)
    with pytest.raises(RuntimeError, match="run a forward"):
        unused.initialize() or unused.export(str(tmp_path / "u"))
