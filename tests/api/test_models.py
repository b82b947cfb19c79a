"""POST/GET/DELETE /v1/models (issue 12): an uploaded MXNet symbol is checked by the engine
before anything is stored; a job trains it with ``model: {model: id}``."""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select

from core.models import UploadedModel
from core.storage import open_store
from tests import model_files
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness


def _upload(api: ApiHarness, headers: dict[str, str], *, symbol: bytes | None = None,
            params: bytes | None = None, input_shape: str = "1,64",
            **form: str) -> Any:
    files = {"symbol": ("net-symbol.json", symbol or model_files.symbol_json())}
    if params is not None:
        files["params"] = ("net-0000.params", params)
    return api.client.post("/v1/models", files=files,
                           data={"input_shape": input_shape, **form}, headers=headers)


def _stored(api: ApiHarness) -> tuple[int, list[str]]:
    """Model rows and model objects (the harness is shared: compare before and after)."""
    with api.sessions() as session:
        rows = int(session.scalar(select(func.count()).select_from(UploadedModel)) or 0)
    return rows, [o.key for o in open_store(api.settings.storage_url).list("models/")]


def test_an_upload_is_described_stored_with_sha256_and_trainable(api: ApiHarness) -> None:
    _, headers = api.make_user()
    symbol, params = model_files.symbol_json(), model_files.params_file()
    response = _upload(api, headers, symbol=symbol, params=params, name="residual")
    assert response.status_code == 201, response.text
    model = response.json()
    assert model["name"] == "residual"
    assert model["input_name"] == "data" and model["input_shape"] == [1, 64]
    assert model["output_shapes"] == [[1, 10]]
    assert model["ops"]["Convolution"] == 2 and model["ops"]["elemwise_add"] == 1
    # 2 convolutions (4*1*9+4, 4*4*9+4), BatchNorm (4 gamma, beta, mean, var), FC (10*4+10)
    assert model["parameter_count"] == 40 + 148 + 16 + 50
    assert model["symbol_sha256"] == hashlib.sha256(symbol).hexdigest()
    assert model["params_sha256"] == hashlib.sha256(params).hexdigest()
    store = open_store(api.settings.storage_url)
    assert store.get(f"models/{model['id']}/model-0000.params") == params

    assert api.client.get(f"/v1/models/{model['id']}", headers=headers).json() == model
    assert [m["id"] for m in api.client.get("/v1/models", headers=headers).json()["data"]] \
        == [model["id"]]
    spec = digits_spec(model={"model": model["id"], "params": True})
    assert api.client.post("/v1/jobs", json=spec, headers=headers).status_code == 201


def test_another_users_model_is_not_found_anywhere(api: ApiHarness) -> None:
    _, alice = api.make_user()
    _, bob = api.make_user()
    model_id = _upload(api, alice).json()["id"]
    assert api.client.get(f"/v1/models/{model_id}", headers=bob).status_code == 404
    assert api.client.delete(f"/v1/models/{model_id}", headers=bob).status_code == 404
    assert api.client.get("/v1/models", headers=bob).json()["data"] == []
    response = api.client.post("/v1/jobs", json=digits_spec(model={"model": model_id}),
                               headers=bob)
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["field"] == "model.model"
    assert api.client.get(f"/v1/models/{model_id}", headers=alice).status_code == 200


def test_a_model_in_use_is_kept_then_deleted_with_its_files(api: ApiHarness) -> None:
    _, headers = api.make_user()
    model_id = _upload(api, headers, params=model_files.params_file()).json()["id"]
    job = api.client.post("/v1/jobs", json=digits_spec(model={"model": model_id}),
                          headers=headers).json()
    response = api.client.delete(f"/v1/models/{model_id}", headers=headers)
    assert response.status_code == 409 and job["id"] in response.json()["error"]["details"]["jobs"]
    assert api.client.post(f"/v1/jobs/{job['id']}/cancel", headers=headers).status_code < 300
    assert api.client.delete(f"/v1/models/{model_id}", headers=headers).status_code == 204
    assert api.client.get(f"/v1/models/{model_id}", headers=headers).status_code == 404
    assert not [key for key in _stored(api)[1] if model_id in key]


def _set_op(name: str, op: str) -> Callable[[dict[str, Any]], None]:
    def change(graph: dict[str, Any]) -> None:
        next(n for n in graph["nodes"] if n["name"] == name)["op"] = op
    return change


def _set_attr(name: str, key: str, value: str) -> Callable[[dict[str, Any]], None]:
    def change(graph: dict[str, Any]) -> None:
        next(n for n in graph["nodes"] if n["name"] == name)["attrs"][key] = value
    return change


