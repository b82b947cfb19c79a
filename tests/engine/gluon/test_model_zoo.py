"""gluon.model_zoo.vision: every network MXNet 1.9.1 offers by name has MXNet's parameter
names and shapes (so MXNet's params files load by name), and the constructors behave as
MXNet's (classes=, pretrained=, get_model's names)."""

import re

import numpy as np
import pytest

import engine as mx
from engine.gluon.model_zoo import PretrainedWeightsUnavailable, vision
from tests.oracle import needs_mxnet, run_mxnet

# The smallest square input each family runs on: the resnets and mobilenets end in a global
# pool, VGG's five 2x2 pools need 32, AlexNet's strided stem 63, and DenseNet's 7x7 and
# SqueezeNet's 13x13 final average pools need the 224 they were designed for, Inception's
# 8x8 one 299.
INPUT_SIZES = {"alexnet": 64, "densenet": 224, "squeezenet": 224, "inception": 299}


def input_size(name):
    return next((size for prefix, size in INPUT_SIZES.items() if name.startswith(prefix)), 32)


def network_prefix_stem(prefix):
    """'resnetv10_' -> 'resnetv1': the class alias without the per-process counter."""
    return re.sub(r"\d+_$", "", prefix)


def describe(net):
    """What must equal MXNet's: the net's name stem, full parameter names (without the
    net's own numbered prefix) and save_parameters' attribute-path names, with shapes."""
    return {
        "stem": network_prefix_stem(net.prefix),
        "names": [[k[len(net.prefix):], list(p.shape)] for k, p in net.collect_params().items()],
        "paths": [[k, list(p.shape)] for k, p in net._collect_params_with_prefix().items()],
    }


MXNET_DESCRIBE = """
import re
from mxnet.gluon.model_zoo import vision
try:
    vision.get_model("no-such-net")
except ValueError as err:
    result["names"] = [n.strip() for n in str(err).split("\\n")[1:]]
for key, name, kwargs, size in builds:
    net = vision.get_model(name, classes=10, **kwargs)
    net.initialize(mx.init.Zero())
    net(nd.zeros((1, 3, size, size)))
    result[key] = {
        "stem": re.sub(r"\\d+_$", "", net.prefix),
        "names": [[k[len(net.prefix):], list(p.shape)] for k, p in net.collect_params().items()],
        "paths": [[k, list(p.shape)] for k, p in net._collect_params_with_prefix().items()],
    }
"""


# the constructor options a job spec may set, which change the structure
VARIANTS = {
    "resnet18_v1(thumbnail)": ("resnet18_v1", {"thumbnail": True}),
    "resnet50_v2(thumbnail)": ("resnet50_v2", {"thumbnail": True}),
    "densenet121(dropout)": ("densenet121", {"dropout": 0.2}),
}
BUILDS = {**{name: (name, {}) for name in vision.model_names()}, **VARIANTS}


@pytest.fixture(scope="module")
def mxnet_zoo():
    builds = [(key, name, kwargs, input_size(name)) for key, (name, kwargs) in BUILDS.items()]
    code = f"builds = {builds!r}\n" + MXNET_DESCRIBE
    return run_mxnet(code, timeout=600).json


@needs_mxnet
def test_the_zoo_offers_every_name_mxnet_does(mxnet_zoo):
    assert sorted(mxnet_zoo["names"]) == vision.model_names()


@needs_mxnet
@pytest.mark.parametrize("key", list(BUILDS))
def test_parameter_names_and_shapes_equal_mxnets(key, mxnet_zoo):
    name, kwargs = BUILDS[key]
    net = vision.get_model(name, classes=10, **kwargs)
    net.initialize(mx.init.Zero())  # zeros: shapes are the point, and they are fast
    size = input_size(name)
    assert net(mx.nd.zeros((1, 3, size, size))).shape == (1, 10)
    ours, theirs = describe(net), mxnet_zoo[key]
    assert ours["stem"] == theirs["stem"]
    assert ours["names"] == theirs["names"]
    assert ours["paths"] == theirs["paths"]


def test_get_model_is_case_insensitive_and_names_the_options_on_a_typo():
    assert type(vision.get_model("ResNet18_V1")).__name__ == "ResNetV1"
    with pytest.raises(ValueError, match=r"(?s)resnet19_v1 is not supported.*\n\tresnet18_v1\n"):
        vision.get_model("resnet19_v1")


@pytest.mark.parametrize("name", ["resnet18_v1", "mobilenet0.25", "vgg11", "alexnet",
                                  "densenet121", "squeezenet1.1", "mobilenetv2_0.5",
                                  "inceptionv3"])
