"""Segments and optimizers carry declared fields only (no probing, no lazy attributes)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import engine as mx
from engine import optimizer as opt
from engine.optimizer.segments import Segments, WholeArray


def test_segments_declare_their_parameter_indices_and_bounds() -> None:
    seg = Segments([2, 3], [4, 7])
    assert seg.indices == (4, 7) and seg.bounds == [(0, 2), (2, 5)]
    assert seg.sum(np.arange(5.0)).tolist() == [1.0, 9.0]
    with pytest.raises(AttributeError):
        seg.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="2 sizes for 1"):
        Segments([2, 3], [0])
    whole = WholeArray(3)
    assert whole.indices == (3,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        whole.index = 4  # type: ignore[misc]


@pytest.mark.parametrize("cls", opt.Optimizer.opt_registry.classes(), ids=lambda c: c.__name__)
def test_updates_create_no_attributes_beyond_the_constructors(cls) -> None:
    optimizer = mx.optimizer.create(cls.__name__, learning_rate=0.1)
    declared = set(vars(optimizer))
    weight, grad = mx.nd.ones((3,)), mx.nd.ones((3,)) * 0.5
    state = optimizer.create_state_multi_precision(0, weight)
    for _ in range(3):
        optimizer.update_multi_precision(0, weight, grad, state)
    assert set(vars(optimizer)) == declared


def test_lars_names_parameters_from_the_segment_alone() -> None:
    """LARS keeps lr for *bias/*gamma/*beta: the names come from the segment's indices,
    on the one-parameter path and the fused many-parameter path alike."""
    names = {0: "fc_weight", 1: "fc_bias"}
    rng = np.random.default_rng(0)
    start = [rng.standard_normal(4).astype("float32") for _ in names]
    grads = [rng.standard_normal(4).astype("float32") for _ in names]

    def one_by_one() -> list[np.ndarray]:
        lars = opt.create("lars", learning_rate=0.1, param_idx2name=names)
        out = []
        for i in names:
            w = mx.nd.array(start[i])
            lars.update(i, w, mx.nd.array(grads[i]), None)
            out.append(w.asnumpy())
        return out

    lars = opt.create("lars", learning_rate=0.1, param_idx2name=names)
    flat_w, flat_g = np.concatenate(start), np.concatenate(grads)
    lars.fused_update([0, 1], flat_w, flat_g, None, Segments([4, 4], [0, 1]))
    expected = one_by_one()
    np.testing.assert_allclose(flat_w, np.concatenate(expected), rtol=1e-6)
    # the bias kept the plain SGD step: w - lr * g
    np.testing.assert_allclose(expected[1], start[1] - 0.1 * grads[1], rtol=1e-6)


def test_an_older_state_file_cannot_add_undeclared_attributes() -> None:
    lars = opt.create("lars", learning_rate=0.1)
    state = lars.state_dict()
    state["hyper"]["_current_index"] = 5  # written by earlier versions of LARS
    lars.load_state_dict(state)
    assert "_current_index" not in vars(lars)
