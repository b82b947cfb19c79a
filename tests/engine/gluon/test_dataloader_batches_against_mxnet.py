"""Differential tests: a forked DataLoader worker returns whatever batch structure the
dataset and ``batchify_fn`` make, as MXNet 1.9.1's workers do: tuples of arrays, nested
lists, dicts, numbers and strings, not only arrays."""

from __future__ import annotations

import numpy as np
import pytest

from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet

pytestmark = needs_mxnet

INPUTS = {"x": np.arange(24, dtype=np.float32).reshape(8, 3)}

STRUCTURES = {
    "tuple_with_int_label": "(nd.array(inputs['x'][i]), i)",
    "nested_lists": "[nd.array(inputs['x'][i]), [float(i), [i * 2, 'item']]]",
    "dict": "{'data': inputs['x'][i], 'index': i, 'name': f'row{i}'}",
    "numbers_only": "(i, i * 0.5)",
}

LOAD = """
class Items(gluon.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return {item}
def keep(samples):  # the batch is the list of samples itself
    return samples
# MXNet pickles the dataset and batchify_fn to its workers: make them findable by name
import __main__
for _obj in (Items, keep):
    _obj.__qualname__ = _obj.__name__
    _obj.__module__ = '__main__'
    setattr(__main__, _obj.__name__, _obj)
def plain(value):
    if hasattr(value, 'asnumpy'):
        return ['array', value.asnumpy().tolist()]
    if isinstance(value, np.ndarray):
        return ['array', value.tolist()]
    if isinstance(value, dict):
        return {{k: plain(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [plain(v) for v in value]]
    return value
for workers in [0, 2]:
    loader = gluon.data.DataLoader(Items(), batch_size=3, num_workers=workers, batchify_fn=keep)
    result[str(workers)] = [plain(batch) for batch in loader]
default = gluon.data.DataLoader(Items(), batch_size=4, num_workers=2)
result['default'] = [plain(batch) for batch in default] if {default_ok} else None
"""

CASES = {name: LOAD.format(item=item, default_ok=name != "dict" and name != "nested_lists")
         for name, item in STRUCTURES.items()}


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, INPUTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_worker_processes_return_every_batch_structure(mxnet, name: str) -> None:
    ours, theirs = compare(CASES, name, INPUTS, mxnet)
    assert ours == theirs
    assert ours["2"] == ours["0"]  # workers change nothing
