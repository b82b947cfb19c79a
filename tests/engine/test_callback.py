"""engine.callback: Speedometer's log lines and resets, checkpoints, metric logging."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import engine as mx
from engine.callback import BatchEndParam


def _param(nbatch, metric, epoch=0):
    return BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=metric, locals=None)


def _accuracy_with(correct, total):
    acc = mx.metric.Accuracy()
    acc.sum_metric, acc.num_inst = correct, total
    acc.global_sum_metric, acc.global_num_inst = correct, total
    return acc


def test_speedometer_logs_mxnet_lines_and_resets_only_local_stats(caplog):
    caplog.set_level(logging.INFO)
    speed = mx.callback.Speedometer(batch_size=10, frequent=2)
    acc = _accuracy_with(3, 4)
    speed(_param(0, acc))  # first call only starts the clock
    assert caplog.records == []
    speed(_param(1, acc))
    assert caplog.records == []
    speed(_param(2, acc, epoch=3))
    (record,) = caplog.records
    assert record.msg == "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec\t%s=%f"
    assert record.getMessage().startswith("Epoch[3] Batch [0-2]\tSpeed: ")
    assert record.getMessage().endswith("samples/sec\taccuracy=0.750000")
    assert np.isnan(acc.get()[1])  # local window reset
    assert acc.get_global()[1] == 0.75  # the epoch figure survives


def test_speedometer_without_auto_reset_and_without_metric(caplog):
    caplog.set_level(logging.INFO)
    speed = mx.callback.Speedometer(batch_size=10, frequent=1, auto_reset=False)
    acc = _accuracy_with(1, 2)
    speed(_param(0, acc))
    speed(_param(1, acc))
    assert caplog.records[-1].getMessage().startswith("Epoch[0] Batch [0-1]\tSpeed")
    assert acc.get()[1] == 0.5
    bare = mx.callback.Speedometer(batch_size=10, frequent=1)
    bare(_param(0, None))
    bare(_param(1, None, epoch=2))
    assert caplog.records[-1].getMessage().startswith("Iter[2] Batch [1]\tSpeed: ")


def test_speedometer_restarts_its_clock_each_epoch(caplog):
    caplog.set_level(logging.INFO)
    speed = mx.callback.Speedometer(batch_size=1, frequent=1)
    for nbatch in range(3):
        speed(_param(nbatch, None))
    logged = len(caplog.records)
    speed(_param(0, None, epoch=1))  # a new epoch: only restarts the clock
    assert len(caplog.records) == logged


def test_log_train_metric_and_validation_callback(caplog):
    caplog.set_level(logging.INFO)
    acc = _accuracy_with(1, 4)
    mx.callback.log_train_metric(period=2, auto_reset=True)(_param(4, acc, epoch=1))
    assert caplog.records[-1].getMessage() == "Iter[1] Batch[4] Train-accuracy=0.250000"
    assert np.isnan(acc.get()[1])
    evaluated = _accuracy_with(1, 2)
    evaluated.reset_local()  # e.g. by a Speedometer during evaluation
    mx.callback.LogValidationMetricsCallback()(_param(0, evaluated, epoch=5))
    assert caplog.records[-1].getMessage() == "Epoch[5] Validation-accuracy=0.500000"
    mx.callback.ProgressBar(total=4, length=8)(_param(2, None))
    assert caplog.records[-1].getMessage().startswith("[====----] 50%")


def test_do_checkpoint_saves_every_period_with_mxnet_names(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    prefix = str(tmp_path / "net")
    sym = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2,
                                                     name="fc"), name="softmax")
    arg = {"fc_weight": mx.nd.ones((2, 3)), "fc_bias": mx.nd.zeros((2,))}
    callback = mx.callback.do_checkpoint(prefix, period=2)
    callback(0, sym, arg, {})
    assert not (tmp_path / "net-0001.params").exists()
    callback(1, sym, arg, {})
    assert (tmp_path / "net-symbol.json").exists()
    assert (tmp_path / "net-0002.params").exists()
    assert caplog.records[-1].getMessage() == f'Saved checkpoint to "{prefix}-0002.params"'
    saved = mx.nd.load(str(tmp_path / "net-0002.params"))  # MXNet's own binary format
    assert {"arg:fc_weight", "arg:fc_bias"} <= set(saved)
    sym2, arg2, aux2 = mx.model.load_checkpoint(prefix, 2)
    assert sym2.list_arguments() == sym.list_arguments()
    np.testing.assert_array_equal(arg2["fc_weight"].asnumpy(), np.ones((2, 3)))
    assert aux2 == {}


def test_corrupt_or_foreign_checkpoints_raise_clear_errors(tmp_path):
    bad = tmp_path / "bad-0001.params"
    bad.write_bytes(b"not a zip archive")
    with pytest.raises(mx.model.CheckpointError, match="corrupt"):
        mx.model.load_params(str(tmp_path / "bad"), 1)
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2),
                               name="softmax")
    net.save(str(tmp_path / "bad-symbol.json"))
    with pytest.raises(mx.model.CheckpointError, match="bad-0001.params"):
        mx.mod.Module.load(str(tmp_path / "bad"), 1)
    foreign = tmp_path / "foreign-0001.params"
    with open(foreign, "wb") as handle:
        np.savez(handle, weights=np.ones(2))
    with pytest.raises(mx.model.CheckpointError, match="arg:<name>"):
        mx.model.load_params(str(tmp_path / "foreign"), 1)
    with pytest.raises(FileNotFoundError):
        mx.model.load_params(str(tmp_path / "missing"), 1)
    (tmp_path / "sym-symbol.json").write_text("{not json")
    with pytest.raises(ValueError, match="sym-symbol.json"):
        mx.sym.load(str(tmp_path / "sym-symbol.json"))
