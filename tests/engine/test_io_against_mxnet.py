"""Differential tests: ``mx.io`` iterators give MXNet 1.9.1's batches.

``NDArrayIter`` with ``last_batch_handle='pad'`` when the batch is larger than the data (it
wraps around as often as needed), ``CSVIter`` (the last batch completed from the start of the
file, the next epoch starting after the rows so used; labels; integer dtypes; one-array
``getdata``), and the wrappers ``ResizeIter`` and ``PrefetchingIter``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet

pytestmark = needs_mxnet

INPUTS = {
    "rows": np.arange(1, 21, dtype=np.float32).reshape(5, 4),
    "labels": np.arange(5, dtype=np.float32),
    "big": np.full((3, 4), 2147483648, np.int64),
}

WRITE_CSV = """
import os, tempfile
folder = tempfile.mkdtemp()
data_csv = os.path.join(folder, 'data.csv')
label_csv = os.path.join(folder, 'label.csv')
np.savetxt(data_csv, inputs['rows'], delimiter=',', fmt='%g')
np.savetxt(label_csv, inputs['labels'], delimiter=',', fmt='%g')
def epoch(it, prefix):
    pads = []
    for i, batch in enumerate(it):
        # copied now: MXNet's C++ iterators reuse their batch arrays for the next batch
        outputs[f'{prefix}{i}.data'] = batch.data[0].asnumpy()
        outputs[f'{prefix}{i}.label'] = batch.label[0].asnumpy()
        pads.append(batch.pad)
    result[prefix + 'pads'] = pads
"""

CASES = {
    "ndarrayiter_pad_batch_larger_than_data": """
it = mx.io.NDArrayIter(inputs['rows'][:3], inputs['labels'][:3], batch_size=7,
                       last_batch_handle='pad')
batches = list(it)
result['pads'] = [b.pad for b in batches]
for i, b in enumerate(batches):
    outputs[f'{i}.data'] = b.data[0].asnumpy()
    outputs[f'{i}.label'] = b.label[0].asnumpy()
""",
    "ndarrayiter_discard_batch_larger_than_data": """
it = mx.io.NDArrayIter(inputs['rows'][:3], batch_size=7, last_batch_handle='discard')
result['batches'] = len(list(it))
""",
    "ndarrayiter_pad_two_epochs": """
it = mx.io.NDArrayIter(inputs['rows'], inputs['labels'], batch_size=3)
for e in range(2):
    for i, b in enumerate(it):
        outputs[f'{e}.{i}'] = b.data[0].asnumpy()
        result[f'{e}.{i}'] = b.pad
    it.reset()
""",
    "csviter_round_batch_over_two_epochs": WRITE_CSV + """
it = mx.io.CSVIter(data_csv=data_csv, data_shape=(4,), label_csv=label_csv, batch_size=2)
epoch(it, 'first')
it.reset()
epoch(it, 'second')
it.reset()
epoch(it, 'third')
result['provide'] = [[d.name, list(d.shape)] for d in it.provide_data + it.provide_label]
""",
    "csviter_without_round_batch": WRITE_CSV + """
it = mx.io.CSVIter(data_csv=data_csv, data_shape=(2, 2), label_csv=label_csv, batch_size=2,
                   round_batch=False)
epoch(it, '')
""",
    "csviter_without_labels": WRITE_CSV + """
it = mx.io.CSVIter(data_csv=data_csv, data_shape=(4,), batch_size=3)
epoch(it, '')
""",
    "csviter_label_rows": WRITE_CSV + """
it = mx.io.CSVIter(data_csv=data_csv, data_shape=(4,), label_csv=data_csv, label_shape=(4,),
                   batch_size=3)
epoch(it, '')
""",
    "csviter_getters": WRITE_CSV + """
it = mx.io.CSVIter(data_csv=data_csv, data_shape=(4,), label_csv=label_csv, batch_size=2)
it.iter_next()
outputs['data'] = it.getdata().asnumpy()
outputs['label'] = it.getlabel().asnumpy()
result['pad'] = it.getpad()
result['index'] = [int(i) for i in it.getindex()]
""",
    "csviter_int_dtypes": WRITE_CSV + """
big_csv = os.path.join(folder, 'big.csv')
np.savetxt(big_csv, inputs['big'], delimiter=',', fmt='%d')
for dtype in ['int32', 'int64']:
    source = data_csv if dtype == 'int32' else big_csv
    it = mx.io.CSVIter(data_csv=source, data_shape=(4,), batch_size=3, dtype=dtype)
    batch = next(iter(it))
    outputs[dtype] = batch.data[0].asnumpy()
    result[dtype] = [np.dtype(batch.data[0].dtype).name, np.dtype(batch.label[0].dtype).name]
""",
    "csviter_refuses_a_wrong_row_shape_and_a_missing_file": WRITE_CSV + """
for name, call in [('shape', lambda: list(mx.io.CSVIter(data_csv=data_csv, data_shape=(3,)))),
                   ('missing', lambda: mx.io.CSVIter(data_csv=data_csv + '.nope',
                                                     data_shape=(4,)))]:
    try:
        call()
        result[name] = 'no error'
    except mx.base.MXNetError:
        result[name] = 'MXNetError'
""",
    "resize_iter": """
inner = mx.io.NDArrayIter(inputs['rows'], inputs['labels'], batch_size=2)
it = mx.io.ResizeIter(inner, 5)
for e in range(2):
    for i, b in enumerate(it):
        outputs[f'{e}.{i}'] = b.data[0].asnumpy()
    result[str(e)] = i + 1
    it.reset()
""",
    "prefetching_iter": """
a = mx.io.NDArrayIter(inputs['rows'], inputs['labels'], batch_size=2)
b = mx.io.NDArrayIter(inputs['rows'] * 10, inputs['labels'], batch_size=2, data_name='other',
                      label_name='other_label')
it = mx.io.PrefetchingIter([a, b])
for i, batch in enumerate(it):
    for j, d in enumerate(batch.data):
        outputs[f'{i}.{j}'] = d.asnumpy()
    result[str(i)] = batch.pad
result['names'] = [d.name for d in it.provide_data + it.provide_label]
it.reset()
result['after_reset'] = len(list(it))
""",
}


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_iterators_give_mxnet_batches(mxnet, name: str) -> None:
    ours, theirs = compare(CASES, name, INPUTS, mxnet, rtol=0, atol=0)
    assert ours == theirs
