"""Gluon against MXNet 1.9.1 where Symbols and HybridBlock rules are involved: losses and
recurrent cells on Symbols (names, shapes, values through Module), layer output names, the
HybridBlock input rules (None arguments, mixing, scalars, contexts), stale compiled graphs,
the warning for unregistered child Blocks, summary() and Block.save/load's tree file.

Each case is MXNet source run unchanged in MXNet (one process) and in the engine.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from tests.engine.gluon.differential import ERROR_OF, assert_same_results, oracle_fixture
from tests.oracle import needs_mxnet

_RNG = np.random.RandomState(3)
INPUTS = {"x": _RNG.uniform(-1, 1, (4, 6)).astype(np.float32),
          "label": np.array([0, 2, 1, 2], dtype=np.float32),
          "w": np.array([1, 0.5, 0, 2], dtype=np.float32),
          "fc_w": _RNG.uniform(-0.5, 0.5, (3, 6)).astype(np.float32),
          "seq": _RNG.uniform(-1, 1, (2, 3, 5)).astype(np.float32),
          "i2h": _RNG.uniform(-0.3, 0.3, (16, 5)).astype(np.float32),
          "h2h": _RNG.uniform(-0.3, 0.3, (16, 4)).astype(np.float32)}

_ERRORS = "import warnings\n" + ERROR_OF

CASES = {
    "losses_on_symbols": """
gloss = mx.gluon.loss
data, label, w = mx.sym.var('data'), mx.sym.var('label'), mx.sym.var('w')
fc = mx.sym.FullyConnected(data, num_hidden=3, name='fc')
for name, loss in [('ce', gloss.SoftmaxCrossEntropyLoss()(fc, label)),
                   ('ce_weighted', gloss.SoftmaxCrossEntropyLoss()(fc, label, w)),
                   ('kl', gloss.KLDivLoss(from_logits=False)(fc, mx.sym.one_hot(label, 3)))]:
    mod = mx.mod.Module(mx.sym.make_loss(loss), data_names=('data',),
                        label_names=('label', 'w') if 'weighted' in name else ('label',))
    labels = [('label', (4,))] + ([('w', (4,))] if 'weighted' in name else [])
    mod.bind(data_shapes=[('data', (4, 6))], label_shapes=labels)
    mod.init_params(arg_params={'fc_weight': mx.nd.array(inputs['fc_w']),
                                'fc_bias': mx.nd.zeros(3)})
    label_arrays = [mx.nd.array(inputs['label'])] + (
        [mx.nd.array(inputs['w'])] if 'weighted' in name else [])
    mod.forward(mx.io.DataBatch([mx.nd.array(inputs['x'])], label_arrays), is_train=True)
    outputs[name] = mod.get_outputs()[0]
    mod.backward()
    outputs[name + '_grad'] = mod._exec_group.execs[0].grad_dict['fc_weight']
""",
    "rnn_cells_on_symbols": """
rnn = mx.gluon.rnn
result['names'] = {}
for kind in ('RNNCell', 'LSTMCell', 'GRUCell'):
    cell = getattr(rnn, kind)(4, prefix='rnn_')
    outs, states = cell.unroll(3, [mx.sym.var('rnn_t%d_data' % i) for i in range(3)])
    group = mx.sym.Group(outs)
    shapes = group.infer_shape(**{'rnn_t%d_data' % i: (2, 5) for i in range(3)})
    result['names'][kind] = [group.list_outputs(), [list(s) for s in shapes[1]],
                             sorted(cell.collect_params().keys())]
stack = rnn.SequentialRNNCell()
stack.add(rnn.LSTMCell(4, prefix='l0_'))
stack.add(rnn.ResidualCell(rnn.LSTMCell(4, prefix='l1_')))
outs, _ = stack.unroll(3, mx.sym.var('data'), merge_outputs=True)
result['stack'] = [outs.list_outputs(), [list(s) for s in outs.infer_shape(data=(2, 3, 4))[1]]]
bi = rnn.BidirectionalCell(rnn.GRUCell(4, prefix='l_'), rnn.GRUCell(4, prefix='r_'))
outs, _ = bi.unroll(3, mx.sym.var('data'), merge_outputs=False)
result['bidirectional'] = [mx.sym.Group(outs).list_outputs(),
                           [list(s) for s in mx.sym.Group(outs).infer_shape(data=(2, 3, 5))[1]]]
cell = rnn.LSTMCell(4, prefix='lstm_')
out, _ = cell.unroll(3, mx.sym.var('seq'), layout='NTC', merge_outputs=True)
values = out.eval(seq=mx.nd.array(inputs['seq']), lstm_i2h_weight=mx.nd.array(inputs['i2h']),
                  lstm_h2h_weight=mx.nd.array(inputs['h2h']), lstm_i2h_bias=mx.nd.zeros(16),
                  lstm_h2h_bias=mx.nd.zeros(16))
outputs['lstm'] = values[0]
""",
    "layer_names": """
nn = mx.gluon.nn
net = nn.HybridSequential(prefix='net_')
with net.name_scope():
    net.add(nn.Dense(3, activation='tanh'), nn.Conv2D(2, 3, activation='relu'), nn.BatchNorm(),
            nn.Dropout(0.5), nn.Flatten(), nn.MaxPool2D(), nn.LeakyReLU(0.1), nn.Embedding(3, 2),
            nn.LayerNorm())
