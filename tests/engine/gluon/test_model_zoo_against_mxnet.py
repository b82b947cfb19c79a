"""Zoo networks compute what MXNet 1.9.1's do: MXNet builds each net with random weights
(and random batch-norm statistics), those arrays are loaded here by their save_parameters
names, and the float32 inference outputs must agree within 1e-4. For the nets without
dropout, one training-mode forward/backward must give MXNet's gradients and updated
batch-norm statistics. That comparison runs in float64: a float32 one drowns in rounding
that batch norm's backward amplifies (seen at 1-8% on mobilenet's gradients, in both
directions), which would hide a real error as easily as it fakes one.

MXNet updates batch-norm statistics in the op's backward, not its forward, so a batch norm
no gradient flows through (ResNet v2's input BN when the data needs no gradient) keeps its
statistics in MXNet while Rudder updates them; the input is given a gradient here so that
both update every batch norm.
"""

import numpy as np
import pytest

import engine as mx
from engine import autograd
from engine.gluon.model_zoo import vision
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

# name -> (batch, square input size); the smallest input each net runs on
CASES = {
    "resnet18_v1": (2, 32), "resnet18_v2": (2, 32), "mobilenet1.0": (2, 32),
    "mobilenetv2_1.0": (2, 32), "vgg11_bn": (2, 32), "alexnet": (2, 64),
    "densenet121": (1, 224), "squeezenet1.1": (1, 224), "inceptionv3": (1, 299),
}
# No dropout, so a training-mode pass is deterministic and comparable. Its input is larger
# than the inference one: batch norm over a batch of 2 at 1x1 (the last stage at 32x32)
# normalizes two values to +-1, whose gradient is ill-conditioned in any float32 engine.
TRAINED = ["resnet18_v1", "resnet18_v2", "mobilenet1.0", "mobilenetv2_1.0"]
TRAIN_INPUT = (4, 3, 64, 64)

MXNET_RUN = """
from mxnet.gluon.model_zoo import vision
rng = np.random.RandomState(7)
for name in names:
    net = vision.get_model(name, classes=10)
    net.initialize(mx.init.Xavier(magnitude=2))
    x = nd.array(inputs[name + ".x"])
    net(x)  # completes the deferred shapes
    for key, p in net._collect_params_with_prefix().items():
        # batch norm's gamma/beta and statistics get random values too, so a mix-up of
        # any two of them shows in the output
        if key.endswith("running_var") or key.endswith("gamma"):
            p.set_data(nd.array(rng.uniform(0.5, 1.5, p.shape)))
        elif key.endswith("running_mean") or key.endswith("beta"):
            p.set_data(nd.array(rng.uniform(-0.5, 0.5, p.shape)))
        # a copy: the training-mode pass below updates the statistics in place
        outputs[name + ".param." + key] = p.data().copy()
    outputs[name + ".y"] = net(x)
    if name in trained:
        net.cast("float64")
        x = nd.array(inputs[name + ".x_train"], dtype="float64")
        x.attach_grad()  # so that the input batch norm's backward runs (module docstring)
        with autograd.record():
            y = net(x)
        y.backward(nd.array(inputs[name + ".head"], dtype="float64"))
        for key, p in net._collect_params_with_prefix().items():
            if p.grad_req != "null":
                outputs[name + ".grad." + key] = p.grad()
            else:  # batch-norm statistics, updated by the training-mode pass
                outputs[name + ".stat." + key] = p.data()
"""


def _inputs():
    rng = np.random.RandomState(3)
    arrays = {}
    for name, (batch, size) in CASES.items():
        arrays[name + ".x"] = rng.uniform(-1, 1, (batch, 3, size, size)).astype(np.float32)
    for name in TRAINED:
        arrays[name + ".x_train"] = rng.uniform(-1, 1, TRAIN_INPUT).astype(np.float32)
        arrays[name + ".head"] = rng.uniform(-1, 1, (TRAIN_INPUT[0], 10)).astype(np.float32)
    return arrays


INPUTS = _inputs()


@pytest.fixture(scope="module")
def mxnet_runs():
    code = f"names = {sorted(CASES)!r}\ntrained = {TRAINED!r}\n" + MXNET_RUN
    return run_mxnet(code, INPUTS, timeout=600).arrays


def _entries(arrays, name, kind):
    head = f"{name}.{kind}."
    return {k[len(head):]: v for k, v in arrays.items() if k.startswith(head)}


def zoo_net_with_mxnets_weights(name, arrays):
    net = vision.get_model(name, classes=10)
    net.initialize(mx.init.Zero())
    net(mx.nd.array(INPUTS[name + ".x"]))  # completes the deferred shapes
    weights = _entries(arrays, name, "param")
    params = net._collect_params_with_prefix()
    assert sorted(params) == sorted(weights)
    for key, param in params.items():
        param.set_data(mx.nd.array(weights[key]))
    return net


def assert_close(ours, theirs, what, tol=1e-4):
    """Within ``tol``, relative to each element and to the array's scale (random deep nets
    produce outputs far from 1)."""
    scale = max(float(np.abs(theirs).max()), 1.0)
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol * scale, err_msg=what)


@pytest.mark.parametrize("name", sorted(CASES))
def test_inference_output_equals_mxnets_given_the_same_weights(name, mxnet_runs):
    net = zoo_net_with_mxnets_weights(name, mxnet_runs)
    ours = net(mx.nd.array(INPUTS[name + ".x"])).asnumpy()
    assert ours.shape == (CASES[name][0], 10)
    assert_close(ours, mxnet_runs[name + ".y"], f"{name} output")


@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
@pytest.mark.parametrize("name", TRAINED)
def test_training_mode_gradients_and_statistics_equal_mxnets(name, hybridize, mxnet_runs):
    net = zoo_net_with_mxnets_weights(name, mxnet_runs)
    if hybridize:
        net.hybridize()
    net.cast("float64")
    x = mx.nd.array(INPUTS[name + ".x_train"], dtype="float64")
    x.attach_grad()
    with autograd.record():
        y = net(x)
    y.backward(mx.nd.array(INPUTS[name + ".head"], dtype="float64"))
    params = net._collect_params_with_prefix()
    grads = _entries(mxnet_runs, name, "grad")
    assert sorted(grads) == sorted(k for k, p in params.items() if p.grad_req != "null")
    for key, theirs in grads.items():
        assert_close(params[key].grad().asnumpy(), theirs, f"{name} gradient of {key}",
                     tol=1e-7)
    stats = _entries(mxnet_runs, name, "stat")
    assert stats, "the batch-norm statistics were not captured"
    for key, theirs in stats.items():
        if key.endswith("gamma"):
            # a gamma with grad_req null belongs to BatchNorm(scale=False), whose gamma
            # the op ignores; MXNet also overwrites it with 1 in place, Rudder leaves it
            continue
        assert_close(params[key].data().asnumpy(), theirs, f"{name} {key} after one step",
                     tol=1e-7)