def _one_node(op: str, attrs: dict[str, str], inputs: int = 1) -> bytes:
    """``data`` -> one ``op`` node (its inputs all ``data``; none: an added to data)."""
    nodes: list[dict[str, Any]] = [{"op": "null", "name": "data", "inputs": []},
                                   {"op": op, "name": "hostile", "attrs": attrs,
                                    "inputs": [[0, 0, 0]] * inputs}]
    if not inputs:
        nodes.append({"op": "broadcast_add", "name": "out", "inputs": [[0, 0, 0], [1, 0, 0]]})
    return json.dumps({"nodes": nodes, "arg_nodes": [0],
                       "heads": [[len(nodes) - 1, 0, 0]]}).encode()


def _chain(op: str, length: int) -> bytes:
    """``data`` through ``length`` nodes of ``op`` (issue 25: ~60 bytes a node)."""
    nodes = [{"op": "null", "name": "data", "inputs": []}] + [
        {"op": op, "name": f"n{i}", "inputs": [[i, 0, 0]]} for i in range(length)]
    return json.dumps({"nodes": nodes, "arg_nodes": [0], "heads": [[length, 0, 0]]}).encode()


def _cycle(graph: dict[str, Any]) -> None:
    # the stem convolution reads the last node's output: the graph loops
    stem = next(i for i, n in enumerate(graph["nodes"]) if n["name"] == "stem")
    graph["nodes"][stem]["inputs"][0] = [len(graph["nodes"]) - 1, 0, 0]


class _Evil:
    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("unpickled!",))


BAD_UPLOADS: list[tuple[str, dict[str, Any], int, str, str]] = [
    ("malformed JSON", {"symbol": b'{"nodes": [}'}, 422, "symbol", "JSON"),
    ("not a symbol", {"symbol": b'{"layers": []}'}, 422, "symbol", "nodes"),
    ("JSON nested too deeply", {"symbol": b"[" * 100_000}, 422, "symbol", "nested"),
    ("unknown op", {"symbol": model_files.with_nodes(model_files.symbol_json(),
                                                     _set_op("branch", "NoSuchOp"))},
     422, "symbol", "NoSuchOp"),
    ("cycle", {"symbol": model_files.with_nodes(model_files.symbol_json(), _cycle)},
     422, "symbol", "cycle"),
    ("shape mismatch", {"input_shape": "1,65"}, 422, "symbol", "to_image"),
    ("input shape not integers", {"input_shape": "1,x"}, 422, "input_shape", "integers"),
    ("no such input", {"input_name": "pixels"}, 422, "input_name", "pixels"),
    ("params names", {"params": model_files.params_file(rename={"fc_weight": "dense_weight"})},
     422, "params", "fc_weight"),
    ("params shapes", {"params": model_files.params_file(reshape={"fc_weight": (10, 5)})},
     422, "params", "fc_weight"),
    ("params a pickle", {"params": pickle.dumps({"arg:fc_weight": np.zeros((10, 4)),
                                                 "x": _Evil()})}, 422, "params", "pickle"),
    ("params an npz", {"params": b"PK\x03\x04" + bytes(64)}, 422, "params", "npz"),
    ("params garbage", {"params": bytes(range(256)) * 4}, 422, "params", "MXNet"),
    ("oversized symbol", {"symbol": b" " * (8 * 1024 * 1024 + 1)}, 413, "symbol", "limit"),
    # issue 25: every attribute against its operator's domain, shapes without running
    ("act_type outside its domain", {"symbol": model_files.with_nodes(
        model_files.symbol_json(), _set_attr("stem_relu", "act_type",
                                             "__import__('os').system('id')"))},
     422, "symbol", "act_type"),
    ("pool type outside its domain", {"symbol": model_files.with_nodes(
        model_files.symbol_json(), _set_attr("pool", "pool_type", "median"))},
     422, "symbol", "pool_type"),
    ("an attribute the operator lacks", {"symbol": _one_node("sum", {"axis": "1",
                                                                     "flavour": "x"})},
     422, "symbol", "unknown attribute 'flavour'"),
    ("an operator without a shape function", {"symbol": _one_node("Correlation", {}, 2)},
     422, "symbol", "no shape function"),
    ("a node past the element bound", {"symbol": _one_node("_arange", {
        "start": "0", "stop": "1e12"}, 0)}, 413, "symbol", "1000000000000 elements"),
    ("more nodes than a graph may have", {"symbol": _chain("sin", 100_001)}, 413, "symbol",
     "100000"),
    ("a chain computing too much", {"symbol": _chain("sin", 1000), "input_shape":
                                    "1,8192,8192"}, 413, "symbol", "forward pass"),
]


@pytest.mark.parametrize(("upload", "status", "field", "words"),
                         [case[1:] for case in BAD_UPLOADS], ids=[c[0] for c in BAD_UPLOADS])
