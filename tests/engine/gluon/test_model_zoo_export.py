"""Zoo networks travel between MXNet 1.9.1 and Rudder in MXNet's own files, both ways.

MXNet side: a zoo net with random weights and batch-norm statistics is exported
(``-symbol.json`` + ``-0000.params``) and saved with ``save_parameters``; Rudder imports the
graph with ``SymbolBlock.imports``, loads the params file into its own zoo model by name
(both the export's ``arg:``/``aux:`` full names and save_parameters' attribute paths), and
every route must compute MXNet's inference output within 1e-4. Rudder side: a zoo net with
random weights is exported; MXNet imports the graph and loads the params into its own zoo
model by name, and must compute Rudder's output within 1e-4.
"""

import numpy as np
import pytest

import engine as mx
from engine import gluon
from engine.gluon.model_zoo import vision
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

# name -> (batch, square input size), the smallest input each net runs on
CASES = {
    "resnet18_v1": (2, 32), "resnet18_v2": (2, 32), "mobilenet1.0": (2, 32),
    "mobilenetv2_1.0": (2, 32), "vgg11_bn": (2, 32), "alexnet": (1, 64),
    "densenet121": (1, 224), "squeezenet1.1": (1, 224), "inceptionv3": (1, 299),
}
INPUTS = {name: np.random.RandomState(i).uniform(-1, 1, (batch, 3, size, size))
          .astype(np.float32) for i, (name, (batch, size)) in enumerate(sorted(CASES.items()))}

# Random batch-norm gamma/beta/statistics as well as weights, so that a parameter loaded
# under the wrong name (or an auxiliary state read as an argument) changes the output.
RANDOMIZE = """
def randomize(net, seed):
    rng = np.random.RandomState(seed)
    for key, p in net._collect_params_with_prefix().items():
        if key.endswith("running_var") or key.endswith("gamma"):
            p.set_data(nd.array(rng.uniform(0.5, 1.5, p.shape)))
        elif key.endswith("running_mean") or key.endswith("beta"):
            p.set_data(nd.array(rng.uniform(-0.5, 0.5, p.shape)))
        else:
            p.set_data(nd.array(rng.normal(0, (2.0 / max(1, np.prod(p.shape[1:]))) ** 0.5,
                                           p.shape)))
"""

MXNET_EXPORTS = RANDOMIZE + """
from mxnet.gluon.model_zoo import vision
for i, name in enumerate(names):
    net = vision.get_model(name, classes=10)
    net.initialize()
    x = nd.array(inputs[name])
    net(x)
    randomize(net, i)
    net.hybridize()
    outputs[name] = net(x)
    net.export(folder + "/" + name)
    net.save_parameters(folder + "/" + name + ".saved.params")
    result[name] = net.prefix
"""

MXNET_IMPORTS = """
from mxnet.gluon.model_zoo import vision
for name, prefix in prefixes.items():
    x = nd.array(inputs[name])
    block = gluon.SymbolBlock.imports(folder + "/" + name + "-symbol.json", ["data"],
                                      folder + "/" + name + "-0000.params")
    outputs[name + ".imported"] = block(x)
    net = vision.get_model(name, classes=10, prefix=prefix)
    net.collect_params().load(folder + "/" + name + "-0000.params")
    outputs[name + ".by_name"] = net(x)
"""


def assert_close(ours, theirs, what):
    """Within 1e-4, relative to each element and to the output's scale."""
    scale = max(float(np.abs(theirs).max()), 1.0)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * scale, err_msg=what)


@pytest.fixture(scope="module")
def mxnet_exports(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mxnet_zoo"))
    code = f"names = {sorted(CASES)!r}\nfolder = {folder!r}\n" + MXNET_EXPORTS
    return folder, run_mxnet(code, INPUTS, timeout=600)


@pytest.fixture(scope="module")
def rudder_exports(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("rudder_zoo"))
    space = {"np": np, "nd": mx.nd}
    exec(RANDOMIZE, space)  # noqa: S102 - the test's own source
    expected, prefixes = {}, {}
    for i, name in enumerate(sorted(CASES)):
        net = vision.get_model(name, classes=10)
        net.initialize()
        x = mx.nd.array(INPUTS[name])
        net(x)
        space["randomize"](net, 100 + i)
        expected[name] = net(x).asnumpy()
        net.export(f"{folder}/{name}")
        prefixes[name] = net.prefix
    code = f"prefixes = {prefixes!r}\nfolder = {folder!r}\n" + MXNET_IMPORTS
    return expected, run_mxnet(code, INPUTS, timeout=600)


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_mxnet_exported_zoo_net_imports_as_a_symbol_block(name, mxnet_exports):
    folder, run = mxnet_exports
    block = gluon.SymbolBlock.imports(f"{folder}/{name}-symbol.json", ["data"],
                                      f"{folder}/{name}-0000.params")
    assert_close(block(mx.nd.array(INPUTS[name])).asnumpy(), run[name], f"{name} imported")


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnets_params_files_load_by_name_into_the_zoo_model(name, mxnet_exports):
    folder, run = mxnet_exports
    x = mx.nd.array(INPUTS[name])
    # the export's arg:/aux: full names, into a net with MXNet's prefix
    net = vision.get_model(name, classes=10, prefix=run.json[name])
    net.collect_params().load(f"{folder}/{name}-0000.params")
    assert_close(net(x).asnumpy(), run[name], f"{name} loaded from the export's params")
    # save_parameters' attribute paths, into a net with whatever prefix it gets here
    net = vision.get_model(name, classes=10)
    net.load_parameters(f"{folder}/{name}.saved.params")
    net.hybridize()
    assert_close(net(x).asnumpy(), run[name], f"{name} loaded from save_parameters")


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_rudder_exported_zoo_net_runs_the_same_in_mxnet(name, rudder_exports):
    expected, run = rudder_exports
    assert_close(run[name + ".imported"], expected[name], f"{name} imported by MXNet")
    assert_close(run[name + ".by_name"], expected[name], f"{name} loaded by name in MXNet")
