"""engine.gluon.estimator: the Gluon fit loop, its events, stopping, resuming, handlers."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import engine as mx
from engine import gluon
from engine.gluon import nn
from engine.gluon.estimator import (
    BatchBegin,
    BatchEnd,
    CheckpointHandler,
    EarlyStoppingHandler,
    EpochBegin,
    EpochEnd,
    Estimator,
    LoggingHandler,
    TrainBegin,
    TrainEnd,
)
from tests.oracle import needs_mxnet, run_mxnet


def _data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = x[:, :3].argmax(1).astype(np.float32)
    return x, y


def _loader(batch_size=12, shuffle=False, seed=None, n=48):
    x, y = _data(n)
    return gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=batch_size,
                                 shuffle=shuffle, seed=seed)


def _estimator(ctx=None, seed=0, **kwargs):
    mx.random.seed(seed)
    # explicit prefixes leave Gluon's global name counters alone for other test modules
    net = nn.HybridSequential(prefix="estimator_net_")
    with net.name_scope():
        net.add(nn.Dense(8, activation="relu"), nn.Dense(3))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.1, "momentum": 0.9})
    return Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer,
                     context=ctx, **kwargs)


def _weights(est, ctx=None):
    """Parameter values in order (names differ between nets: Gluon numbers its prefixes)."""
    return [p.data(ctx).asnumpy() for p in est.net.collect_params().values()]


class Recorder(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchBegin, BatchEnd):
    """Records the events; ``stop_at_step`` ends the epoch at that step (batch_end True) and
    training with it (epoch_end True), the way MXNet's StoppingHandler stops."""

    def __init__(self, stop_at_step=None, stop_at_epoch=None, end_epoch_only=False):
        self.events = []
        self.stop_at_step, self.stop_at_epoch = stop_at_step, stop_at_epoch
        self.end_epoch_only = end_epoch_only
        self.stopped = False

    def train_begin(self, estimator, *args, **kwargs):
        self.events.append(("train_begin",))

    def epoch_begin(self, estimator, *args, **kwargs):
        self.events.append(("epoch_begin", estimator.current_epoch))

    def batch_begin(self, estimator, *args, **kwargs):
        assert "batch" in kwargs
        self.events.append(("batch_begin", estimator.current_epoch, estimator.current_batch))

    def batch_end(self, estimator, *args, **kwargs):
        assert {"batch", "pred", "label", "loss"} <= set(kwargs)
        assert estimator.resume_position == (estimator.current_epoch,
                                             estimator.current_batch + 1)
        self.events.append(("batch_end", estimator.current_batch, estimator.global_step))
        self.stopped = estimator.global_step == self.stop_at_step
        return self.stopped

    def epoch_end(self, estimator, *args, **kwargs):
        # the next epoch, or into this one when a handler ended it early
        interrupted = (estimator.current_epoch, estimator.current_batch + 1)
        assert estimator.resume_position in ((estimator.current_epoch + 1, 0), interrupted)
        if self.stopped:
            assert estimator.resume_position == interrupted
        self.events.append(("epoch_end", estimator.current_epoch))
        stop = estimator.current_epoch == self.stop_at_epoch or (
            self.stopped and not self.end_epoch_only)
        self.stopped = False
        return stop

    def train_end(self, estimator, *args, **kwargs):
        self.events.append(("train_end",))


def test_events_come_in_order_with_epoch_batch_and_global_step():
    est = _estimator()
    rec = Recorder()
    est.fit(_loader(), epochs=2, event_handlers=[rec])
    expected = [("train_begin",)]
    step = 0
    for epoch in range(2):
        expected.append(("epoch_begin", epoch))
        for batch in range(4):
            step += 1
            expected += [("batch_begin", epoch, batch), ("batch_end", batch, step)]
        expected.append(("epoch_end", epoch))
    expected.append(("train_end",))
    assert rec.events == expected
    assert est.trainer.optimizer.num_update == 8


