"""Block/HybridBlock: MXNet 1.x naming, child registration, hybrid_forward(F, x, **params),
hooks, and save/load of parameters (npz, never pickle)."""

import io

import numpy as np
import pytest

from engine import autograd, cpu, gluon, init, nd
from engine.gluon import nn


class TwoLayer(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.hidden = nn.Dense(4, activation="relu")
            self.out = nn.Dense(2)
            self.scale = self.params.get("scale", shape=(1,), init="ones")

    def hybrid_forward(self, F, x, scale):
        return F.broadcast_mul(self.out(self.hidden(x)), scale)


def test_names_follow_mxnet_prefixes():
    net = TwoLayer(prefix="model_")
    assert sorted(net.collect_params().keys()) == [
        "model_dense0_bias", "model_dense0_weight", "model_dense1_bias", "model_dense1_weight",
        "model_scale"]
    seq = nn.HybridSequential(prefix="seq_")
    with seq.name_scope():
        seq.add(nn.Dense(3), nn.Conv2D(2, 3), nn.MaxPool2D(), nn.BatchNorm())
    assert [c.prefix for c in seq] == ["seq_dense0_", "seq_conv0_", "seq_pool0_",
                                       "seq_batchnorm0_"]
    first, second = nn.Dense(1), nn.Dense(1)
    assert int(second.prefix[5:-1]) == int(first.prefix[5:-1]) + 1


def test_hybrid_forward_receives_params_as_keyword_ndarrays():
    net = TwoLayer(prefix="m_")
    net.initialize(init.One())
    net.hybridize()
    x = nd.ones((3, 5))
    out = net(x)
    # relu(5 * ones(4)) -> 5; dense1: 4*5 = 20 per unit
    np.testing.assert_allclose(out.asnumpy(), np.full((3, 2), 20.0))
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    np.testing.assert_allclose(net.scale.grad().asnumpy(), [120.0])


def test_collect_params_select_and_setattr():
    net = TwoLayer(prefix="m_")
    weights = net.collect_params(".*weight")
    assert sorted(weights.keys()) == ["m_dense0_weight", "m_dense1_weight"]
    net.collect_params(".*bias").setattr("wd_mult", 0.0)
    assert net.out.bias.wd_mult == 0.0 and net.out.weight.wd_mult == 1.0


def test_forward_hooks_run_and_detach():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    seen = []
    pre = net.register_forward_pre_hook(lambda block, inputs: seen.append(("pre", inputs[0].shape)))
    post = net.register_forward_hook(lambda block, inputs, out: seen.append(("post", out.shape)))
    net(nd.ones((1, 3)))
    pre.detach()
    post.detach()
    net(nd.ones((1, 3)))
    assert seen == [("pre", (1, 3)), ("post", (1, 2))]


def _net():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(4, in_units=3, activation="relu"), nn.BatchNorm(in_channels=4),
                nn.Dense(2, in_units=4))
    return net


def test_save_and_load_parameters_round_trip(tmp_path):
    net = _net()
    net.initialize(init.Xavier())
    path = tmp_path / "net.params"
    net.save_parameters(str(path))
    with np.load(path, allow_pickle=False) as f:
        assert sorted(f.files) == ["0.bias", "0.weight", "1.beta", "1.gamma", "1.running_mean",
                                   "1.running_var", "2.bias", "2.weight"]
    other = _net()
    other.load_parameters(str(path), ctx=cpu())  # initializes from the file
    x = nd.random.uniform(shape=(5, 3))
    np.testing.assert_allclose(other(x).asnumpy(), net(x).asnumpy())
    buf = io.BytesIO()
    net.save_parameters(buf)
    buf.seek(0)
    third = _net()
    third.initialize()
    weight = third[0].weight.data()
    third.load_parameters(buf)
    assert third[0].weight.data() is weight  # loaded in place
    np.testing.assert_allclose(third(x).asnumpy(), net(x).asnumpy())


def test_load_parameters_reports_missing_extra_and_shape_problems(tmp_path):
    net = _net()
    net.initialize()
    path = str(tmp_path / "net.params")
    net.save_parameters(path)
    bigger = _net()
    with bigger.name_scope():
        bigger.add(nn.Dense(1, in_units=2))
    with pytest.raises(AssertionError, match=r"Parameter '3.weight' is missing"):
        bigger.load_parameters(path)
    bigger.load_parameters(path, allow_missing=True)
    smaller = nn.HybridSequential()
    smaller.add(nn.Dense(4, in_units=3, activation="relu"))
    with pytest.raises(ValueError, match=r"Parameter '1\.\w+' loaded from .* is not present"):
        smaller.load_parameters(path)
    smaller.load_parameters(path, ignore_extra=True)
    wrong = nn.HybridSequential()
    wrong.add(nn.Dense(4, in_units=7))
    with pytest.raises(ValueError, match="shape incompatible"):
        wrong.load_parameters(path, ignore_extra=True)


