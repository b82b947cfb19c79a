"""Module behaviours against MXNet 1.9.1: backward without parameters, labels matched by
name, forward with other batch shapes and a rebind that keeps the trained values, the
Monitor's statistics of every operator (forward outputs, backward gradients, arguments),
ctx_group placement and layouts whose batch axis is not the first.

Each case is MXNet source run unchanged in MXNet (one process) and in the engine.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.gluon.differential import assert_same_results, oracle_fixture
from tests.oracle import needs_mxnet

INPUTS = {"x": np.linspace(-1, 1, 24).reshape(6, 4).astype(np.float32)}

CASES = {
    "no_parameters": """
out = mx.sym.Activation(mx.sym.var('data'), act_type='relu')
mod = mx.mod.Module(out, label_names=None)
mod.bind(data_shapes=[('data', (6, 4))], inputs_need_grad=True)
mod.init_params()
mod.init_optimizer()
mod.forward(mx.io.DataBatch([mx.nd.array(inputs['x'])]))  # the module's own training flag
mod.backward([mx.nd.ones((6, 4)) * 2])
mod.update()
outputs['grad'] = mod.get_input_grads()[0]
dropout = mx.mod.Module(mx.sym.Dropout(mx.sym.var('data'), 0.5))
dropout.bind(data_shapes=[('data', (6, 4))])
dropout.init_params()
dropout.init_optimizer()
dropout.forward_backward(mx.io.DataBatch([mx.nd.ones((6, 4))]))
dropout.update()
result['dropout_shape'] = list(dropout.get_outputs()[0].shape)
""",
    "labels_by_name": """
data = mx.sym.var('data')
pos, neg = mx.sym.var('pos'), mx.sym.var('neg')
loss = mx.sym.make_loss(mx.sym.sum(mx.sym.square(data - pos) - mx.sym.square(data - neg),
                                   axis=1))
mod = mx.mod.Module(loss, data_names=('data',), label_names=('pos', 'neg'))
mod.bind(data_shapes=[('data', (6, 4))], label_shapes=[('neg', (6, 4)), ('pos', (6, 4))])
mod.init_params()
x = mx.nd.array(inputs['x'])
mod.forward(mx.io.DataBatch([x], [x * 0, x * 2]), is_train=False)  # neg = 0, pos = 2x
outputs['loss'] = mod.get_outputs()[0]
""",
    "reshaped_batches": """
data = mx.sym.var('data')
net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=3, name='fc'),
                           name='softmax')
mod = mx.mod.Module(net)
mod.bind(data_shapes=[('data', (6, 4))], label_shapes=[('softmax_label', (6,))])
x = mx.nd.array(inputs['x'])
mod.init_params(arg_params={'fc_weight': x[:3] * 0.5, 'fc_bias': mx.nd.array([0.1, 0, -0.1])})
mod.init_optimizer(optimizer_params={'learning_rate': 0.5})
for rows in (6, 2, 5):  # each batch of another size reshapes the module
    mod.forward(mx.io.DataBatch([x[:rows]], [mx.nd.arange(rows) % 3]))
    mod.backward()
    mod.update()
    result.setdefault('shapes', []).append(list(mod.get_outputs()[0].shape))
    outputs[f'weight{rows}'] = mod.get_params()[0]['fc_weight'].copy()  # MXNet's are live
outputs['weight'] = mod.get_params()[0]['fc_weight']  # synced to the host
mod.bind(data_shapes=[('data', (5, 4))], for_training=False, force_rebind=True)
mod.forward(mx.io.DataBatch([x[:5]]))
outputs['after_rebind'] = mod.get_outputs()[0]
""",
    "monitor": """
from functools import reduce
x = mx.sym.Variable('data')
x = mx.sym.FullyConnected(name='fc_0', data=x, num_hidden=2)
x = mx.sym.Activation(name='act_0', data=x, act_type='sigmoid')
x = mx.sym.FullyConnected(name='fc_1', data=x, num_hidden=2)
x = mx.sym.Activation(name='act_1', data=x, act_type='sigmoid')
x = mx.sym.LinearRegressionOutput(data=x, name='softmax', grad_scale=2)
def mean_abs(v):
    return mx.nd.sum(mx.nd.abs(v)) / reduce(lambda p, q: p * q, v.shape)
mon = mx.mon.Monitor(1, stat_func=mean_abs, pattern='.*')
mod = mx.mod.Module(x, context=[mx.cpu()])
mod.bind([('data', (1, 2))], label_shapes=[('softmax_label', (1, 2))], for_training=True)
mod.install_monitor(mon)
mod.init_params(arg_params={'fc_0_weight': mx.nd.array([[.15, .20], [.25, .30]]),
                            'fc_0_bias': mx.nd.array([.35, .35]),
                            'fc_1_weight': mx.nd.array([[.40, .45], [.50, .55]]),
                            'fc_1_bias': mx.nd.array([.60, .60])})
batch = mx.io.DataBatch([mx.nd.array([[0.05, .10]])], [mx.nd.array([[.01, 0.99]])])
mon.tic()
mod.forward_backward(batch)
stats = mon.toc()
# gradients nobody needs (the label's, the data's) are not computed by MXNet, whose buffers
# then hold leftovers: names only for those
result['names'] = [name for _, name, _ in stats]
result['values'] = [round(float(v), 5) for _, name, v in stats
                    if name not in ('softmax_backward_output1', 'fc_0_backward_output0')]
mon.tic()
mod.forward(batch, is_train=False)
result['predict_names'] = [name for _, name, _ in mon.toc()]
""",
    "ctx_group": """
with mx.AttrScope(ctx_group='dev1'):
    a = mx.sym.var('a') * 2
with mx.AttrScope(ctx_group='dev2'):
    b = mx.sym.var('b')
    c = a + b
mod = mx.mod.Module(c, context=[mx.cpu(0)], data_names=['a', 'b'], label_names=None,
                    group2ctxs={'dev1': mx.cpu(1), 'dev2': mx.cpu(2)})
mod.bind(data_shapes=[['a', (2, 3)], ['b', (2, 3)]], inputs_need_grad=True)
mod.init_params()
mod.forward(mx.io.DataBatch([mx.nd.ones((2, 3)), mx.nd.ones((2, 3))]), is_train=True)
mod.backward([mx.nd.ones((2, 3))])
grads = mod.get_input_grads()
result['contexts'] = [str(g.context) for g in grads]
outputs['ga'], outputs['gb'] = grads
""",
    "layout": """
sym = mx.sym.Activation(mx.sym.var('data'), act_type='relu', __layout__='TNC')
mod = mx.mod.Module(sym, ('data',), None, context=[mx.cpu(0), mx.cpu(1)])
mod.bind(data_shapes=[mx.io.DataDesc('data', (3, 8, 2), layout='TNC')])
mod.init_params()
x = mx.nd.arange(48).reshape((3, 8, 2)) - 20
mod.forward(mx.io.DataBatch(data=[x], label=None))
mod.backward([mx.nd.ones((3, 8, 2))])
result['parts'] = [list(o.shape) for o in mod.get_outputs(merge_multi_context=False)[0]]
outputs['merged'] = mod.get_outputs()[0]
""",
}


mxnet = oracle_fixture(CASES, INPUTS)


@needs_mxnet
@pytest.mark.parametrize("name", sorted(CASES))
def test_module_behaviour_matches_mxnet(name, mxnet):
    assert_same_results(CASES, name, INPUTS, mxnet)