def test_batch_end_true_ends_the_epoch_and_epoch_end_true_ends_training_as_in_mxnet():
    est = _estimator()
    rec = Recorder(stop_at_step=6, end_epoch_only=True)  # epoch 1 ends after its 2nd batch
    est.fit(_loader(), epochs=3, event_handlers=[rec])
    names = [e[0] for e in rec.events]
    assert names.count("batch_end") == 4 + 2 + 4
    assert names.count("epoch_end") == 3  # the interrupted epoch ends too
    assert names[-1] == "train_end"
    assert est.trainer.optimizer.num_update == 10
    rec = Recorder(stop_at_step=6)  # and training with it
    _estimator().fit(_loader(), epochs=5, event_handlers=[rec])
    assert [e[0] for e in rec.events].count("batch_end") == 6
    rec = Recorder(stop_at_epoch=1)
    _estimator().fit(_loader(), epochs=5, event_handlers=[rec])
    assert [e for e in rec.events if e[0] == "epoch_end"] == [("epoch_end", 0), ("epoch_end", 1)]
    rec = Recorder()
    _estimator().fit(_loader(), batches=5, event_handlers=[rec])
    assert [e[0] for e in rec.events].count("batch_end") == 5
    with pytest.raises(ValueError, match="epochs or batches"):
        _estimator().fit(_loader())
    with pytest.raises(ValueError, match="epochs or batches"):
        _estimator().fit(_loader(), epochs=1, batches=2)
    with pytest.raises(ValueError, match="DataLoader"):  # as MXNet: no DataIter, no list
        x, y = _data()
        _estimator().fit(mx.io.NDArrayIter(x, y, batch_size=12), epochs=1)


