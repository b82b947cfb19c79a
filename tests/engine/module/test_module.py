"""engine.module.Module: MXNet 1.9's Module API on symbols (numbers, logs, checkpoints)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import engine as mx
from engine.module.executor_group import split_sizes
from tests.oracle import needs_mxnet, run_mxnet


def _softmax_net(num_hidden=3):
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, name="fc", num_hidden=num_hidden)
    return mx.sym.SoftmaxOutput(fc, name="softmax")


def _data(n=40, d=5, k=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x[:, :k].argmax(1)).astype(np.float32)
    return x, y


def test_seed_004_snippet_runs_and_the_lr_follows_the_factor_schedule():
    data = mx.symbol.Variable("data")
    label = mx.symbol.Variable("softmax_label")
    fc = mx.symbol.FullyConnected(data, name="fc", num_hidden=10)
    loss = mx.symbol.SoftmaxOutput(fc, label, name="softmax")
    mod = mx.mod.Module(loss)
    mod.bind(data_shapes=[("data", (128, 20))], label_shapes=[("softmax_label", (128,))])
    mod.init_params(mx.initializer.Uniform(scale=1.0))
    lr_sch = mx.lr_scheduler.FactorScheduler(step=100, factor=0.9)
    mod.init_optimizer(optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.1), ("lr_scheduler", lr_sch)))
    x, y = _data(n=128 * 3, d=20, k=10)
    train = mx.io.NDArrayIter(x, y, batch_size=128, label_name="softmax_label")
    seen = []
    record = lambda param: seen.append(mod._optimizer.learning_rate)  # noqa: E731
    mod.fit(train, num_epoch=70, batch_end_callback=record)
    assert mod._optimizer.rescale_grad == pytest.approx(1 / 128)
    assert len(seen) == 210
    for step, lr in enumerate(seen, start=1):  # after update number `step`
        assert lr == pytest.approx(0.1 * 0.9 ** ((step - 1) // 100)), step


def test_one_sgd_step_equals_the_hand_computed_update():
    x, y = _data(n=4)
    mod = mx.mod.Module(_softmax_net())
    mod.bind(data_shapes=[("data", x.shape)], label_shapes=[("softmax_label", y.shape)])
    w0 = np.random.default_rng(1).normal(size=(3, 5)).astype(np.float32)
    b0 = np.array([0.1, -0.2, 0.3], np.float32)
    mod.init_params(arg_params={"fc_weight": mx.nd.array(w0), "fc_bias": mx.nd.array(b0)})
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5, "wd": 0.01})
    batch = mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(y)])
    mod.forward_backward(batch)
    mod.update()
    logits = x @ w0.T + b0
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), p, rtol=1e-5)
    g = p - np.eye(3)[y.astype(int)]  # SoftmaxOutput: no normalization, rescale 1/batch
    grad_w, grad_b = g.T @ x / 4, g.sum(0) / 4
    arg, _ = mod.get_params()
    np.testing.assert_allclose(arg["fc_weight"].asnumpy(), w0 - 0.5 * (grad_w + 0.01 * w0),
                               rtol=1e-5, atol=1e-6)
    # MXNet 1.x decays only *_weight / *_gamma parameters
    np.testing.assert_allclose(arg["fc_bias"].asnumpy(), b0 - 0.5 * grad_b,
                               rtol=1e-5, atol=1e-6)


def test_bind_rejects_mismatched_names_and_shapes():
    net = _softmax_net()
    with pytest.raises(ValueError, match="not found in symbol.list_arguments"):
        mx.mod.Module(net, data_names=("image",))
    mod = mx.mod.Module(net)
    with pytest.raises(ValueError, match="don't match names specified by data_names"):
        mod.bind(data_shapes=[("image", (4, 5))], label_shapes=[("softmax_label", (4,))])
    with pytest.raises(ValueError, match="don't match names specified by label_names"):
        mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("label", (4,))])
    with pytest.raises(ValueError, match="softmax_label.*shape"):
        mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (5,))])
    assert not mod.binded
    with pytest.raises(RuntimeError, match="bind"):
        mod.init_params()
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    with pytest.raises(RuntimeError, match="fc_bias is not presented"):
        mod.init_params(arg_params={"fc_weight": mx.nd.ones((3, 5))})
    with pytest.raises(ValueError, match="fc_weight.*shape"):
        mod.init_params(arg_params={"fc_weight": mx.nd.ones((3, 4)), "fc_bias": mx.nd.ones(3)})


def test_fit_logs_mxnet_epoch_lines_and_score_survives_a_speedometer(caplog):
    caplog.set_level(logging.INFO)
    x, y = _data(n=64)
    train = mx.io.NDArrayIter(x, y, batch_size=8, label_name="softmax_label")
    val = mx.io.NDArrayIter(x[:40], y[:40], batch_size=8, label_name="softmax_label")
    mx.random.seed(0)
    mod = mx.mod.Module(_softmax_net())
    mod.fit(train, eval_data=val, num_epoch=2, optimizer_params={"learning_rate": 0.5},
            eval_batch_end_callback=mx.callback.Speedometer(8, frequent=2))
    messages = [r.getMessage() for r in caplog.records]
    for epoch in (0, 1):
        assert any(m.startswith(f"Epoch[{epoch}] Train-accuracy=") for m in messages)
        assert any(m.startswith(f"Epoch[{epoch}] Time cost=") for m in messages)
        assert any(m.startswith(f"Epoch[{epoch}] Validation-accuracy=") for m in messages)
    # the seed-002 trap: scoring with a Speedometer must give the whole-set figure
    with_speedometer = mod.score(val, "acc", batch_end_callback=mx.callback.Speedometer(8, 2))
    plain = mod.score(val, "acc")
    predicted = mod.predict(val).asnumpy().argmax(1)
    assert with_speedometer == plain
    assert plain[0][1] == pytest.approx((predicted == y[:40]).mean())


def test_checkpoint_loads_back_with_identical_predictions(tmp_path):
    x, y = _data(n=48)
    train = mx.io.NDArrayIter(x, y, batch_size=16, label_name="softmax_label")
    mx.random.seed(3)
    data = mx.sym.Variable("data")
    h = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
    h = mx.sym.Activation(mx.sym.BatchNorm(h, fix_gamma=False, name="bn"), act_type="relu")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=3, name="fc2"),
                               name="softmax")
    mod = mx.mod.Module(net)
    prefix = str(tmp_path / "model")
    mod.fit(train, num_epoch=2, optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            epoch_end_callback=mx.callback.do_checkpoint(prefix))
    before = mod.predict(train).asnumpy()
    from_callback = mx.mod.Module.load(prefix, 2)  # the file do_checkpoint wrote
    from_callback.bind(data_shapes=train.provide_data, for_training=False)
    np.testing.assert_array_equal(from_callback.predict(train).asnumpy(), before)
    prefix = str(tmp_path / "with-states")
    mod.save_checkpoint(prefix, 2, save_optimizer_states=True)
    _, aux = mod.get_params()
    assert set(aux) == {"bn_moving_mean", "bn_moving_var"}
    assert not np.allclose(aux["bn_moving_var"].asnumpy(), 1.0)  # stats were updated

    loaded = mx.mod.Module.load(prefix, 2, load_optimizer_states=True)
    loaded.bind(data_shapes=train.provide_data, label_shapes=train.provide_label)
    np.testing.assert_array_equal(loaded.predict(train).asnumpy(), before)
    loaded.init_optimizer(optimizer="sgd",
                          optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    # momentum states came back: one more step matches the original module's next step
    train.reset()
    batch = next(iter(train))
    for m in (mod, loaded):
        m.forward_backward(batch)
        m.update()
    np.testing.assert_allclose(loaded.get_params()[0]["fc2_weight"].asnumpy(),
                               mod.get_params()[0]["fc2_weight"].asnumpy(),
                               rtol=1e-6)
    epoch1 = mx.mod.Module.load(str(tmp_path / "model"), 1)
    epoch1.bind(data_shapes=train.provide_data, for_training=False)
    assert epoch1.predict(train).shape == (48, 3)


def test_predict_without_labels_and_iter_predict_drops_padding():
    x, y = _data(n=10)
    mod = mx.mod.Module(_softmax_net())
    mod.bind(data_shapes=[("data", (4, 5))], for_training=False)
    mod.init_params()
    it = mx.io.NDArrayIter(x, batch_size=4)
    sizes = [out[0].shape[0] for out, _, _ in mod.iter_predict(it)]
    assert sizes == [4, 4, 2]
    assert mod.predict(x).shape == (10, 3)
    with pytest.raises(RuntimeError, match="for_training"):
        mod.backward()
    trainable = mx.mod.Module(_softmax_net())
    trainable.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    trainable.init_params()
    with pytest.raises(ValueError, match="needs labels"):
        trainable.forward(mx.io.DataBatch(data=[mx.nd.ones((4, 5))]), is_train=True)


def test_linear_regression_module_learns_a_line():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    y = (x @ np.array([2.0, -3.0]) + 1.0).astype(np.float32)
    data, label = mx.sym.var("data"), mx.sym.var("lin_label")
    net = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(data, num_hidden=1), label,
                                        name="lin")
    mod = mx.mod.Module(net, label_names=("lin_label",))
    it = mx.io.NDArrayIter(x, y, batch_size=16, label_name="lin_label")
    mod.fit(it, num_epoch=40, eval_metric="mse", optimizer_params={"learning_rate": 0.1},
            initializer=mx.init.Zero())
    assert mod.score(it, "mse")[0][1] < 1e-4


@needs_mxnet
def test_module_fit_matches_mxnet_1_9():
    x, y = _data(n=48, d=6, k=3, seed=5)
    rng = np.random.default_rng(9)
    w1 = rng.normal(scale=0.3, size=(8, 6)).astype(np.float32)
    w2 = rng.normal(scale=0.3, size=(3, 8)).astype(np.float32)
    inputs = {"x": x, "y": y, "w1": w1, "w2": w2}
    code = (
        "data = mx.sym.Variable('data')\n"
        "h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name='fc1'),"
        " act_type='relu')\n"
        "net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=3, name='fc2'),"
        " name='softmax')\n"
        "it = mx.io.NDArrayIter(inputs['x'], inputs['y'], batch_size=12,"
        " label_name='softmax_label')\n"
        "mod = mx.mod.Module(net)\n"
        "args = {'fc1_weight': nd.array(inputs['w1']), 'fc1_bias': nd.zeros(8),"
        " 'fc2_weight': nd.array(inputs['w2']), 'fc2_bias': nd.zeros(3)}\n"
        "sch = mx.lr_scheduler.FactorScheduler(step=5, factor=0.5)\n"
        "mod.fit(it, num_epoch=3, arg_params=args, optimizer='sgd', optimizer_params="
        "{'learning_rate': 0.2, 'momentum': 0.9, 'wd': 0.01, 'lr_scheduler': sch})\n"
        "arg, _ = mod.get_params()\n"
        "for k, v in arg.items():\n"
        "    outputs[k] = v\n"
        "result['score'] = mod.score(it, 'ce')[0][1]\n"
    )
    expected = run_mxnet(code, inputs)
    data = mx.sym.Variable("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name="fc1"),
                          act_type="relu")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=3, name="fc2"),
                               name="softmax")
    it = mx.io.NDArrayIter(x, y, batch_size=12, label_name="softmax_label")
    mod = mx.mod.Module(net)
    args = {"fc1_weight": mx.nd.array(w1), "fc1_bias": mx.nd.zeros(8),
            "fc2_weight": mx.nd.array(w2), "fc2_bias": mx.nd.zeros(3)}
    sch = mx.lr_scheduler.FactorScheduler(step=5, factor=0.5)
    mod.fit(it, num_epoch=3, arg_params=args, optimizer="sgd",
            optimizer_params={"learning_rate": 0.2, "momentum": 0.9, "wd": 0.01,
                              "lr_scheduler": sch})
    arg, _ = mod.get_params()
    for name in ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"):
        np.testing.assert_allclose(arg[name].asnumpy(), expected[name], rtol=1e-4, atol=1e-5)
    assert mod.score(it, "ce")[0][1] == pytest.approx(expected.json["score"], rel=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(mx.num_gpus() == 0, reason="needs cupy and a CUDA GPU")
def test_module_fit_on_gpu_matches_cpu():
    x, y = _data(n=48)
    results = []
    for ctx in (mx.cpu(), mx.gpu(0)):
        it = mx.io.NDArrayIter(x, y, batch_size=12, label_name="softmax_label")
        mod = mx.mod.Module(_softmax_net(), context=ctx)
        w = np.full((3, 5), 0.1, np.float32)
        mod.fit(it, num_epoch=2, arg_params={"fc_weight": mx.nd.array(w),
                                             "fc_bias": mx.nd.zeros(3)},
                optimizer_params={"learning_rate": 0.3, "momentum": 0.9})
        results.append(mod.get_params()[0]["fc_weight"].asnumpy())
        assert mod.score(it, "acc")[0][1] > 0.5
    np.testing.assert_allclose(results[1], results[0], rtol=1e-4, atol=1e-5)


def test_two_contexts_split_batches_and_train_like_one(tmp_path):
    x, y = _data(n=48)
    params = {}
    for contexts in ([mx.cpu(0)], [mx.cpu(0), mx.cpu(1)]):
        it = mx.io.NDArrayIter(x, y, batch_size=12, label_name="softmax_label")
        mod = mx.mod.Module(_softmax_net(), context=contexts)
        w = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)
        mod.fit(it, num_epoch=2, arg_params={"fc_weight": mx.nd.array(w),
                                             "fc_bias": mx.nd.zeros(3)},
                optimizer_params={"learning_rate": 0.3, "momentum": 0.9, "wd": 0.01})
        params[len(contexts)] = mod.get_params()[0]["fc_weight"].asnumpy()
        assert mod.predict(it).shape == (48, 3)
        if len(contexts) == 2:
            copies = [p["fc_weight"] for p in mod._exec_group.params]
            assert [c.context for c in copies] == contexts
            np.testing.assert_array_equal(copies[0].asnumpy(), copies[1].asnumpy())
            mod.save_checkpoint(str(tmp_path / "two"), 1, save_optimizer_states=True)
            mod.load_optimizer_states(str(tmp_path / "two-0001.states"))
    np.testing.assert_allclose(params[2], params[1], rtol=1e-5, atol=1e-6)


def test_batches_split_by_workload_like_mxnet():
    assert split_sizes(12, [1, 1]) == [6, 6]
    assert split_sizes(5, [1, 1]) == [2, 3]
    assert split_sizes(10, [3, 1]) == [8, 2]
    with pytest.raises(ValueError, match="too small to split"):
        split_sizes(1, [1, 1])


def test_fit_with_a_monitor_logs_each_interval(caplog):
    x, y = _data(n=32, d=5, k=3)
    train = mx.io.NDArrayIter(x, y, batch_size=8, label_name="softmax_label")
    mod = mx.mod.Module(_softmax_net())
    mon = mx.mon.Monitor(2, pattern="fc_.*")
    with caplog.at_level(logging.INFO):
        mod.fit(train, num_epoch=1, monitor=mon, optimizer_params={"learning_rate": 0.1})
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Batch:")]
    # batches 0 and 2 of 4 are monitored: fc's output, the gradients its backward sent to
    # its three inputs (as MXNet reports them), then its weight and bias
    per_batch = ["fc_output"] + [f"fc_backward_output{i}" for i in range(3)] + \
        ["fc_weight", "fc_bias"]
    assert [line.split()[2] for line in lines] == per_batch * 2
    assert [int(line.split()[1]) for line in lines] == [1] * 6 + [3] * 6