result['names'] = [block(mx.sym.var('x')).get_internals().list_outputs() for block in net]
dense = nn.Dense(128, activation='relu', in_units=30, flatten=True, prefix='test2_')
out = dense(mx.sym.var('data'))
result['dense'] = [out.list_outputs(), [list(s) for s in out.infer_shape(data=(17, 2, 5, 3))[1]]]
""",
    "hybrid_inputs": _ERRORS + """
gluon = mx.gluon
class Foo(gluon.HybridBlock):
    def hybrid_forward(self, F, a, b=None):
        if a is None:
            return b
        return a if b is None else a + b
ones = mx.nd.ones((3,))
checks = {}
foo = Foo(); foo.hybridize()
checks['none_first'] = foo(None, ones).asnumpy().tolist()
checks['structure'] = error_of(lambda: foo(ones, ones))
foo = Foo(); foo.hybridize()
foo(ones)
checks['trailing_none'] = foo(ones, None).asnumpy().tolist()
checks['all_none'] = error_of(lambda: Foo()(None, None))
checks['mixed'] = error_of(lambda: Foo()(ones, mx.sym.var('a')))
foo = Foo(); foo.hybridize()
checks['scalar_hybridized'] = error_of(lambda: foo(ones, 1))
checks['scalar_plain'] = Foo()(ones, 1).asnumpy().tolist()
foo = Foo(); foo.hybridize()
checks['contexts'] = error_of(lambda: foo(mx.nd.ones((3,), ctx=mx.cpu(1)),
                                          mx.nd.ones((3,), ctx=mx.cpu(2))))
checks['plain_child'] = error_of(lambda: gluon.nn.HybridSequential().add(gluon.nn.Sequential()))
result.update(checks)
""",
    "stale_cache": """
net = mx.gluon.nn.HybridSequential()
with net.name_scope():
    net.add(mx.gluon.nn.Dense(10, weight_initializer='zeros', bias_initializer='ones',
                              flatten=False))
net.hybridize()
net.initialize()
net(mx.nd.ones((2, 3, 5)))
net.add(mx.gluon.nn.Flatten())
result['after_add'] = list(net(mx.nd.ones((2, 3, 5))).shape)
net = mx.gluon.nn.HybridSequential()
with net.name_scope():
    net.fc1 = mx.gluon.nn.Dense(10, weight_initializer='zeros', bias_initializer='ones',
                                flatten=False)
    net.fc2 = mx.gluon.nn.Dense(10, weight_initializer='zeros', bias_initializer='ones',
                                flatten=False)
net.hybridize()
net.initialize()
net(mx.nd.ones((2, 3, 5)))
net.fc2 = mx.gluon.nn.Dense(10, weight_initializer='zeros', bias_initializer='ones',
                            flatten=True)
net.initialize()
result['after_replace'] = list(net(mx.nd.ones((2, 3, 5))).shape)
""",
    "blocks_and_files": _ERRORS + """
import tempfile, os, json
nn = mx.gluon.nn
class Listed(mx.gluon.Block):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.layers = [nn.Dense(2), nn.Dense(3)]
class Fine(mx.gluon.Block):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.data = {'a': '4', 'b': 123}
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter('always')
    Listed().collect_params()
    listed = [str(w.message).split('"')[1] for w in seen]
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter('always')
    Fine().collect_params()
    fine = len(seen)
result['warnings'] = [listed, fine]
net = nn.HybridSequential(prefix='model_')
with net.name_scope():
    net.add(nn.Dense(3, in_units=6), nn.Dense(2, in_units=3))
net.initialize()
net.hybridize()
result['summary_hybridized'] = error_of(lambda: net.summary(mx.nd.ones((1, 6))))
folder = tempfile.mkdtemp()
prefix = os.path.join(folder, 'net')
net(mx.nd.ones((1, 6)))
net.save(prefix)
with open(prefix + '-model.json') as handle:
    tree = json.load(handle)
def shape_of(entry):
    return {k: [v['orig_name'], v.get('hybridized'), shape_of(v),
                sorted([list(kv) for kv in v['children'].items()])]
            for k, v in entry.items() if isinstance(v, dict) and 'orig_name' in v}
result['tree'] = shape_of(tree)
other = nn.HybridSequential(prefix='other_')
with other.name_scope():
    other.add(nn.Dense(3, in_units=6), nn.Dense(2, in_units=3))
other.load(prefix)
result['loaded'] = [other.name, sorted(other.collect_params().keys())]
outputs['same'] = other(mx.nd.array(inputs['x'])) - net(mx.nd.array(inputs['x']))
""",
}


# graphs named by MXNet's per-process counters (stack0, elemwise_add0): each case starts them
# afresh, whatever ran before it in the process
for _name in ("rnn_cells_on_symbols", "layer_names"):
    CASES[_name] = "with mx.name.NameManager():\n" + textwrap.indent(CASES[_name], "    ")

mxnet = oracle_fixture(CASES, INPUTS)


@needs_mxnet
@pytest.mark.parametrize("name", sorted(CASES))
def test_gluon_with_symbols_matches_mxnet(name, mxnet):
    assert_same_results(CASES, name, INPUTS, mxnet)
