"""hybridize(): a traced static program, bit-identical to the imperative path on CPU.

Each test builds the same network twice (same weights), hybridizes one, runs both the same
way and compares exactly: outputs, every Parameter gradient and the weights after Trainer
steps.
"""

import warnings

import numpy as np
import pytest

import engine
from engine import autograd, gluon, nd
from engine.gluon import nn
from tests.oracle import run_mxnet


def mlp(acts=("relu", "tanh"), seed=0, in_units=8, batch=5):
    """A Dense stack with random (not initializer) weights, so both copies match exactly."""
    rng = np.random.default_rng(seed)
    net = nn.HybridSequential()
    units = in_units
    for act in acts:
        net.add(nn.Dense(16, activation=act, in_units=units))
        units = 16
    net.add(nn.Dense(4, in_units=units))
    net.initialize()
    for p in net.collect_params().values():
        p.set_data(nd.array(rng.standard_normal(p.shape).astype(np.float32) * 0.5))
    x = nd.array(rng.standard_normal((batch, in_units)).astype(np.float32))
    return net, x


def pair(**kw):
    imperative, x = mlp(**kw)
    hybrid, _ = mlp(**kw)
    hybrid.hybridize(static_alloc=True, static_shape=True)
    return imperative, hybrid, x


def twins(make, seed, init=None, **hybridize):
    """The same block twice (same seed, same initial weights); the second hybridized."""
    nets = []
    for _ in range(2):
        engine.random.seed(seed)
        net = make()
        net.initialize() if init is None else net.initialize(init)
        nets.append(net)
    nets[1].hybridize(**hybridize)
    return nets


def assert_params_equal(a, b, grads=True):
    for pa, pb in zip(a.collect_params().values(), b.collect_params().values(), strict=True):
        np.testing.assert_array_equal(pa.data().asnumpy(), pb.data().asnumpy(), err_msg=pa.name)
        if grads and pa.grad_req != "null":
            np.testing.assert_array_equal(pa.grad().asnumpy(), pb.grad().asnumpy(),
                                          err_msg=pa.name)


def kernels_of(block):
    (program,) = block._cached_graph.programs.values()
    return [type(k).__name__ for k in program.kernels]


@pytest.mark.parametrize("acts", [("relu", "relu"), ("tanh", "sigmoid"), ("softrelu",)])
def test_training_with_adam_is_bit_identical(acts):
    imperative, hybrid, x = pair(acts=acts)
    y = nd.array([0, 1, 2, 3, 0])
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainers = [gluon.Trainer(n.collect_params(), "adam", {"learning_rate": 0.01})
                for n in (imperative, hybrid)]
    for _ in range(4):
        losses = []
        for net, trainer in zip((imperative, hybrid), trainers, strict=True):
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(x.shape[0])
            losses.append(loss.asnumpy())
        np.testing.assert_array_equal(*losses)
        assert_params_equal(imperative, hybrid)
    np.testing.assert_array_equal(imperative(x).asnumpy(), hybrid(x).asnumpy())


def test_replay_fuses_dense_and_activation_into_one_tape_node():
    _, hybrid, x = pair(acts=("relu", "sigmoid"))
    for _ in range(2):  # the first call traces (training mode is part of the signature)
        with autograd.record():
            out = hybrid(x)
    assert kernels_of(hybrid) == ["FullyConnectedKernel"] * 3
    # one node for the whole block, fed by the input and the six parameter arrays
    assert len(out._node.inputs) == 7
    assert out._node.inputs[0] is x


def test_outputs_survive_later_calls_though_buffers_are_reused():
    _, hybrid, x = pair()
    first = hybrid(x)
    kept = first.asnumpy().copy()
    hybrid(x * 2)
    hybrid(x * 3)
    np.testing.assert_array_equal(first.asnumpy(), kept)


def test_two_recorded_calls_before_one_backward():
    imperative, hybrid, x = pair()
    x2 = x * -1.5
    for net in (imperative, hybrid):
        net(x)  # the hybrid one traces here
        with autograd.record():
            total = net(x).sum() + (net(x2) * net(x2)).sum()
        total.backward()
    assert_params_equal(imperative, hybrid)


def test_new_input_shape_or_dtype_traces_again():
    imperative, hybrid, x = pair()
    for batch in (5, 3, 5, 9):
        xb = nd.array(np.resize(x.asnumpy(), (batch, 8)))
        np.testing.assert_array_equal(imperative(xb).asnumpy(), hybrid(xb).asnumpy())
    assert len(hybrid._cached_graph.programs) == 3
    x64 = x.astype("float64")
    np.testing.assert_array_equal(imperative(x64).asnumpy(), hybrid(x64).asnumpy())
    assert len(hybrid._cached_graph.programs) == 4