def test_load_parameters_refuses_pickled_or_corrupt_files(tmp_path):
    import pickle

    net = _net()
    evil = tmp_path / "evil.params"
    evil.write_bytes(pickle.dumps({"0.weight": np.ones((4, 3))}))
    with pytest.raises(ValueError, match="never loads"):
        net.load_parameters(str(evil))
    objects = tmp_path / "objects.params"
    with open(objects, "wb") as f:
        np.savez(f, **{"0.weight": np.array([object()], dtype=object)})
    with pytest.raises(ValueError, match="pickled"):
        net.load_parameters(str(objects))
    truncated = tmp_path / "truncated.params"
    good = io.BytesIO()
    net.initialize()
    net.save_parameters(good)
    truncated.write_bytes(good.getvalue()[:50])
    with pytest.raises(ValueError, match="cannot load parameters"):
        net.load_parameters(str(truncated))


def test_legacy_collect_params_save_loads_into_a_block(tmp_path):
    net = TwoLayer(prefix="m_")
    net.initialize()
    net(nd.ones((1, 3)))  # completes the deferred shapes
    path = str(tmp_path / "legacy.params")
    net.collect_params().save(path, strip_prefix="m_")
    other = TwoLayer(prefix="m_")
    other.load_parameters(path)
    np.testing.assert_array_equal(other.out.weight.data().asnumpy(),
                                  net.out.weight.data().asnumpy())


def test_shared_parameters_are_saved_once_with_deduplicate(tmp_path):
    first = nn.Dense(2, in_units=2, prefix="shared_")
    second = nn.Dense(2, in_units=2, params=first.params)
    assert second.weight is first.weight
    net = nn.Sequential()
    net.add(first, second)
    net.initialize()
    path = tmp_path / "dedup.params"
    net.save_parameters(str(path), deduplicate=True)
    with np.load(path) as f:
        assert sorted(f.files) == ["0.bias", "0.weight"]
    net.load_parameters(str(path))


def test_block_without_super_init_and_attribute_type_change():
    class Broken(gluon.Block):
        def __init__(self):
            self.layer = nn.Dense(1)

    with pytest.raises(RuntimeError, match="super"):
        Broken()
    net = TwoLayer()
    with pytest.raises(TypeError, match="Changing attribute type"):
        net.hidden = 3


def test_custom_block_deferred_shapes_are_inferred_from_operators():
    class Custom(gluon.HybridBlock):
        def __init__(self):
            super().__init__(prefix="custom_")
            with self.name_scope():
                self.w = self.params.get("w", shape=(4, 0), allow_deferred_init=True)
                self.b = self.params.get("b", shape=(0,), allow_deferred_init=True)
                self.gamma = self.params.get("gamma", shape=(0,), init="ones",
                                             allow_deferred_init=True)
                self.beta = self.params.get("beta", shape=(0,), init="zeros",
                                            allow_deferred_init=True)
                self.inner = nn.Dense(2)

        def hybrid_forward(self, F, x, w, b, gamma, beta):
            h = F.FullyConnected(x, w, b, num_hidden=4)
            return self.inner(F.LayerNorm(h, gamma, beta))

    block = Custom()
    block.initialize(init.One())
    with autograd.record():
        out = block(nd.ones((3, 2, 5)))
    out.backward()
    assert out.shape == (3, 2)
    assert block.w.shape == (4, 10) and block.b.shape == (4,) and block.gamma.shape == (4,)
    assert block.w.grad().shape == (4, 10) and block.inner.weight.shape == (2, 4)


def test_custom_block_with_uninferable_shape_explains_infer_shape():
    class Scale(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.w = self.params.get("w", shape=(0,), allow_deferred_init=True)

        def hybrid_forward(self, F, x, w):
            return x * w

    block = Scale()
    block.initialize()
    with pytest.raises(RuntimeError, match="infer_shape"):
        block(nd.ones((2, 3)))

    class DotScale(Scale):
        def hybrid_forward(self, F, x, w):
            return F.dot(x, w)

    dot = DotScale()
    dot.initialize()
    with pytest.raises(RuntimeError, match="Parameter '.*w' has unknown dims"):
        dot(nd.ones((2, 3)))

    class InferringScale(Scale):
        def infer_shape(self, x):
            self.w.shape = (x.shape[-1],)

    ok = InferringScale()
    ok.initialize(init.One())
    assert ok(nd.ones((2, 3))).shape == (2, 3)


def test_cast_summary_and_repr(capsys):
    net = _net()
    net.initialize()
    net.cast("float64")
    assert net[0].weight.data().dtype == np.float64
    assert net[1].running_var.data().dtype == np.float64
    assert net.summary(nd.ones((2, 3), dtype="float64")) is None  # MXNet prints it
    text = capsys.readouterr().out
    assert "Total params: 42" in text and "Dense-2" in text  # after its activation
    assert "Dense(3 -> 4, relu)" in repr(net)


def test_unregistered_blocks_in_nested_containers_warn_and_leave_no_garbage():
    class Holder(gluon.Block):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.registered = nn.Dense(2)
            self.nested = {"layers": [(nn.Dense(3),)]}  # an unregistered Block, two deep
            self.plain = [1, (2, {"x": self.registered})]  # only a registered one

        def forward(self, x):
            return self.registered(x)

    import gc
    import warnings

    holder = Holder()
    gc.collect()
    gc.disable()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            holder.collect_params()
        unreachable = gc.collect()
    finally:
        gc.enable()
    messages = [str(w.message) for w in caught]
    assert any('"Holder.nested" is an unregistered container' in m for m in messages)
    assert not any("Holder.plain" in m for m in messages)
    # the check made no reference cycles (a recursive closure per call used to)
    assert unreachable == 0
