"""Networks from MXNet 1.9.1's own model zoo, exported by MXNet with random weights, import in
the engine as SymbolBlocks and compute the same predictions and training-mode outputs, and
gradients that are right (so an imported zoo network can be fine-tuned here).

Gradients are compared with MXNet's for ResNet; for the MobileNets, MXNet 1.9.1's CPU build
returns gradients for the layers below the last stride-2 depthwise block that are a few
percent off (e.g. ``mobilenet0_batchnorm22_beta`` 17% off), while the engine's agree with
finite differences of the same network in float64; there the check is against
finite differences."""

import numpy as np
import pytest

from engine import autograd, gluon, nd
from engine.ndarray.mxnet_format import read_params
from engine.symbol import check_params, inspect_symbol_json
from tests.oracle import needs_mxnet, run_mxnet

EXPORT_AND_DIFFERENTIATE = '''
from mxnet.gluon.model_zoo import vision
mx.random.seed(0)
net = vision.get_model(NAME, classes=10)
net.initialize(mx.init.Xavier(magnitude=2.0))
net.hybridize()
x, w = nd.array(inputs["x"]), nd.array(inputs["w"])
net(x)  # shapes are deferred until the first forward
for p in net.collect_params().values():  # moving statistics that are not the identity
    if p.name.endswith(("running_mean", "running_var")):
        low = 0.5 if p.name.endswith("var") else -0.2
        p.set_data(nd.array(np.random.RandomState(1).uniform(low, low + 0.4, size=p.shape)))
outputs["predicted"] = net(x)
net.export(PREFIX, epoch=0)
with autograd.record():
    y = net(x)
    loss = (y * w).sum()
loss.backward()
outputs["y"] = y
grads = {k: p.grad() for k, p in net.collect_params().items() if p.grad_req != "null"}
result["names"] = sorted(grads)
for i, n in enumerate(result["names"]):
    outputs["g%d" % i] = grads[n]
'''


@needs_mxnet
@pytest.mark.parametrize("name, mxnet_grads_agree", [
    ("resnet18_v1", True), ("mobilenetv2_0.25", False), ("mobilenet0.25", False)])
def test_an_mxnet_zoo_export_predicts_the_same_and_differentiates_right(name, mxnet_grads_agree,
                                                                      tmp_path):
    prefix = str(tmp_path / name)
    rng = np.random.RandomState(0)
    inputs = {"x": rng.normal(size=(4, 3, 64, 64)).astype(np.float32),
              "w": rng.normal(size=(4, 10)).astype(np.float32)}
    run = run_mxnet(f"NAME, PREFIX = {name!r}, {prefix!r}\n" + EXPORT_AND_DIFFERENTIATE, inputs)
    # what the service checks before storing an upload accepts MXNet's own export
    with open(f"{prefix}-symbol.json") as sym, open(f"{prefix}-0000.params", "rb") as prm:
        info = inspect_symbol_json(sym.read(), {"data": inputs["x"].shape})
        params = read_params(prm.read(), max_bytes=1 << 28)
    check_params(info, params)
    assert info["output_shapes"] == [(4, 10)]
    assert info["parameter_count"] == sum(v.size for v in params.values())
    net = gluon.SymbolBlock.imports(f"{prefix}-symbol.json", ["data"], f"{prefix}-0000.params")
    x, w = nd.array(inputs["x"]), nd.array(inputs["w"])
    np.testing.assert_allclose(net(x).asnumpy(), run["predicted"], rtol=1e-4, atol=1e-4)
    with autograd.record():
        y = net(x)
        loss = (y * w).sum()
    loss.backward()
    np.testing.assert_allclose(y.asnumpy(), run["y"], rtol=1e-4, atol=1e-4)
    params = net.collect_params()
    assert sorted(k for k, p in params.items() if p.grad_req != "null") == run.json["names"]
    if mxnet_grads_agree:
        for i, key in enumerate(run.json["names"]):
            expected = run[f"g{i}"]
            scale = max(1.0, float(np.abs(expected).max()))
            np.testing.assert_allclose(params[key].grad().asnumpy(), expected, rtol=1e-3,
                                       atol=1e-4 * scale, err_msg=key)
    names = run.json["names"]
    _check_by_finite_differences(net, x, w, [names[0], names[len(names) // 2], names[-1]])


def _check_by_finite_differences(net, x, w, keys, eps=1e-8):
    """The float64 gradient of a few entries of ``keys`` against central differences (a
    small step: ReLU6 and ReLU have kinks that a larger one crosses)."""
    net.cast("float64")
    x64, w64 = x.astype("float64"), w.astype("float64")
    with autograd.record():
        loss = (net(x64) * w64).sum()
    loss.backward()

    def value():
        with autograd.train_mode():
            return float((net(x64) * w64).sum().asscalar())

    for key in keys:
        param = net.collect_params()[key]
        grad = param.grad().asnumpy().ravel()
        base = param.data().asnumpy()
        for flat in np.argsort(-np.abs(grad))[:2]:
            moved = []
            for step in (eps, -eps):
                shifted = base.copy().ravel()
                shifted[flat] += step
                param.set_data(nd.array(shifted.reshape(base.shape), dtype="float64"))
                moved.append(value())
            param.set_data(nd.array(base, dtype="float64"))
            numeric = (moved[0] - moved[1]) / (2 * eps)
            assert abs(grad[flat] - numeric) <= 1e-4 * max(1.0, abs(numeric)), (key, flat)