def test_pretrained_weights_are_refused_with_the_way_to_load_your_own(name):
    with pytest.raises(PretrainedWeightsUnavailable,
                       match="does not download.*load_parameters"):
        vision.get_model(name, pretrained=True)


def test_constructors_accept_mxnets_ctx_and_root_arguments():
    net = vision.resnet18_v2(pretrained=False, ctx=mx.cpu(), root="/nonexistent", classes=3)
    net.initialize()
    assert net(mx.nd.ones((2, 3, 32, 32))).shape == (2, 3)


def test_classes_sets_the_output_width_of_every_family():
    for name in ["resnet50_v1", "mobilenetv2_0.25", "vgg11", "alexnet", "densenet121",
                 "squeezenet1.0"]:
        net = vision.get_model(name, classes=7)
        net.initialize(mx.init.Zero())
        size = input_size(name)
        assert net(mx.nd.zeros((1, 3, size, size))).shape == (1, 7), name


def test_resnet_thumbnail_keeps_a_32x32_input_at_full_resolution_into_stage1():
    net = vision.resnet18_v1(classes=10, thumbnail=True)
    net.initialize()
    assert net.features[:1](mx.nd.ones((1, 3, 32, 32))).shape == (1, 64, 32, 32)
    assert net.features[0].weight.shape == (64, 3, 3, 3)


def test_invalid_depths_and_versions_are_value_errors():
    with pytest.raises(ValueError, match="Invalid number of layers: 20"):
        vision.get_resnet(1, 20)
    with pytest.raises(ValueError, match="Invalid resnet version: 3"):
        vision.get_resnet(3, 18)
    with pytest.raises(ValueError, match="Invalid number of layers: 12"):
        vision.get_vgg(12)
    with pytest.raises(ValueError, match="1.0 or 1.1 expected"):
        vision.SqueezeNet("2.0")


def test_mxnet_style_params_file_loads_by_name_into_the_zoo_model(tmp_path):
    """A file saved by one instance loads into a fresh one (names are attribute paths)."""
    first = vision.mobilenet0_25(classes=4)
    first.initialize(mx.init.Xavier())
    x = mx.nd.array(np.random.RandomState(0).rand(1, 3, 32, 32).astype(np.float32))
    expected = first(x).asnumpy()
    first.save_parameters(str(tmp_path / "m.params"))
    second = vision.mobilenet0_25(classes=4)
    second.load_parameters(str(tmp_path / "m.params"))
    np.testing.assert_allclose(second(x).asnumpy(), expected, rtol=1e-6)


# one small member of each family, with the input it needs
TRAINING_FAMILIES = [("resnet18_v1", 32), ("resnet18_v2", 32), ("mobilenet0.25", 32),
                     ("mobilenetv2_0.25", 32), ("vgg11_bn", 32), ("alexnet", 64),
                     ("densenet121", 224), ("squeezenet1.1", 224)]


@pytest.mark.parametrize("name,size", TRAINING_FAMILIES)
def test_one_hybridized_training_step_updates_every_trainable_parameter(name, size):
    mx.random.seed(0)
    net = vision.get_model(name, classes=4)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    rng = np.random.RandomState(1)
    x = mx.nd.array(rng.uniform(-1, 1, (2, 3, size, size)).astype(np.float32))
    label = mx.nd.array([1, 3])
    net(x)  # completes the deferred shapes, so "before" below holds every parameter
    params = net._collect_params_with_prefix()
    before = {k: p.data().asnumpy().copy() for k, p in params.items()}
    with mx.autograd.record():
        loss = loss_fn(net(x), label)
    loss.backward()
    trainer.step(2)
    assert np.isfinite(loss.asnumpy()).all()
    for key, param in params.items():
        if param.grad_req == "null" and "running" not in key:
            continue  # BatchNorm(scale=False, center=False)'s fixed gamma and beta
        changed = not np.array_equal(param.data().asnumpy(), before[key])
        # trainable weights move; batch-norm statistics move with the batch
        assert changed, f"{name}: {key} did not change after a training step"


def test_resnet18_v1_learns_a_fixed_batch():
    mx.random.seed(0)
    net = vision.resnet18_v1(classes=10)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd",
                               {"learning_rate": 0.01, "momentum": 0.9})
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    rng = np.random.RandomState(2)
    x = mx.nd.array(rng.uniform(-1, 1, (8, 3, 32, 32)).astype(np.float32))
    label = mx.nd.array(rng.randint(0, 10, 8))
    losses = []
    for _ in range(4):
        with mx.autograd.record():
            loss = loss_fn(net(x), label)
        loss.backward()
        trainer.step(8)
        losses.append(float(loss.mean().asscalar()))
    assert losses[-1] < 0.5 * losses[0], losses
