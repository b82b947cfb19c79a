"""Autograd semantics: recording scopes, grad_req, retain_graph, deep graphs, autograd.grad."""

import numpy as np
import pytest

from engine import autograd, nd


def test_seed_style_record_and_backward_accumulate_through_shared_inputs():
    x = nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = x * x + x * 3  # two paths into x
        z = y.sum()
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * np.array([1, 2, 3]) + 3)


def test_scopes_report_recording_and_training():
    assert not autograd.is_recording() and not autograd.is_training()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
        with autograd.predict_mode():
            assert autograd.is_recording() and not autograd.is_training()
    with autograd.record(train_mode=False):
        assert not autograd.is_training()
    with autograd.train_mode():
        assert autograd.is_training() and not autograd.is_recording()
    assert not autograd.is_recording()


def test_operations_outside_record_are_not_differentiated():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    y = x * 2
    with pytest.raises(ValueError, match="autograd.record"):
        y.backward()


def test_grad_req_add_accumulates_and_write_overwrites():
    x = nd.array([1.0, 2.0])
    x.attach_grad(grad_req="add")
    for _ in range(3):
        with autograd.record():
            y = (x * 2).sum()
        y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [6.0, 6.0])
    x.attach_grad(grad_req="write")
    for _ in range(3):
        with autograd.record():
            y = (x * 2).sum()
        y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [2.0, 2.0])


def test_grad_req_null_leaves_no_gradient_and_bad_req_is_refused():
    x = nd.array([1.0])
    x.attach_grad(grad_req="null")
    w = nd.array([3.0])
    w.attach_grad()
    with autograd.record():
        y = (x * w).sum()
    y.backward()
    np.testing.assert_allclose(w.grad.asnumpy(), [1.0])
    np.testing.assert_allclose(x.grad.asnumpy(), [0.0])
    with pytest.raises(ValueError, match="grad_req"):
        x.attach_grad(grad_req="sometimes")


def test_backward_twice_needs_retain_graph():
    x = nd.array([2.0])
    x.attach_grad(grad_req="add")
    with autograd.record():
        y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [8.0])
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()


def test_head_gradient_scales_the_result():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = x * 3
    y.backward(nd.array([10.0, 100.0]))
    np.testing.assert_allclose(x.grad.asnumpy(), [30.0, 300.0])


def test_deep_graph_has_no_recursion_limit():
    x = nd.array([1.0])
    x.attach_grad()
    with autograd.record():
        y = x
        for _ in range(5000):
            y = y * 1.0001
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [1.0001**5000], rtol=1e-4)


def test_autograd_grad_returns_without_touching_dot_grad():
    x = nd.array([1.0, 2.0], dtype="float64")
    x.attach_grad()
    with autograd.record():
        y = (x**3).sum()
    (gx,) = autograd.grad(y, [x])
    np.testing.assert_allclose(gx.asnumpy(), 3 * np.array([1.0, 4.0]))
    np.testing.assert_allclose(x.grad.asnumpy(), [0.0, 0.0])
    # create_graph records the gradient instead (second order: test_autograd_function.py)
    (gx2,) = autograd.grad(y, [x], create_graph=True)
    np.testing.assert_allclose(gx2.asnumpy(), gx.asnumpy())


def test_mark_variables_routes_gradients_into_given_buffers():
    x = nd.array([1.0, 2.0])
    g = nd.zeros((2,))
    autograd.mark_variables([x], [g])
    with autograd.record():
        y = (x * 5).sum()
    y.backward()
    np.testing.assert_allclose(g.asnumpy(), [5.0, 5.0])
    with pytest.raises(ValueError, match="2 gradients"):
        autograd.mark_variables([x], [g, g])


def test_backward_marks_fresh_gradient_for_stale_checks():
    x = nd.array([1.0])
    x.attach_grad()
    assert not x._fresh_grad
    with autograd.record():
        y = x * 2
    y.backward()
    assert x._fresh_grad


def test_detach_and_stop_gradient_cut_the_graph():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = (x.detach() * x).sum() + (nd.BlockGrad(x) * 0).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [1.0, 2.0])


def test_inplace_update_outside_record_keeps_the_buffer():
    w = nd.ones((3,))
    raw = w.raw
    w -= 0.5
    w[:] *= 2
    w[1:] = 7
    assert w.raw is raw
    np.testing.assert_allclose(w.asnumpy(), [1.0, 7.0, 7.0])


def test_weight_gradients_written_in_place_match_the_copying_path():
    """FullyConnected writes single-use weight gradients straight into the grad buffer;
    a weight shared by two layers, or with grad_req='add', must still sum correctly."""
    rng = np.random.default_rng(3)
    x = nd.array(rng.standard_normal((4, 3)), dtype="float64")
    w = nd.array(rng.standard_normal((3, 3)), dtype="float64")
    b = nd.array(rng.standard_normal(3), dtype="float64")
    w.attach_grad()
    b.attach_grad()
    buffer = w.grad.raw
    with autograd.record():
        y = nd.FullyConnected(nd.FullyConnected(x, w, b), w, b).sum()
    y.backward()
    assert w.grad.raw is buffer  # still the same buffer (Trainer views rely on it)
    xn, wn, bn = x.asnumpy(), w.asnumpy(), b.asnumpy()
    h = xn @ wn.T + bn
    g_out = np.ones((4, 3))
    g_h = g_out @ wn
    expected_w = g_out.T @ h + g_h.T @ xn
    np.testing.assert_allclose(w.grad.asnumpy(), expected_w, rtol=1e-12)
    np.testing.assert_allclose(b.grad.asnumpy(), g_out.sum(0) + g_h.sum(0), rtol=1e-12)

    w.attach_grad(grad_req="add")
    for _ in range(2):
        with autograd.record():
            y = nd.FullyConnected(x, w, no_bias=True).sum()
        y.backward()
    np.testing.assert_allclose(w.grad.asnumpy(), 2 * np.ones((4, 3)).T @ xn, rtol=1e-12)