def test_input_gradient_and_grad_req_add():
    imperative, hybrid, x = pair()
    for net in (imperative, hybrid):
        net.collect_params().setattr("grad_req", "add")
        net.collect_params().zero_grad()
    grads = []
    for net in (imperative, hybrid):
        xi = x.copy()
        xi.attach_grad()
        for _ in range(3):  # the hybrid one traces on the first pass
            with autograd.record():
                out = (net(xi) ** 2).sum()
            out.backward()
        grads.append(xi.grad.asnumpy())
    np.testing.assert_array_equal(*grads)
    assert_params_equal(imperative, hybrid)


def test_autograd_grad_of_input_is_not_overwritten_by_the_next_call():
    _, hybrid, x = pair()
    x.attach_grad()
    hybrid(x)
    with autograd.record():
        out = hybrid(x).sum()
    (gx,) = autograd.grad(out, [x])
    kept = gx.asnumpy().copy()
    with autograd.record():
        hybrid(x * 5).sum().backward()
    np.testing.assert_array_equal(gx.asnumpy(), kept)


class Shared(gluon.HybridBlock):
    """The same Dense applied twice, then a broadcast op the program replays generically."""

    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.dense = nn.Dense(8, activation="relu", in_units=8)
            self.scale = self.params.get("scale", shape=(1,), init="ones")

    def hybrid_forward(self, F, x, scale):
        return F.broadcast_mul(self.dense(self.dense(x)), scale)


def test_shared_parameters_and_generic_ops_match_imperative():
    nets = twins(lambda: Shared(prefix="shared_"), 3, init=engine.init.Normal(0.5))
    x = nd.array(np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32))
    for _ in range(3):
        for net in nets:
            with autograd.record():
                out = net(x).sum()
            out.backward()
        assert_params_equal(*nets)
    assert kernels_of(nets[1]) == ["FullyConnectedKernel", "FullyConnectedKernel",
                                   "GenericKernel"]


def conv_bn_dropout():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=2), nn.BatchNorm(in_channels=4), nn.Activation("relu"),
            nn.Dropout(0.3), nn.Flatten(), nn.Dense(3, in_units=4 * 4 * 4))
    return net


def test_dropout_and_batchnorm_replay_identically_under_the_same_seed():
    nets = twins(conv_bn_dropout, 7, static_alloc=True)
    x = nd.array(np.random.default_rng(2).standard_normal((2, 2, 6, 6)).astype(np.float32))
    outs = [[], []]
    for step in range(3):
        for i, net in enumerate(nets):
            engine.random.seed(100 + step)
            with autograd.record():
                out = net(x)
                total = out.sum()
            total.backward()
            outs[i].append(out.asnumpy())
            outs[i].append(net(x).asnumpy())  # inference mode: running statistics
        assert_params_equal(*nets)
    for a, b in zip(*outs, strict=True):
        np.testing.assert_array_equal(a, b)


class Operators(gluon.HybridBlock):
    """Operators, methods and properties on arrays inside hybrid_forward are traced."""

    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.dense = nn.Dense(6, in_units=6)

    def hybrid_forward(self, F, x):
        h = self.dense(x.reshape((x.shape[0], -1)))
        return (F.relu(h * 2 - 1) + h.T.T[:, ::2].sum(axis=1, keepdims=True)) / 3


