"""Symbol's Python protocol and the Executor against MXNet 1.9.1: NDArray-only operations
refused, operator names of Python expressions, children, backward after a plain forward,
outputs allocated at bind and written in place, Executor.reshape's shared memory.

Each case is MXNet source run unchanged in MXNet (one process) and in the engine.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.gluon.differential import ERROR_OF, assert_same_results, oracle_fixture
from tests.oracle import needs_mxnet

INPUTS = {"x": np.linspace(-1, 1, 12).reshape(3, 4).astype(np.float32),
          "y": np.linspace(0.5, 2, 12).reshape(3, 4).astype(np.float32)}

_ERRORS = ERROR_OF

CASES = {
    "protocol": _ERRORS + """
a, b = mx.sym.var('a'), mx.sym.var('b')
result['bool'] = error_of(lambda: bool(a))
def add_in_place():
    c = a
    c += 1
result['iadd'] = error_of(add_in_place)
result['asnumpy'] = error_of(lambda: a.asnumpy())
with mx.name.NameManager():
    names = [s.name for s in (abs(a), a.abs(), -a, a > b, a == 1, a != b, 2 ** a, a % b,
                              1 - a, 2 / a)]
result['names'] = names
fc1 = mx.sym.FullyConnected(a, name='fc1', num_hidden=4)
net = mx.sym.FullyConnected(fc1, name='fc2', num_hidden=3)
result['children'] = [net.get_children().list_outputs(),
                      net.get_children().get_children().list_outputs(),
                      net.get_children()['fc2_weight'].get_children() is None]
sliced = mx.sym.SliceChannel(a, num_outputs=3, name='slice')
result['slice_children'] = [sliced.get_children().list_outputs(),
                            mx.sym.Concat(*list(sliced)).get_children().list_outputs()]
atomic = net._gen_atomic_symbol()
result['atomic'] = [atomic.list_arguments(), atomic.list_outputs()]
outputs['abs'] = abs(a).eval(a=mx.nd.array(inputs['x']))[0]
""",
    "attributes": _ERRORS + """
import json
x = mx.sym.var('x')
with mx.name.NameManager():
    made = [mx.sym.FullyConnected(x, num_hidden=2, attr={'wd_mult': '0.1', 'lr_mult': '2'},
                                  name='fc'),
            mx.sym.Convolution(x, kernel=(1, 1), num_filter=2, attr={'ctx_group': 'g'},
                               name='conv'),
            mx.sym.sin(x, attr={'wd_mult': '0.5'}, name='s'),
            mx.sym.var('v', attr={'wd_mult': '0.3', 'foo': '1'}, lr_mult=2),
            mx.sym.FullyConnected(x, num_hidden=2, wd_mult=0.2, name='fc2')]
def pairs(d):
    return sorted([k, v] for k, v in d.items())
result['attrs'] = [[pairs(s.list_attr()), s.attr('wd_mult'),
                    pairs(json.loads(s.tojson())['nodes'][-1].get('attrs', {}))] for s in made]
result['created_variables'] = sorted([k, pairs(v)] for k, v in made[0].attr_dict().items())
# (any other attr key is an argument of the operator: an unknown one is refused with
# MXNetError; tests/engine/symbol/test_symbol.py checks it)
""",
    "backward_after_forward": """
lhs, rhs = mx.sym.var('lhs'), mx.sym.var('rhs')
x, y = mx.nd.array(inputs['x']), mx.nd.array(inputs['y'])
gx, gy = mx.nd.zeros((3, 4)), mx.nd.zeros((3, 4))
exe = (lhs * rhs / 2).bind(mx.cpu(), args=[x, y], args_grad=[gx, gy])
out = exe.outputs[0]  # allocated at bind; forward writes into its memory
result['allocated'] = list(out.shape)
exe.forward()  # not training: backward still runs, as in MXNet
exe.backward([mx.nd.ones((3, 4)) * 3])
result['grads_in_place'] = exe.grad_dict['lhs'] is gx
outputs['out'], outputs['gx'], outputs['gy'] = out, gx, gy
x2 = mx.sym.var('x'); idx = mx.sym.var('idx')
stopped = mx.sym.stop_gradient(mx.sym.take(x2, idx))
exe2 = stopped.simple_bind(mx.cpu(), x=(4, 3), idx=(2,), type_dict={'x': np.float32,
                                                                     'idx': np.int32})
exe2.grad_dict['x'][:] = 5
exe2.forward(is_train=True)
exe2.backward()
outputs['unreached'] = exe2.grad_dict['x']
""",
    "reshape": _ERRORS + """
x = mx.sym.var('x')
y = mx.sym.FullyConnected(x, num_hidden=4, name='fc')
exe = y.simple_bind(mx.cpu(), x=(5, 4), grad_req='null')
exe.arg_dict['x'][:] = 1
exe.arg_dict['fc_weight'][:] = mx.nd.ones((4, 4))
exe.arg_dict['fc_bias'][:] = 0
small = exe.reshape(x=(3, 4))
small.forward()
outputs['small'] = small.outputs[0]
outputs['base_after_small'] = exe.outputs[0]  # the small outputs live in its memory
small.arg_dict['fc_weight'][:] = 2  # the same memory as the base executor's
outputs['base_weight'] = exe.arg_dict['fc_weight']
result['up_sizing'] = error_of(lambda: exe.reshape(x=(6, 4)))
big = exe.reshape(allow_up_sizing=True, x=(6, 4))
big.arg_dict['x'][:] = 0
outputs['base_x'] = exe.arg_dict['x']
result['partial_shaping'] = error_of(lambda: y.simple_bind(mx.cpu(), x=(5, 4)).reshape(
    x=(5, 6)))
exe.forward()
outputs['base'] = exe.outputs[0]
""",
    "check_consistency": """
x = mx.sym.var('x')
ctx = {'ctx': mx.cpu(), 'x': (2, 3)}
np.random.seed(0)
with mx.name.NameManager():  # the output's name, from fresh counters
    graph = mx.sym.sin(x) * 2
truth = mx.test_utils.check_consistency(graph, [ctx, ctx])
result['keys'] = sorted(truth)
""",
}


mxnet = oracle_fixture(CASES, INPUTS)


@needs_mxnet
@pytest.mark.parametrize("name", sorted(CASES))
def test_symbol_and_executor_match_mxnet(name, mxnet):
    assert_same_results(CASES, name, INPUTS, mxnet)
