"""Symbol shape and dtype inference against MXNet 1.9.1: partial shapes filled forward and
backward, infer_shape_partial, numpy-shape mode, contradictions and incomplete answers.

Each case is MXNet source run unchanged in MXNet (one process) and in the engine.
"""

from __future__ import annotations

import pytest

from tests.engine.gluon.differential import ERROR_OF, assert_same_results, oracle_fixture
from tests.oracle import needs_mxnet

_HELPERS = """
import warnings
S = mx.sym
a, b, c = S.var('a'), S.var('b'), S.var('c')

def shapes(part):
    return None if part is None else [None if s is None else list(s) for s in part]

def partial(sym, **kw):
    return [shapes(p) for p in sym.infer_shape_partial(**kw)]

def types(part):
    return None if part is None else [None if t is None else np.dtype(t).name for t in part]

def quietly(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter('always')
        value = fn()
    return value, [str(w.message).split(':')[0] for w in seen]
""" + ERROR_OF

CASES = {
    "forward_and_backward": _HELPERS + """
result['elemwise'] = partial(S.var('a', shape=(0, 10)) + S.var('b', shape=(12, 0)))
result['fc_batch'] = partial(S.FullyConnected(S.var('a', shape=(0, 10)), num_hidden=21)
                             + S.var('c', shape=(5, 0)))
result['fc_unknown_data'] = partial(S.FullyConnected(a, num_hidden=4) + b, b=(5, 4))
result['conv_stride1'] = partial(S.Convolution(S.var('a', shape=(0, 10, 0, 0)), num_filter=21,
                                              kernel=(3, 3), pad=(1, 1))
                                 + S.var('c', shape=(5, 21, 32, 32)))
result['conv_stride2'] = partial(S.Convolution(a, kernel=(3, 3), num_filter=4, stride=(2, 2)) + b,
                                 a=(0, 3, 0, 0), b=(5, 4, 7, 7))
half = S.cast(S.var('a', shape=(1, 0, 0, 0)), dtype='float16')
result['conv_weight'] = partial(S.Convolution(half, weight=S.cast(b, dtype='float16'),
                                              pad=(3, 3), num_filter=64, stride=(2, 2),
                                              no_bias=True, kernel=(7, 7)))
result['concat'] = partial(S.var('d', shape=(2, 0)) + S.Concat(S.var('a', shape=(0, 10)),
                                                            S.var('b', shape=(0, 5)), dim=1))
result['concat_dim'] = partial(S.Concat(a, c, dim=1) + b, a=(0, 0), c=(0, 3), b=(2, 5))
result['split'] = partial(S.SliceChannel(S.var('a', shape=(0, 10)), num_outputs=10, axis=1,
                                        squeeze_axis=True)[1] + S.var('c', shape=(5,)))
result['split_keep'] = partial(S.SliceChannel(S.var('a', shape=(0, 15, 0)), num_outputs=3)[1]
                               + S.var('c', shape=(3, 5, 2)))
result['reshape_back'] = partial(S.Reshape(a, shape=(-1,)) + b, a=(0, 3, 4), b=(60,))
result['unary_back'] = [partial(getattr(S, op)(a) + b, b=(5, 3))
                        for op in ('relu', 'sin', 'BlockGrad', 'negative', 'exp')]
result['cast_back'] = partial(S.Cast(a, dtype='float16') + b, b=(5, 3))
result['no_back'] = [partial(getattr(S, op)(a) + b, b=(5, 3))
                     for op in ('softmax', 'BatchNorm', 'Dropout', 'SoftmaxOutput', 'Flatten')]
result['broadcast'] = [partial(S.broadcast_add(a, b), a=(0, 3), b=(5, 3)),
                       partial(S.broadcast_add(a, b), a=(0, 1), b=(5, 3)),
                       partial(S.broadcast_add(a, b), b=(1,))]
result['ops'] = [partial(S.dot(a, b), a=(0, 3, 4), b=(4, 5)),
                 partial(S.batch_dot(a, b), a=(0, 3, 4), b=(0, 4, 5)),
                 partial(S.batch_dot(a, b), a=(0, 3, 4), b=(0, 0, 5)),
                 partial(S.transpose(a, axes=(0, 3, 2, 1)), a=(0, 3, 224, 224)),
                 partial(S.pick(a, b, axis=1), a=(0, 3, 3), b=(0, 3)),
                 partial(S.where(c, a, b), c=(0, 2), a=(0, 2), b=(0, 2)),
                 partial(S.Embedding(a, b, input_dim=100, output_dim=10), a=(0, 5), b=(100, 10)),
                 partial(S.sum(a, axis=1), a=(0, 3)),
                 partial(S.sin(a))]
w = S.var('weight')
wt = S._internal._identity_with_attr_like_rhs(S.broadcast_add(w, S.var('wshift', shape=(1,))), w)
result['like_rhs'] = partial(S.FullyConnected(S.var('data'), weight=wt, num_hidden=11,
                                              no_bias=True), data=(7, 100))
with mx.np_shape(True):
    result['np_shape'] = [partial(S.dot(a, b), a=(-1, 3, 4), b=(4, 5)),
                          partial(S.batch_dot(a, b), a=(-1, 3, 4), b=(-1, -1, 5)),
                          partial(S.sin(a)), partial(a + b, a=(2, -1))]
""",
    "complete_and_errors": _HELPERS + """
g = S.Activation(S.elemwise_add(S.FullyConnected(S.var('data'), num_hidden=8, name='x2h'),
                                S.FullyConnected(S.var('prev'), num_hidden=8, name='h2h')),
                 act_type='relu')
value, warned = quietly(lambda: g.infer_shape(data=(4, 6)))
result['incomplete'] = [value == (None, None, None), warned]
value, warned = quietly(lambda: g.infer_shape(data=(4, 6), prev=(4, 8)))
result['complete'] = [shapes(value[0]), warned]
var = S.var('a', shape=(2, 3))
result['declared'] = [shapes(p) for p in (var + b).infer_shape()]
result['overridden'] = [shapes(p) for p in (var + b).infer_shape(a=(5, 6))]
fc = S.FullyConnected(S.Activation(S.FullyConnected(S.var('data'), name='fc1', num_hidden=100),
                                   act_type='relu'), name='fc2', num_hidden=10)
result['contradiction'] = error_of(lambda: fc.infer_shape(data=(100, 100),
                                                          fc1_weight=(1, 100)))
result['elemwise_mismatch'] = error_of(lambda: (a + b).infer_shape(a=(2, 3), b=(1, 3)))
result['list_shape'] = error_of(lambda: (a + b).infer_shape(a=[2, 3]))
result['both_ways'] = error_of(lambda: (a + b).infer_shape((2, 3), b=(2, 3)))
result['not_an_input'] = error_of(lambda: (a + b).infer_shape(z=(2, 3)))
""",
    "types": _HELPERS + """
mlp = S.SoftmaxOutput(S.FullyConnected(S.Cast(S.var('data'), dtype='float32'), num_hidden=8))
result['cast_net'] = [types(p) for p in mlp.infer_type(data=np.float16)]
result['cast_partial'] = [types(p) for p in mlp.infer_type_partial()]
value, warned = quietly(lambda: (a + b).infer_type())
result['nothing'] = [value == (None, None, None), warned]
result['spread'] = [types(p) for p in (a + b).infer_type(a='float16')]
result['backward'] = [types(p) for p in (S.cast(a, dtype='float16') + b).infer_type_partial()]
result['bn_fp16'] = [types(p) for p in S.BatchNorm(a).infer_type(a='float16')]
result['embedding'] = [types(p) for p in S.Embedding(a, input_dim=5, output_dim=3)
                       .infer_type(a='int32')]
result['others'] = [types(S.one_hot(a, depth=3).infer_type(a='int32')[1]),
                    types(S.argmax(a).infer_type(a='float16')[1]),
                    types(S.shape_array(a).infer_type(a='float16')[1]),
                    types((a > b).infer_type(a='float16')[1])]
result['conflict'] = error_of(lambda: (a + b).infer_type(a='float16', b='float32'))
""",
    "legacy_json_under_np_shape": _HELPERS + """
net = S.FullyConnected(S.var('data'), S.var('weight', shape=(128, 0)), num_hidden=128)
text = net.tojson()
import json
with mx.np_shape(True):
    result['np_json_marked'] = 'is_np_shape' in json.loads(S.var('x').tojson())['attrs']
    loaded = S.load_json(text)
    result['loaded'] = [shapes(p) for p in loaded.infer_shape(data=(10, 784))]
result['legacy_marked'] = 'is_np_shape' in json.loads(text)['attrs']
""",
}


mxnet = oracle_fixture(CASES, {})


@needs_mxnet
@pytest.mark.parametrize("name", sorted(CASES))
def test_inference_matches_mxnet(name, mxnet):
    assert_same_results(CASES, name, {}, mxnet)