def test_operators_and_methods_in_hybrid_forward_replay_identically():
    nets = twins(lambda: Operators(prefix="ops_"), 5)
    x = nd.array(np.random.default_rng(3).standard_normal((4, 2, 3)).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: everything was traceable
        for _ in range(3):
            for net in nets:
                with autograd.record():
                    out = net(x).sum()
                out.backward()
            assert_params_equal(*nets)
    assert type(x) is nd.NDArray and type(nets[1](x)) is nd.NDArray


class DataDependent(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        if (x.sum() > 0).asscalar():  # Python control flow on values: not a static graph
            return F.relu(x)
        return -x


class MadeOutsideTrace(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        return F.relu(x) + nd.ones(x.shape)  # nd.ones, not F.ones: unknown to the trace


@pytest.mark.parametrize("block_type", [DataDependent, MadeOutsideTrace])
def test_untraceable_forward_warns_once_and_stays_imperative(block_type):
    block = block_type()
    block.hybridize()
    expected = block_type()(nd.array([[-1.0, 3.0]])).asnumpy()
    with pytest.warns(UserWarning, match="cannot build a static graph"):
        first = block(nd.array([[-1.0, 3.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = block(nd.array([[-4.0, 1.0]]))
    np.testing.assert_array_equal(first.asnumpy(), expected)
    np.testing.assert_array_equal(second.asnumpy(), block_type()(nd.array([[-4.0, 1.0]])).asnumpy())


def test_hybridize_false_and_deferred_shapes():
    net = nn.HybridSequential()
    net.add(nn.Dense(3, activation="relu"), nn.Dense(2))
    net.initialize()
    net.hybridize()
    x = nd.ones((4, 6))
    out = net(x)  # deferred in_units inferred during the traced call
    assert net[0].weight.shape == (3, 6)
    np.testing.assert_array_equal(net(x).asnumpy(), out.asnumpy())
    net.hybridize(False)
    assert net._cached_graph is None
    np.testing.assert_array_equal(net(x).asnumpy(), out.asnumpy())


def test_inputs_without_an_array_raise_value_error_as_in_mxnet():
    run = run_mxnet(
        "net = gluon.nn.Dense(3, in_units=2); net.initialize(); net.hybridize()\n"
        "for i, arg in enumerate((3.0, (None, None))):\n"
        "    try:\n"
        "        net(arg)\n"
        "    except Exception as err:\n"
        "        result[str(i)] = type(err).__name__\n"
    )
    net = nn.Dense(3, in_units=2)
    net.initialize()
    net.hybridize()
    for i, arg in enumerate((3.0, (None, None))):
        with pytest.raises(ValueError, match="one NDArray or one Symbol"):
            net(arg)
        assert run.json[str(i)] == "ValueError"


def test_sequential_hybridize_recommends_hybrid_sequential():
    net = nn.Sequential()
    net.add(nn.Dense(2), nn.Dense(1))
    with pytest.warns(UserWarning, match="Consider using HybridSequential"):
        net.hybridize()
    mixed = nn.Sequential()
    mixed.add(nn.Dense(2), nn.Lambda(lambda x: x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mixed.hybridize()


class TwoHeads(gluon.HybridBlock):
    """Several outputs (nested), one of them unused by the loss."""

    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.body = nn.Dense(6, activation="relu", in_units=4)
            self.left = nn.Dense(2, in_units=6)
            self.right = nn.Dense(3, in_units=6)

    def hybrid_forward(self, F, x):
        h = self.body(x)
        return self.left(h), (self.right(h), F.sigmoid(h))


def test_several_outputs_keep_their_structure_and_gradients():
    nets = twins(lambda: TwoHeads(prefix="heads_"), 11, init=engine.init.Normal(0.5),
                 static_alloc=True)
    x = nd.array(np.random.default_rng(4).standard_normal((5, 4)).astype(np.float32))
    for _ in range(3):
        for net in nets:
            with autograd.record():
                left, (right, _unused) = net(x)
                total = (left * left).sum() + right.sum()
            total.backward()
        assert_params_equal(*nets)
    out = nets[1](x)
    assert isinstance(out, tuple) and isinstance(out[1], tuple)
    assert [o.shape for o in (out[0], *out[1])] == [(5, 2), (5, 3), (5, 6)]


def test_forward_hooks_run_on_every_hybridized_call():
    _, hybrid, x = pair()
    seen = []
    hybrid.register_forward_pre_hook(lambda block, args: seen.append("pre"))
    hybrid.register_forward_hook(lambda block, args, out: seen.append(out.shape))
    for _ in range(3):
        hybrid(x)
    assert seen == ["pre", (5, 4)] * 3


def test_float64_parameters_with_float32_inputs_keep_numpys_promotion():
    imperative, hybrid, x = pair()
    for net in (imperative, hybrid):
        net.cast("float64")
    for _ in range(2):
        outs = [net(x) for net in (imperative, hybrid)]
        assert outs[0].dtype == outs[1].dtype == np.float64
        np.testing.assert_array_equal(outs[0].asnumpy(), outs[1].asnumpy())


def test_a_retained_graph_differentiates_again_after_later_calls():
    imperative, hybrid, x = pair()
    grads = []
    for net in (imperative, hybrid):
        net(x)
        with autograd.record():
            kept = net(x).sum()
        kept.backward(retain_graph=True)
        with autograd.record():
            other = (net(x * 3) ** 2).sum()
        other.backward()
        kept.backward()  # the first graph again: its buffers must not have been reused
        grads.append([p.grad().asnumpy().copy() for p in net.collect_params().values()])
    for a, b in zip(*grads, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(hybrid._cached_graph.programs) == 2


class WithStates(gluon.HybridBlock):
    """Inputs as a nested list (as recurrent layers take their states)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.dense = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, states):
        h, c = states
        return self.dense(x) + h * c, [h + 1, c]


def test_nested_list_inputs_are_traced_and_replayed():
    nets = twins(lambda: WithStates(prefix="ws_"), 2)
    x = nd.ones((2, 3))
    states = [nd.full((2, 3), 0.5), nd.full((2, 3), 2.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            outs = [net(x, states) for net in nets]
            np.testing.assert_array_equal(outs[0][0].asnumpy(), outs[1][0].asnumpy())
            np.testing.assert_array_equal(outs[0][1][0].asnumpy(), outs[1][1][0].asnumpy())
    assert len(nets[1]._cached_graph.programs) == 1
    x.attach_grad()
    grads = []
    for net in nets:  # one array as two inputs: its gradient sums both uses
        for _ in range(2):
            with autograd.record():
                out, _ = net(x, [x, x])
                total = out.sum()
            total.backward()
        grads.append(x.grad.asnumpy().copy())
    np.testing.assert_array_equal(*grads)


@pytest.mark.parametrize("name", ["engine.gluon.hybrid.trace", "engine.gluon.hybrid.cached",
                                  "engine.gluon.hybrid.hybrid_block"])
def test_docstring_examples_of_the_hybrid_modules(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


class ChecksForNd(gluon.HybridBlock):
    """MXNet code that branches on `F is mx.nd` (the trace's F is not engine.nd)."""

    def hybrid_forward(self, F, x):
        if F is nd:
            return F.relu(x)
        raise TypeError("symbolic branch not supported by this block")


def test_a_forward_that_fails_only_under_the_trace_falls_back_with_a_warning():
    block = ChecksForNd()
    block.hybridize()
    with pytest.warns(UserWarning, match="TypeError.*while being traced"):
        out = block(nd.array([-1.0, 2.0]))
    np.testing.assert_array_equal(out.asnumpy(), [0.0, 2.0])
    with pytest.raises(ValueError, match="one NDArray"):
        block(None)


def test_a_real_error_in_a_hybridized_forward_still_raises():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="features"):
            net(nd.ones((2, 5)))
        assert net(nd.ones((2, 3))).shape == (2, 2)


def test_frozen_layers_stay_frozen_and_the_rest_trains_identically():
    imperative, hybrid, x = pair()
    for net in (imperative, hybrid):
        net[0].collect_params().setattr("grad_req", "null")
    frozen = hybrid[0].weight.data().asnumpy().copy()
    trainers = [gluon.Trainer(n.collect_params(), "sgd", {"learning_rate": 0.1})
                for n in (imperative, hybrid)]
    for _ in range(3):
        for net, trainer in zip((imperative, hybrid), trainers, strict=True):
            with autograd.record():
                loss = (net(x) ** 2).sum()
            loss.backward()
            trainer.step(5)
        assert_params_equal(imperative, hybrid)
    np.testing.assert_array_equal(hybrid[0].weight.data().asnumpy(), frozen)


def _memory_left_after_a_step(hybridize: bool) -> int:
    import tracemalloc

    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"),
            nn.MaxPool2D(2), nn.Dense(10))
    net.initialize(engine.init.Xavier())
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    trainer = gluon.Trainer(net.collect_params(), "adam")
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x = nd.array(np.random.default_rng(0).random((16, 3, 16, 16), dtype=np.float32))
    y = nd.array(np.arange(16) % 10)
    for _ in range(2):  # the second step reuses what the first one allocated
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(16)
    tracemalloc.start()
    try:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(16)
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_a_hybridized_step_frees_its_forward_values_once_backward_ran():
    # The program's forward values (and its operators' saved temporaries) used to live until
    # the next call: a conv step kept ~2.5x the memory alive and re-faulted it every step.
    # What stays is the static buffers (reused next call), not the step's values.
    imperative = _memory_left_after_a_step(False)
    hybridized = _memory_left_after_a_step(True)
    assert hybridized <= imperative, (hybridized, imperative)


def _conv_net(prefix: str) -> nn.HybridSequential:
    net = nn.HybridSequential(prefix=prefix)
    net.add(nn.Conv2D(8, 3, padding=1, in_channels=3), nn.BatchNorm(in_channels=8),
            nn.Activation("relu"), nn.Conv2D(4, 3, in_channels=8), nn.GlobalAvgPool2D(),
            nn.Dense(3, in_units=4))
    return net


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_weight_gradients_land_in_the_parameters_own_buffers(grad_req):
    """A hybridized program writes each weight gradient into the Parameter's gradient buffer
    (the same array before and after, as a Trainer or a kvstore holding it expects),
    equal to the imperative one; 'add' accumulates over two backwards."""
    rng = np.random.default_rng(3)
    x = nd.array(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    nets = []
    for hybrid in (False, True):
        net = _conv_net("c_")
        net.initialize(engine.init.Xavier())
        for i, p in enumerate(net.collect_params().values()):
            # seeded by position: the two nets' names differ in their layers' counters
            # (conv9 against conv10, after other tests made layers)
            p.set_data(nd.array(np.random.default_rng(i).standard_normal(
                p.shape).astype(np.float32)))
            p.grad_req = grad_req
        if hybrid:
            net.hybridize(static_alloc=True, static_shape=True)
        nets.append(net)
    buffers = {name: p.grad().raw for name, p in nets[1].collect_params().items()
               if p.grad_req != "null"}
    for net in nets:
        for _ in range(2):
            with autograd.record():
                loss = net(x).sum()
            loss.backward()
    for (name, p), q in zip(nets[1].collect_params().items(),
                            nets[0].collect_params().values(), strict=True):
        if p.grad_req == "null":
            continue
        assert p.grad().raw is buffers[name], name
        np.testing.assert_allclose(p.grad().asnumpy(), q.grad().asnumpy(), rtol=1e-5,
                                   atol=1e-5, err_msg=name)


def test_a_parameter_shared_by_two_hybridized_blocks_gets_both_gradients():
    shared = nn.Dense(3, in_units=4)
    first, second = nn.HybridSequential(), nn.HybridSequential()
    first.add(shared)
    second.add(shared)
    shared.initialize()
    first.hybridize(static_alloc=True)
    second.hybridize(static_alloc=True)
    x = nd.array(np.arange(8, dtype=np.float32).reshape(2, 4))
    with autograd.record():
        loss = (first(x) * 2 + second(x)).sum()
    loss.backward()
    expected = 3 * x.asnumpy().sum(axis=0)  # d/dW of sum(3·(xW^T + b)) per output row
    np.testing.assert_allclose(shared.weight.grad().asnumpy(),
                               np.tile(expected, (3, 1)), rtol=1e-6)


def _train_conv_net(net, steps, after_first=None):
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    rng = np.random.default_rng(5)
    x = nd.array(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    y = nd.array(np.arange(4) % 3)
    for i in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(4)
        if i == 0 and after_first is not None:
            after_first(net)


def test_a_hybridized_net_leaves_no_reference_cycles_holding_arrays():
    # Arrays held only by a reference cycle outlive their step until the garbage collector
    # runs: the tracer and its F (the whole traced forward) and a recursive closure around
    # each generic operator's inputs did, a gigabyte on a GPU for ResNet-18 at batch 128.
    import gc

    from engine.gluon.hybrid.trace import Tracer

    net = _conv_net("cycles_")
    net.initialize(engine.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _train_conv_net(net, 3)  # the first call traces, the others replay
        gc.collect()
        held = [type(o).__name__ for o in gc.garbage
                if isinstance(o, (nd.NDArray, Tracer, np.ndarray))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert held == []


def test_the_gpus_buffer_policy_trains_bit_identically_and_releases_results_early():
    """What a GPU program does (engine/gluon/hybrid/program.py: a fresh buffer set per call,
    each kernel's results and gradients dropped once its backward ran), run on numpy, where
    CI can check it: the same floats as the CPU's kept buffers, and by the time the first
    kernel's backward runs, every other kernel's results are gone."""
    nets = twins(lambda: _conv_net("policy_"), seed=7, init=engine.init.Xavier(),
                 static_alloc=True, static_shape=True)
    reference = twins(lambda: _conv_net("policy_"), seed=7, init=engine.init.Xavier(),
                      static_alloc=True, static_shape=True)[1]
    left_at_the_end = []

    def per_call(net):
        (program,) = net._cached_graph.programs.values()
        program.per_call_buffers = True
        last = program._backward_kernels[-1]
        earlier = {s for k in program._backward_kernels[:-1] for s in program._produced[id(k)]}
        original = last.backward

        def backward(run):  # the first kernel of the forward: the last of the backward
            left_at_the_end.append(sum(run.values[s] is not None for s in earlier
                                       if s not in program.output_slots))
            original(run)

        last.backward = backward

    _train_conv_net(nets[1], 4, after_first=per_call)
    _train_conv_net(reference, 4)
    assert_params_equal(reference, nets[1])
    (program,) = nets[1]._cached_graph.programs.values()
    assert program._lent == []  # no set kept for the next call
    assert left_at_the_end == [0, 0, 0]
