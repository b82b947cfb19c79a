"""The seed tutorials' code, run as written with ``mxnet`` replaced by ``engine``."""

import numpy as np
import pytest

SEED_000 = """
from engine import np, autograd, optimizer, gluon
net = gluon.nn.Dense(1)
net.initialize()
trainer = gluon.Trainer(net.collect_params(),
                        optimizer='sgd', optimizer_params={'learning_rate':1})
batch_size = 8
X = np.random.uniform(size=(batch_size, 4))
y = np.random.uniform(size=(batch_size,))
loss = gluon.loss.L2Loss()
def forward_backward():
    with autograd.record():
        l = loss(net(X), y)
    l.backward()
forward_backward()
curr_weight = net.weight.data().copy()
"""

SEED_003 = SEED_000.replace("from engine import np,", "from engine import nd,").replace(
    "np.random.uniform(size=(batch_size, 4))", "nd.random.uniform(shape=(batch_size, 4))").replace(
    "np.random.uniform(size=(batch_size,))", "nd.random.uniform(shape=(batch_size,))")

TRAINER_STEPS = """
trainer.step(batch_size)
after_sgd = net.weight.data().copy()
expected = curr_weight - net.weight.grad() * 1 / batch_size
optim = optimizer.Adam(learning_rate = 1)
trainer = gluon.Trainer(net.collect_params(), optim)
forward_backward()
trainer.step(batch_size)
trainer.set_learning_rate(0.1)
lr = trainer.learning_rate
"""


@pytest.mark.parametrize("code", [SEED_000, SEED_003], ids=["seed000_np", "seed003_nd"])
def test_seed_forward_backward_gives_the_l2_gradient(code):
    scope = {}
    exec(code, scope)  # the tutorial text itself, not a job spec
    net, X, y = scope["net"], scope["X"].asnumpy(), scope["y"].asnumpy()
    w, b = net.weight.data().asnumpy(), net.bias.data().asnumpy()
    residual = X @ w.T + b - y[:, None]  # d/dw of sum 0.5 * residual^2
    np.testing.assert_allclose(net.weight.grad().asnumpy(), residual.T @ X, rtol=1e-5)
    np.testing.assert_allclose(net.bias.grad().asnumpy(), residual.sum(0), rtol=1e-5)


@pytest.mark.parametrize("code", [SEED_000, SEED_003], ids=["seed000_np", "seed003_nd"])
def test_seed_trainer_steps_run(code):
    scope = {}
    exec(code + TRAINER_STEPS, scope)
    np.testing.assert_allclose(scope["after_sgd"].asnumpy(), scope["expected"].asnumpy(),
                               rtol=1e-6)
    assert scope["lr"] == pytest.approx(0.1)