class EpochSpy(gluon.data.DataLoader):
    """A DataLoader recording set_epoch calls."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.epochs = []

    def set_epoch(self, epoch):
        self.epochs.append(epoch)
        super().set_epoch(epoch)


def test_resuming_mid_epoch_matches_an_uninterrupted_run(tmp_path):
    straight = _estimator()
    straight.fit(_loader(shuffle=True, seed=5), epochs=3)

    first = _estimator()
    first.fit(_loader(shuffle=True, seed=5), epochs=3, event_handlers=[Recorder(stop_at_step=6)])
    assert first.global_step == 6 and first.current_epoch == 1 and first.current_batch == 1
    assert first.resume_position == (1, 2)
    first.net.save_parameters(str(tmp_path / "p.params"))
    first.trainer.save_states(str(tmp_path / "t.states"))

    resumed = _estimator(seed=99)  # different init: everything must come from the checkpoint
    resumed.net.load_parameters(str(tmp_path / "p.params"))
    resumed.trainer.load_states(str(tmp_path / "t.states"))
    x, y = _data()
    spy = EpochSpy(gluon.data.ArrayDataset(x, y), batch_size=12, shuffle=True, seed=5)
    rec = Recorder()
    resumed.fit(spy, epochs=3, begin_epoch=1, begin_batch=2, event_handlers=[rec])
    assert spy.epochs == [1, 2]
    trained = [e[1:] for e in rec.events if e[0] == "batch_begin"]
    assert trained == [(1, 2), (1, 3)] + [(2, b) for b in range(4)]
    assert resumed.global_step == 12
    for got, want in zip(_weights(resumed), _weights(straight), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_default_metrics_and_evaluate():
    est = _estimator()
    assert [m.name for m in est.train_metrics] == ["training accuracy",
                                                   "training softmaxcrossentropyloss"]
    assert [m.name for m in est.val_metrics] == ["validation accuracy",
                                                 "validation softmaxcrossentropyloss"]
    val = _loader()
    est.fit(_loader(), val_data=val, epochs=3)
    values = dict(est.evaluate(val))
    x, y = _data()
    pred = est.net(mx.nd.array(x)).asnumpy().argmax(1)
    assert values["validation accuracy"] == pytest.approx((pred == y).mean())
    assert values["validation softmaxcrossentropyloss"] > 0
    assert est.train_metrics[0].get()[1] > 0.3
    for bad in ("acc", ["acc", "ce"], [3]):  # as MXNet: metric objects only
        with pytest.raises(ValueError, match="EvalMetric"):
            _estimator(train_metrics=bad)


def test_logging_handler_writes_epoch_lines_to_stdout_by_default(capsys):
    est = _estimator()
    est.fit(_loader(), epochs=1, event_handlers=[LoggingHandler(log_interval=2,
                                                                metrics=est.train_metrics)])
    messages = capsys.readouterr().out.splitlines()
    assert any(m.startswith("Training begin: using optimizer SGD") for m in messages)
    assert any(m.startswith("[Epoch 0][Batch 2][Samples 36]") for m in messages)
    assert any(m.startswith("[Epoch 0] Finished in") and "training accuracy" in m
               for m in messages)
    assert any(m.startswith("Train finished") for m in messages)


def test_estimator_logger_takes_extra_handlers_as_mxnets_does():
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    est = _estimator()
    est.logger.addHandler(Collect())
    est.fit(_loader(), epochs=1)
    assert est.logger.name == "Estimator" and est.logger.level == logging.INFO
    assert any(m.startswith("[Epoch 0] Finished in") for m in records)


def test_checkpoint_handler_keeps_the_last_files_and_resumes(tmp_path):
    est = _estimator()
    handler = CheckpointHandler(str(tmp_path), model_prefix="net", batch_period=2,
                                epoch_period=None, max_checkpoints=2)
    est.fit(_loader(), epochs=2, event_handlers=[handler])
    files = sorted(os.listdir(tmp_path))
    # MXNet's names: the handler's epoch, and its 0-based count of batches over the run
    assert files == ["net-epoch1batch5.params", "net-epoch1batch5.states",
                     "net-epoch1batch7.params", "net-epoch1batch7.states"]
    resumed = _estimator(seed=7)
    resume = CheckpointHandler(str(tmp_path), model_prefix="net", epoch_period=None,
                               resume_from_checkpoint=True)
    resume.train_begin(resumed)
    for got, want in zip(_weights(resumed), _weights(est), strict=True):
        np.testing.assert_array_equal(got, want)


def test_save_best_and_early_stopping(tmp_path):
    est = _estimator()
    acc = est.val_metrics[0]
    with pytest.warns(UserWarning, match="`greater` operator"):  # 'auto' is max, as MXNet
        best = CheckpointHandler(str(tmp_path), monitor=acc, save_best=True)
    assert best.mode == "max"
    stopper = EarlyStoppingHandler(monitor=acc, patience=1, mode="max")
    val = _loader()
    est.fit(_loader(), val_data=val, epochs=50, event_handlers=[best, stopper])
    assert os.path.exists(tmp_path / "model-best.params")
    assert stopper.stop_training and est.current_epoch < 49


def test_two_contexts_split_the_batch_and_match_one_context():
    one = _estimator()
    one.fit(_loader(), epochs=2)
    two = _estimator(ctx=[mx.cpu(0), mx.cpu(1)])
    two.fit(_loader(), epochs=2)
    for got, want in zip(_weights(two, mx.cpu(1)), _weights(one), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fit_convenience_builds_and_trains():
    mx.random.seed(0)
    net = nn.Dense(3, prefix="estimator_dense_")
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    rec = Recorder()
    est = gluon.estimator.fit(net, _loader(), _loader(), gluon.loss.SoftmaxCrossEntropyLoss(),
                              trainer, epochs=2, metrics=["acc", "loss"], callbacks=[rec])
    assert [m.name for m in est.train_metrics] == ["training accuracy",
                                                   "training loss"]
    assert rec.events[-1] == ("train_end",)
    assert est.val_metrics[0].get()[1] > 0.5


def test_without_a_context_an_initialized_net_trains_where_its_parameters_are():
    # cpu(1) stands for "not the default device": on a GPU machine the default is gpu(0),
    # and a net set up on the CPU with its Trainer must not be sent there
    net = nn.Dense(3, in_units=6, prefix="estimator_where_")
    net.initialize(ctx=mx.cpu(1))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer)
    assert est.context == [mx.cpu(1)]
    est.fit(_loader(), epochs=1)
    assert net.weight.list_ctx() == [mx.cpu(1)]
    with pytest.warns(UserWarning, match="No trainer specified"):
        fresh = Estimator(nn.Dense(3, in_units=6), gluon.loss.SoftmaxCrossEntropyLoss())
    assert fresh.context == ([mx.gpu(0)] if mx.num_gpus() else [mx.cpu()])


@pytest.mark.gpu
@pytest.mark.skipif(mx.num_gpus() == 0, reason="needs cupy and a CUDA GPU")
def test_estimator_on_gpu_matches_cpu():
    cpu_est = _estimator(ctx=mx.cpu())
    cpu_est.fit(_loader(), epochs=2)
    gpu_est = _estimator(ctx=mx.gpu(0))
    gpu_est.fit(_loader(), epochs=2)
    for got, want in zip(_weights(gpu_est), _weights(cpu_est), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert gpu_est.train_metrics[0].get()[1] == pytest.approx(cpu_est.train_metrics[0].get()[1])


@needs_mxnet
def test_estimator_fit_matches_mxnet_1_9_estimator():
    x, y = _data()
    rng = np.random.default_rng(4)
    w1 = rng.normal(scale=0.3, size=(8, 6)).astype(np.float32)
    w2 = rng.normal(scale=0.3, size=(3, 8)).astype(np.float32)
    inputs = {"x": x, "y": y, "w1": w1, "w2": w2}
    code = (
        "from mxnet.gluon.contrib.estimator import Estimator\n"
        "import logging\n"
        "logging.disable(logging.WARNING)\n"
        "net = gluon.nn.HybridSequential()\n"
        "net.add(gluon.nn.Dense(8, activation='relu', in_units=6), gluon.nn.Dense(3, in_units=8))\n"
        "net.initialize()\n"
        "net[0].weight.set_data(nd.array(inputs['w1'])); net[0].bias.set_data(nd.zeros(8))\n"
        "net[1].weight.set_data(nd.array(inputs['w2'])); net[1].bias.set_data(nd.zeros(3))\n"
        "trainer = gluon.Trainer(net.collect_params(), 'sgd',"
        " {'learning_rate': 0.1, 'momentum': 0.9, 'wd': 0.001})\n"
        "data = gluon.data.DataLoader(gluon.data.ArrayDataset(nd.array(inputs['x']),"
        " nd.array(inputs['y'])), batch_size=12)\n"
        "est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer,"
        " train_metrics=[mx.metric.Accuracy()], context=mx.cpu())\n"
        "est.fit(data, val_data=data, epochs=3)\n"
        "outputs['w1'] = net[0].weight.data(); outputs['w2'] = net[1].weight.data()\n"
        "result['val'] = [[m.name, float(m.get()[1])] for m in est.val_metrics]\n"
    )
    expected = run_mxnet(code, inputs)
    net = nn.HybridSequential(prefix="estimator_oracle_")
    with net.name_scope():
        net.add(nn.Dense(8, activation="relu", in_units=6), nn.Dense(3, in_units=8))
    net.initialize()
    net[0].weight.set_data(mx.nd.array(w1))
    net[0].bias.set_data(mx.nd.zeros(8))
    net[1].weight.set_data(mx.nd.array(w2))
    net[1].bias.set_data(mx.nd.zeros(3))
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.001})
    data = _loader()
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer,
                    train_metrics=[mx.metric.Accuracy()], context=mx.cpu())
    est.fit(data, val_data=data, epochs=3)
    np.testing.assert_allclose(net[0].weight.data().asnumpy(), expected["w1"], rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(net[1].weight.data().asnumpy(), expected["w2"], rtol=1e-4,
                               atol=1e-6)
    ours = [[m.name, m.get()[1]] for m in est.val_metrics]
    assert [n for n, _ in ours] == [n for n, _ in expected.json["val"]]
    for (_, got), (_, want) in zip(ours, expected.json["val"], strict=True):
        assert got == pytest.approx(want, rel=1e-4)
