"""workers.networks: every model form builds hybridized, an upload's params are its initial
weights, and a trained network leaves as MXNet files that load back (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import engine as mx
from core.jobspec import parse_spec
from core.storage import (
    MODEL_META_FILE,
    MODEL_PARAMS_FILE,
    MODEL_SYMBOL_FILE,
    LocalStore,
    job_export_prefix,
    model_prefix,
)
from engine.ndarray.mxnet_format import read_params
from tests import model_files
from tests.api.specs import digits_spec
from workers import networks
from workers.build import SpecError

MODEL_ID = "12345678-1234-1234-1234-123456789012"


def _store_upload(tmp_path: Path, *, params: bool = True) -> LocalStore:
    store = LocalStore(tmp_path / "objects")
    prefix = model_prefix(MODEL_ID)
    store.put(prefix + MODEL_SYMBOL_FILE, model_files.symbol_json())
    store.put(prefix + MODEL_META_FILE, json.dumps(
        {"input_name": "data", "input_shape": list(model_files.INPUT_SHAPE)}).encode())
    if params:
        store.put(prefix + MODEL_PARAMS_FILE, model_files.params_file(seed=5))
    return store


def _model(model: object) -> object:
    return parse_spec(digits_spec(model=model)).model


def _built(model: object, store: LocalStore, x: np.ndarray) -> tuple[object, mx.nd.NDArray]:
    net = networks.build_model(_model(model), store)
    net.initialize(mx.init.Xavier())
    return net, net(mx.nd.array(x))


def test_a_zoo_network_builds_with_the_same_names_in_every_build(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    spec = {"zoo": "resnet18_v1", "classes": 10, "thumbnail": True}
    x = np.random.default_rng(0).normal(size=(2, 3, 32, 32)).astype(np.float32)
    first, out = _built(spec, store, x)
    second, _ = _built(spec, store, x)
    assert out.shape == (2, 10)
    names = list(first.collect_params().keys())
    assert names == list(second.collect_params().keys()) and len(names) > 60
    # what MXNet names them in a fresh process, however many this process built before
    assert names[0] == "resnetv10_conv0_weight"


def test_an_upload_starts_from_its_params_unless_told_not_to(tmp_path: Path) -> None:
    store = _store_upload(tmp_path)
    x = np.random.default_rng(1).random((4, 64)).astype(np.float32)
    stored = read_params(model_files.params_file(seed=5), max_bytes=10**7)
    for params, loaded in ((None, True), (True, True), (False, False)):
        net, out = _built({"model": MODEL_ID, "params": params}, store, x)
        assert out.shape == (4, 10)
        assert networks.load_initial_weights(net, _model({"model": MODEL_ID, "params": params}),
                                             store, mx.cpu()) is loaded
        weight = net.collect_params()["fc_weight"].data().asnumpy()
        assert np.array_equal(weight, stored["arg:fc_weight"]) is loaded


def test_params_asked_for_but_not_uploaded_fail_with_a_reason(tmp_path: Path) -> None:
    store = _store_upload(tmp_path, params=False)
    x = np.zeros((1, 64), dtype=np.float32)
    net, _ = _built({"model": MODEL_ID, "params": True}, store, x)
    with pytest.raises(SpecError, match="without a params file"):
        networks.load_initial_weights(net, _model({"model": MODEL_ID, "params": True}),
                                      store, mx.cpu())
    with pytest.raises(SpecError, match="gone from storage"):
        networks.build_model(_model({"model": "00000000-1234-1234-1234-123456789012"}), store)


@pytest.mark.parametrize("form", ["layers", "uploaded"])
def test_an_exported_network_loads_back_with_the_same_outputs(tmp_path: Path, form: str) -> None:
    store = _store_upload(tmp_path)
    model: object = {"model": MODEL_ID} if form == "uploaded" else [
        {"type": "Reshape", "shape": [-1, 1, 8, 8]},
        {"type": "Conv2D", "channels": 4, "kernel_size": 3, "activation": "relu"},
        {"type": "GlobalMaxPool2D"}, {"type": "Dense", "units": 10}]
    x = np.random.default_rng(2).random((3, 64)).astype(np.float32)
    net, out = _built(model, store, x)
    sizes = networks.export_network(net, store, "job-1")
    assert set(sizes) == {MODEL_SYMBOL_FILE, MODEL_PARAMS_FILE}
    folder = tmp_path / "download"
    for name in sizes:
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_bytes(store.get(job_export_prefix("job-1") + name))
    again = mx.gluon.SymbolBlock.imports(str(folder / MODEL_SYMBOL_FILE), ["data"],
                                         str(folder / MODEL_PARAMS_FILE))
    np.testing.assert_allclose(again(mx.nd.array(x)).asnumpy(), out.asnumpy(), rtol=1e-5,
                               atol=1e-6)


def test_an_uploaded_networks_checkpoint_loads_back_into_a_new_build(tmp_path: Path) -> None:
    """What a resumed job does: save_parameters, then load_parameters into a fresh build."""
    store = _store_upload(tmp_path)
    x = np.random.default_rng(3).random((2, 64)).astype(np.float32)
    net, out = _built({"model": MODEL_ID}, store, x)
    net.save_parameters(str(tmp_path / "params.npz"))
    again, _ = _built({"model": MODEL_ID, "params": False}, store, x)
    again.load_parameters(str(tmp_path / "params.npz"))
    np.testing.assert_allclose(again(mx.nd.array(x)).asnumpy(), out.asnumpy(), rtol=1e-6)


def test_a_module_style_loss_head_is_dropped_so_the_spec_loss_sees_logits(
    tmp_path: Path
) -> None:
    store = _store_upload(tmp_path)
    with_head = mx.sym.SoftmaxOutput(model_files.residual_symbol(), name="softmax")
    store.put(model_prefix(MODEL_ID) + MODEL_SYMBOL_FILE, with_head.tojson().encode())
    x = np.random.default_rng(4).random((3, 64)).astype(np.float32)
    net, out = _built({"model": MODEL_ID}, store, x)
    assert not any("label" in name for name in net.collect_params())
    assert not np.allclose(out.asnumpy().sum(axis=1), 1.0)  # logits, not probabilities
    assert networks.load_initial_weights(net, _model({"model": MODEL_ID}), store, mx.cpu())
