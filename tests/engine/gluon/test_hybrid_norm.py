"""BatchNorm(+ReLU) kernels of a hybridized program: bit-identical to the imperative ops.

Issue 11's CNN layers (Conv-BN-ReLU-MaxPool) train for a few Adam steps hybridized and
imperatively from the same weights; outputs, gradients, weights and running statistics
must agree exactly, on the compiled path (float32) and on the fallback (float64).
"""

import numpy as np
import pytest

import engine
from engine import autograd, gluon, nd
from engine.gluon import nn
from tests.engine.gluon.test_hybridize import assert_params_equal, twins


def kernels_of(block):
    """The kernels of the block's training-mode program (it has an inference one too)."""
    (program,) = [p for key, p in block._cached_graph.programs.items() if key[0]]
    return [type(k).__name__ for k in program.kernels]


def cnn():
    # shapes given up front: deferred initialization would draw the twins' weights apart
    net = nn.HybridSequential()
    cin = 3
    for channels, pool in ((8, True), (16, False)):
        net.add(nn.Conv2D(channels, 3, padding=1, in_channels=cin),
                nn.BatchNorm(in_channels=channels), nn.Activation("relu"))
        if pool:
            net.add(nn.MaxPool2D())
        cin = channels
    net.add(nn.GlobalAvgPool2D(), nn.Dense(4, in_units=16))
    return net


class Residual(gluon.HybridBlock):
    """A BasicBlock's tail, relu(BN(conv(h)) + h): the BN output feeds an add, and the
    add+relu run as one kernel when both operands share a layout (``h`` a conv output, as in
    ResNet) or unfused when they do not (``h`` the NCHW block input)."""

    def __init__(self, stem=True, tail=False, **kw):
        super().__init__(**kw)
        self.stem, self.tail = stem, tail
        with self.name_scope():
            if tail:  # its backward hands the add+relu a gradient laid out otherwise
                self.conv2 = nn.Conv2D(2, 3, padding=1, in_channels=3)
            if stem:
                self.conv0 = nn.Conv2D(3, 1, in_channels=3)
            self.conv = nn.Conv2D(3, 3, padding=1, use_bias=False, in_channels=3)
            self.bn = nn.BatchNorm(in_channels=3)

    def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
        h = self.conv0(x) if self.stem else x
        out = F.Activation(self.bn(self.conv(h)) + h, act_type="relu")
        return self.conv2(out) if self.tail else out


def train_twins(make, dtype, steps=3, shape=(4, 3, 8, 8)):
    nets = twins(make, 11, init=engine.init.Xavier(), static_alloc=True)
    rng = np.random.default_rng(3)
    x = nd.array(rng.standard_normal(shape), dtype=dtype)
    y = nd.array(np.arange(shape[0]) % 4)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for net in nets:
        net.cast(dtype)
    trainers = [gluon.Trainer(n.collect_params(), "adam", {"learning_rate": 0.01}) for n in nets]
    for _ in range(steps):
        outs = []
        for net, trainer in zip(nets, trainers, strict=True):
            with autograd.record():
                out = net(x)
                loss = loss_fn(out, y) if out.ndim == 2 else (out * out).sum()
            loss.backward()
            trainer.step(shape[0])
            outs.append(out.asnumpy())
        np.testing.assert_array_equal(*outs)
        assert_params_equal(*nets)  # running statistics are parameters too
    # inference mode uses the running statistics (the operator's own path)
    np.testing.assert_array_equal(nets[0](x).asnumpy(), nets[1](x).asnumpy())
    return nets[1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv_bn_relu_pool_trains_bit_identically(dtype):
    hybrid = train_twins(cnn, dtype)
    # each BatchNorm took its ReLU (and the first its max-pool) with it
    assert kernels_of(hybrid) == ["GenericKernel", "BatchNormKernel", "GenericKernel",
                                  "BatchNormKernel", "GenericKernel", "FullyConnectedKernel"]


def test_odd_sizes_pool_outside_the_fused_kernel_and_stay_identical():
    train_twins(cnn, "float32", shape=(3, 3, 7, 7))  # 7x7 -> 3x3: the last row is dropped


@pytest.mark.parametrize(("stem", "tail"), [(True, False), (False, False), (True, True)])
def test_residual_add_relu_after_batchnorm_stays_identical(stem, tail):
    hybrid = train_twins(lambda: Residual(stem, tail), "float32", shape=(2, 3, 6, 6))
    # the BN output feeds the add, so BN keeps its output; the add takes the relu
    kernels = kernels_of(hybrid)[:-1] if tail else kernels_of(hybrid)
    assert kernels[-3:] == ["GenericKernel", "BatchNormKernel", "AddReluKernel"]


def test_a_batchnorm_output_returned_by_the_block_is_not_fused():
    class TwoOutputs(gluon.HybridBlock):
        def __init__(self, **kw):
            super().__init__(**kw)
            with self.name_scope():
                self.conv = nn.Conv2D(2, 1, in_channels=3)
                self.bn = nn.BatchNorm(in_channels=2)

        def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
            h = self.bn(self.conv(x))
            return F.relu(h) * 2 + h

    hybrid = train_twins(TwoOutputs, "float32", shape=(2, 3, 4, 4))
    assert "BatchNormKernel" in kernels_of(hybrid)
