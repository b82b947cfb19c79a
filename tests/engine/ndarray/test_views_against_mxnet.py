# ruff: noqa: E501 - each case is one expression string shared verbatim with MXNet
"""Differential tests: which results share memory with their input, as in MXNet 1.9.1.

MXNet's operators return new arrays; the exceptions are ``x.reshape()``, basic indexing whose
elements are contiguous (``x[i]``, ``x[i:j]``, ``x[i, :]``, one element), the ``inplace=True``
forms and ``detach``. Code relies on both sides: ``x[i][:] = v`` and ``out=x[i]`` write into
``x``; ``y = nd.flatten(x); y[:] = 0`` must not. Each case writes through a result and the
test compares what happened to the source array (one MXNet process for the module).
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import autograd, gluon, nd
from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet

pytestmark = needs_mxnet

INPUTS = {"base": np.arange(24, dtype=np.float32).reshape(3, 8)}

# a result of an expression over x (a copy of inputs['base']); the case writes -7 through it
RESULTS = {
    "int_index": "x[1]",
    "slice": "x[1:3]",
    "row_and_all_columns": "x[1, :]",
    "column": "x[:, 1]",
    "one_element": "x[1, 2]",
    "one_element_twice": "x[1][2]",
    "strided_rows": "x[::2]",
    "block": "x[1:2, 1:3]",
    "new_axis": "x[None]",
    "ellipsis": "x[...]",
    "advanced": "x[[0, 1]]",
    "iteration": "next(iter(x))",
    "reshape_method": "x.reshape((4, 6))",
    "reshape_operator": "nd.reshape(x, (4, 6))",
    "flatten_method": "x.flatten()",
    "flatten_method_inplace": "x.flatten(inplace=True)",
    "flatten_operator": "nd.flatten(x)",
    "flatten_operator_inplace_ignored": "nd.flatten(x, inplace=True)",
    "expand_dims_method": "x.expand_dims(0)",
    "expand_dims_method_inplace": "x.expand_dims(0, inplace=True)",
    "expand_dims_operator": "nd.expand_dims(x, 0)",
    "squeeze_method": "x.expand_dims(0, inplace=True).squeeze()",
    "squeeze_method_inplace": "x.expand_dims(0, inplace=True).squeeze(inplace=True)",
    "transpose_property": "x.T",
    "transpose_operator": "nd.transpose(x)",
    "swapaxes": "nd.swapaxes(x, 0, 1)",
    "slice_axis": "nd.slice_axis(x, axis=0, begin=0, end=2)",
    "slice_operator": "nd.slice(x, begin=(0, 0), end=(2, 8))",
    "split_first": "nd.split(x, 2, axis=1)[0]",
    "block_grad": "nd.BlockGrad(x)",
    "broadcast_to_same_shape": "nd.broadcast_to(x, (3, 8))",
    "reshape_like": "nd.reshape_like(x, nd.zeros((4, 6)))",
    "detach": "x.detach()",
    "astype_no_copy": "x.astype('float32', copy=False)",
    "as_in_context_same": "x.as_in_context(mx.cpu())",
    "moveaxis_identity": "nd.moveaxis(x, 0, 0)",
    "vector_transpose": "x[0].T",
}

WRITE_THROUGH = """
x = nd.array(inputs['base'])
y = {expr}
y[:] = -7
outputs['x'] = x
result['shares'] = bool((x.asnumpy() == -7).any())
"""

CASES = {name: WRITE_THROUGH.format(expr=expr) for name, expr in RESULTS.items()}
CASES.update({
    "out_into_index": """
x = nd.array(inputs['base'])
nd.elemwise_add(nd.ones((8,)), nd.ones((8,)), out=x[1])
outputs['x'] = x
""",
    "assign_into_index_of_index": """
x = nd.array(inputs['base'])
x[2][1:3] = 5
outputs['x'] = x
""",
    "from_numpy_copy": """
src = inputs['base'].copy()
a = nd.from_numpy(src, zero_copy=False)
src[0, 0] = 100
a[1, 1] = 200
outputs['a'] = a
outputs['src'] = src
""",
    "from_numpy_shared": """
src = inputs['base'].copy()
a = nd.from_numpy(src, zero_copy=True)
a[1, 1] = 200
outputs['src'] = src
result['frozen'] = not src.flags.writeable
""",
    "gradient_through_views": """
x = nd.array(inputs['base'])
x.attach_grad()
with autograd.record():
    y = (x[1] * 2).sum() + (x[:, 1] * x[:, 2]).sum() + x.reshape((4, 6))[0].sum() + nd.flatten(x).sum()
y.backward()
outputs['grad'] = x.grad
""",
    "hybridized_block_output_is_new": """
class Net(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        return F.reshape(F.slice_axis(x, axis=1, begin=0, end=4), (-1,)) * 1
net = Net()
net.hybridize()
x = nd.array(inputs['base'])
first = net(x)
first[:] = 0
second = net(x)
outputs['x'] = x
outputs['second'] = second
""",
})


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_writes_through_results_land_where_mxnet_puts_them(mxnet, name: str) -> None:
    ours, theirs = compare(CASES, name, INPUTS, mxnet, rtol=0, atol=0)
    assert ours == theirs


def test_views_keep_training_correct_when_hybridized() -> None:
    """A hybridized net that slices and reshapes its input trains to the same weights as the
    imperative one (its reused buffers are not views of anything a step writes)."""

    class Net(gluon.HybridBlock):
        def __init__(self) -> None:
            super().__init__()
            self.dense = gluon.nn.Dense(3, in_units=4)

        def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
            left = F.slice_axis(x, axis=1, begin=0, end=4)
            return self.dense(left) + F.reshape(x, (-1, 2, 4)).sum(axis=1)[:, :3]

    weights = []
    for hybridize in (False, True):
        net = Net()
        net.initialize(init="ones")
        if hybridize:
            net.hybridize(static_alloc=True)
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        x = nd.array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8))
        for _ in range(3):
            with autograd.record():
                loss = (net(x) ** 2).sum()
            loss.backward()
            trainer.step(2)
        weights.append(net.dense.weight.data().asnumpy())
    np.testing.assert_allclose(weights[0], weights[1], rtol=1e-6)
