"""The sparse softmax cross-entropy on numpy: large logits run as tasks over fixed blocks
of rows (engine.ndarray.nn_ops), with the floats of the whole-array rule."""

import numpy as np
import pytest

from engine import autograd, nd
from engine.ndarray import kernel_threads, nn_ops
from engine.ndarray.nn_ops import softmax_cross_entropy_sparse

rng = np.random.default_rng(11)


def _loss_and_grad(x, label, head, axis=-1):
    arr = nd.array(x, dtype=x.dtype)
    arr.attach_grad()
    with autograd.record():
        loss = softmax_cross_entropy_sparse(arr, nd.array(label), axis=axis)
    loss.backward(nd.array(head, dtype=x.dtype))
    return loss.asnumpy(), arr.grad.asnumpy()


@pytest.mark.parametrize("shape, axis", [((300, 1000), -1), ((60000, 10), -1),
                                         ((300, 1000, 2), 1)])
def test_blocks_of_rows_give_the_whole_array_rule_to_the_bit_on_any_thread_count(
        shape, axis, monkeypatch):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    label = rng.integers(0, shape[axis], np.delete(shape, axis % len(shape))).astype(np.float32)
    head = rng.standard_normal(label.shape).astype(np.float32)
    tasks = []
    run_tasks = nn_ops.run_tasks
    monkeypatch.setattr(nn_ops, "run_tasks", lambda t: (tasks.append(len(t)), run_tasks(t)))
    before = kernel_threads.count()
    try:
        got = []
        for count in (1, 2, 3):
            kernel_threads.set_count(count)
            got.append(_loss_and_grad(x, label, head, axis))
    finally:
        kernel_threads.set_count(before)
    assert len(tasks) == 6 and min(tasks) > 1  # forward and backward, by blocks
    monkeypatch.setattr(nn_ops, "_LOSS_BLOCK_VALUES", x.size)  # one block: the plain rule
    whole = _loss_and_grad(x, label, head, axis)
    assert len(tasks) == 6
    for result in got:
        assert all(a.tobytes() == b.tobytes() for a, b in zip(result, whole, strict=True))
    z = np.moveaxis(x.astype(np.float64), axis, -1)
    z -= z.max(axis=-1, keepdims=True)
    at = label.astype(np.int64)[..., None]
    want = np.log(np.exp(z).sum(axis=-1)) - np.take_along_axis(z, at, -1)[..., 0]
    np.testing.assert_allclose(whole[0], want, rtol=1e-5, atol=1e-5)


def test_labels_out_of_range_fail_in_blocks_as_in_the_whole_rule():
    x = rng.standard_normal((600, 1000)).astype(np.float32)
    label = np.zeros(600, np.float32)
    label[450] = 1000
    with pytest.raises(IndexError):
        softmax_cross_entropy_sparse(nd.array(x), nd.array(label))
    label[450] = -1  # wraps to the last class, as numpy's indexing
    wrapped = softmax_cross_entropy_sparse(nd.array(x), nd.array(label)).asnumpy()
    label[450] = 999
    np.testing.assert_array_equal(
        wrapped, softmax_cross_entropy_sparse(nd.array(x), nd.array(label)).asnumpy())
