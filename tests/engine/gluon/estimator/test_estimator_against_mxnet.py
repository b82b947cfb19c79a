"""The Estimator's rules against MXNet 1.9.1's ``gluon.contrib.estimator``: what it refuses
(DataIters, lists, both or neither of epochs/batches, bad loss/trainer/metrics/context/
handlers), its warnings, its default handlers and their order, what it logs, the files its
CheckpointHandler writes, and the batch processor API.

Each case is MXNet source run unchanged in MXNet (one process) and in the engine.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.gluon.differential import assert_same_results, oracle_fixture
from tests.oracle import needs_mxnet

_RNG = np.random.RandomState(5)
INPUTS = {"x": _RNG.uniform(-1, 1, (12, 3)).astype(np.float32),
          "y": (np.arange(12) % 2).astype(np.float32),
          "w": _RNG.uniform(-0.5, 0.5, (2, 3)).astype(np.float32)}

_SETUP = """
import warnings, logging, re, os, tempfile
try:
    import mxnet.gluon.contrib.estimator  # MXNet does not load it with mxnet.gluon
except ImportError:
    pass  # the engine loads it with engine.gluon
E = mx.gluon.contrib.estimator
H = E.event_handler
gluon = mx.gluon
def loader(batch_size=4):
    data = gluon.data.ArrayDataset(mx.nd.array(inputs['x']), mx.nd.array(inputs['y']))
    return gluon.data.DataLoader(data, batch_size=batch_size)
def net_and_trainer():
    net = gluon.nn.Dense(2, in_units=3, prefix='est_')
    net.initialize()
    net.weight.set_data(mx.nd.array(inputs['w']))
    net.bias.set_data(mx.nd.zeros(2))
    return net, gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.5})
def estimator(**kwargs):
    net, trainer = net_and_trainer()
    return E.Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer,
                       context=mx.cpu(), **kwargs)
def error_of(fn):
    try:
        fn()
    except Exception as err:
        return type(err).__name__
    return None
"""

CASES = {
    "refusals": _SETUP + """
est = estimator()
it = mx.io.NDArrayIter(inputs['x'], inputs['y'], batch_size=4)
net, trainer = net_and_trainer()
result['errors'] = {
    'dataiter': error_of(lambda: est.fit(it, epochs=1)),
    'list': error_of(lambda: est.fit([mx.nd.ones((4, 3))], epochs=1)),
    'val_dataiter': error_of(lambda: est.evaluate(it)),
    'both': error_of(lambda: est.fit(loader(), epochs=1, batches=2)),
    'neither': error_of(lambda: est.fit(loader())),
    'loss': error_of(lambda: E.Estimator(net, 'mse', trainer=trainer)),
    'trainer': error_of(lambda: E.Estimator(net, gluon.loss.L2Loss(), trainer='sgd')),
    'metric': error_of(lambda: E.Estimator(net, gluon.loss.L2Loss(), train_metrics='acc',
                                           trainer=trainer)),
    'context': error_of(lambda: E.Estimator(net, gluon.loss.L2Loss(), trainer=trainer,
                                            context='cpu')),
    'handlers': error_of(lambda: est.fit(loader(), epochs=1, event_handlers=['log'])),
    'foreign_metric': error_of(lambda: est.fit(loader(), epochs=1, event_handlers=[
        H.LoggingHandler(metrics=[mx.metric.RMSE('other')])])),
    'save_best_no_monitor': error_of(lambda: H.CheckpointHandler(tempfile.mkdtemp(),
                                                                 save_best=True)),
    'composite_monitor': error_of(lambda: H.EarlyStoppingHandler(
        mx.metric.CompositeEvalMetric(['acc']))),
    'processor': error_of(lambda: E.Estimator(net, gluon.loss.L2Loss(), trainer=trainer,
                                              batch_processor=object())),
    'log_interval': error_of(lambda: H.LoggingHandler(log_interval='often')),
}
""",
    "warnings_and_defaults": _SETUP + """
net, trainer = net_and_trainer()
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter('always')
    est = E.Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), context=mx.cpu())
    E.Estimator(net, gluon.loss.L2Loss(), initializer=mx.init.Xavier(), trainer=trainer,
                context=mx.cpu())
result['warnings'] = [str(w.message)[:30] for w in seen]
result['default_trainer'] = [type(est.trainer.optimizer).__name__, est.trainer.learning_rate]
result['metrics'] = [[m.name for m in est.train_metrics], [m.name for m in est.val_metrics]]
est.logger.disabled = True
est.fit(loader(), epochs=1)  # MXNet sets max_epoch/max_batch in fit
stopper = H.EarlyStoppingHandler(monitor=est.val_metrics[0], mode='max')
handlers = est._prepare_default_handlers(val_data=loader(), event_handlers=[stopper])
result['order'] = [type(h).__name__ for h in handlers]
result['validation_order'] = [type(h).__name__
                              for h in est._prepare_default_validation_handlers(None)]
counts = est._categorize_handlers(handlers)
result['categories'] = [sorted(type(h).__name__ for h in group) for group in counts]
""",
    "training_log_and_checkpoints": _SETUP + """
est = estimator()
lines = []
class Keep(logging.Handler):
    def emit(self, record):
        text = record.getMessage().replace(folder, 'DIR')
        lines.append(re.sub(r'[0-9]+[.][0-9]+s|total [0-9]+s', 'T', text))
folder = tempfile.mkdtemp()
est.logger.addHandler(Keep())
checkpoints = H.CheckpointHandler(folder, model_prefix='m', epoch_period=1, batch_period=2,
                                  max_checkpoints=3)
logger = H.LoggingHandler(log_interval=2, metrics=est.train_metrics)
est.fit(loader(), val_data=loader(), epochs=2, event_handlers=[checkpoints, logger])
result['log'] = lines
result['files'] = sorted(os.listdir(folder))
outputs['weight'] = est.net.weight.data()
resumed = estimator()
resumed.logger.disabled = True
resume = H.CheckpointHandler(folder, model_prefix='m', epoch_period=None, batch_period=2,
                             resume_from_checkpoint=True)
resumed.fit(loader(), batches=10, event_handlers=[resume])  # the rest after the newest
result['resumed'] = [resume.trained_epoch, resume.trained_batch, resumed.max_batch,
                     sorted(os.listdir(folder))]
outputs['resumed'] = resumed.net.weight.data()
""",
    "batch_processor": _SETUP + """
calls = []
class Counting(E.batch_processor.BatchProcessor):
    def fit_batch(self, estimator, train_batch, batch_axis=0):
        calls.append('fit')
        data, label, pred, loss = super().fit_batch(estimator, train_batch, batch_axis)
        calls.append([len(data), list(data[0].shape), list(loss[0].shape)])
        return data, label, pred, loss
    def evaluate_batch(self, estimator, val_batch, batch_axis=0):
        calls.append('eval')
        return super().evaluate_batch(estimator, val_batch, batch_axis)
est = estimator(batch_processor=Counting())
est.fit(loader(6), val_data=loader(12), batches=3)
result['calls'] = calls
outputs['weight'] = est.net.weight.data()
""",
}


mxnet = oracle_fixture(CASES, INPUTS)


@needs_mxnet
@pytest.mark.parametrize("name", sorted(CASES))
def test_estimator_rules_match_mxnet(name, mxnet):
    assert_same_results(CASES, name, INPUTS, mxnet)