def test_a_bad_upload_is_refused_naming_the_problem_and_nothing_is_stored(
    api: ApiHarness, upload: dict[str, Any], status: int, field: str, words: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, headers = api.make_user()
    before = _stored(api)
    response = _upload(api, headers, **upload)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["details"][0]["field"] == field
    assert words.lower() in error["message"].lower(), error["message"]
    assert _stored(api) == before
    assert "unpickled!" not in capsys.readouterr().out


def test_a_model_that_cannot_take_the_data_is_refused_at_submit(api: ApiHarness) -> None:
    _, headers = api.make_user()
    model_id = _upload(api, headers).json()["id"]  # no params file
    cases = [
        # the run-time failure, now a 422 that says what to add
        ([{"type": "Conv2D", "channels": 4, "kernel_size": 3}, {"type": "Dense", "units": 10}],
         "model.0", "Reshape, shape: [-1, 1, 8, 8]"),
        ({"zoo": "resnet18_v1", "classes": 10}, "model.zoo", "images"),
        ({"model": model_id, "params": True}, "model.params", "without a params file"),
    ]
    for model, field, words in cases:
        response = api.client.post("/v1/jobs", json=digits_spec(model=model), headers=headers)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["details"][0]["field"] == field
        assert words in response.json()["error"]["message"]
    iris = digits_spec(model={"model": model_id},
                       data={"train": {"builtin": "iris"}, "batch_size": 8})
    response = api.client.post("/v1/jobs", json=iris, headers=headers)
    assert response.status_code == 422 and "(1, 64)" in response.json()["error"]["message"]
    reshaped = [{"type": "Reshape", "shape": [-1, 1, 8, 8]},
                {"type": "Conv2D", "channels": 4, "kernel_size": 3}, {"type": "Dense", "units": 10}]
    response = api.client.post("/v1/jobs", json=digits_spec(model=reshaped), headers=headers)
    assert response.status_code == 201, response.text


def test_an_oversized_params_file_is_413_naming_it_and_nothing_is_stored(make_api: Any) -> None:
    api = make_api(limits={"max_upload_bytes": 1_000})
    _, headers = api.make_user()
    before = _stored(api)
    params = model_files.params_file()
    assert len(params) > 1_000
    response = _upload(api, headers, params=params)
    assert response.status_code == 413, response.text
    assert response.json()["error"]["details"][0]["field"] == "params"
    huge = _upload(api, headers, params=params * 100)  # over the whole request's limit
    assert huge.status_code == 413
    assert _stored(api) == before


def _image_symbol_json(flat_features: int | None = None) -> bytes:
    """A small network over 3-channel images (no Reshape: it takes CHW as it comes); with
    ``flat_features``, its feature maps are reshaped to exactly that many features, as a
    graph exported for one image size hard-codes it."""
    import engine as mx

    conv = mx.sym.Convolution(mx.sym.var("data"), num_filter=4, kernel=(3, 3), name="conv")
    if flat_features is not None:
        flat = mx.sym.Reshape(conv, shape=(0, flat_features), name="to_features")
        return str(mx.sym.FullyConnected(flat, num_hidden=10, name="fc").tojson()).encode()
    pooled = mx.sym.Pooling(conv, kernel=(1, 1), global_pool=True, pool_type="avg",
                            name="pool")
    fc = mx.sym.FullyConnected(mx.sym.Flatten(pooled), num_hidden=10, name="fc")
    return str(fc.tojson()).encode()


def test_image_builtins_reach_the_model_as_chw_images_after_their_transforms(
    api: ApiHarness,
) -> None:
    """The built-in image sets are CHW tensors to the network (not flat rows): an upload
    declared for 3x32x32 and a zoo net train on cifar10, and a crop changes the shape: a
    graph that pools globally takes 28x28 crops, one that hard-codes 32x32 is refused."""
    _, headers = api.make_user()
    model_id = _upload(api, headers, input_shape="1,3,32,32",
                       symbol=_image_symbol_json()).json()["id"]
    cifar = {"train": {"builtin": "cifar10", "transforms": [{"type": "ToTensor"}]},
             "batch_size": 16}
    for model in ({"model": model_id}, {"zoo": "resnet18_v1", "classes": 10},
                  [{"type": "Conv2D", "channels": 4, "kernel_size": 3},
                   {"type": "Dense", "units": 10}]):
        response = api.client.post("/v1/jobs", json=digits_spec(model=model, data=cifar),
                                   headers=headers)
        assert response.status_code == 201, (model, response.text)
    cropped = {"train": {"builtin": "cifar10", "transforms": [
        {"type": "RandomResizedCrop", "size": 28}, {"type": "ToTensor"}]}, "batch_size": 16}
    response = api.client.post("/v1/jobs", json=digits_spec(model={"model": model_id},
                                                            data=cropped), headers=headers)
    assert response.status_code == 201, response.text
    fixed_id = _upload(api, headers, input_shape="1,3,32,32",
                       symbol=_image_symbol_json(flat_features=4 * 30 * 30)).json()["id"]
    response = api.client.post("/v1/jobs", json=digits_spec(model={"model": fixed_id},
                                                            data=cropped), headers=headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["details"][0]["field"] == "model.model"
    assert "(16, 3, 28, 28)" in error["message"] and "to_features" in error["message"]
