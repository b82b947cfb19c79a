"""At submit, the model is checked against its training data as the worker will build it
(issue 26 items 1-2): an uploaded image set reaches the network through the spec's
transforms (HWC images become CHW tensors), and a layer that cannot take its input is a
422 naming it, for every model form."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

import engine as mx
from core import repositories
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness


def gluon_cnn_files(*, flatten_to: int | None = None) -> tuple[bytes, bytes]:
    """A Gluon CNN for 3x32x32 images, hybridized and exported in MXNet's format (the
    engine writes what MXNet 1.9 writes); with ``flatten_to``, a Dense over the flattened
    feature maps, whose weights fit only 32x32 inputs."""
    net = mx.gluon.nn.HybridSequential(prefix="cnn_")
    with net.name_scope():
        net.add(mx.gluon.nn.Conv2D(8, 3, padding=1), mx.gluon.nn.BatchNorm(),
                mx.gluon.nn.Activation("relu"), mx.gluon.nn.MaxPool2D(2))
        if flatten_to is None:
            net.add(mx.gluon.nn.GlobalAvgPool2D())
        net.add(mx.gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(mx.nd.zeros((1, 3, 32, 32)))
    with tempfile.TemporaryDirectory() as folder:
        net.export(str(Path(folder) / "cnn"))
        return ((Path(folder) / "cnn-symbol.json").read_bytes(),
                (Path(folder) / "cnn-0000.params").read_bytes())


def upload_model(api: ApiHarness, headers: dict[str, str], files: tuple[bytes, bytes],
                 shape: str = "1,3,32,32") -> str:
    symbol, params = files
    response = api.client.post(
        "/v1/models", data={"input_shape": shape},
        files={"symbol": ("cnn-symbol.json", symbol), "params": ("cnn-0000.params", params)},
        headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def image_set(api: ApiHarness, user_id: str, fmt: str, sizes: dict[str, int]) -> str:
    """A ready RecordIO or image-archive data set as validation records it: images are
    (H, W, 3), the most common size first."""
    height, width = (int(n) for n in next(iter(sizes)).split("x"))
    rows = sum(sizes.values())
    with api.sessions() as session:
        dataset = repositories.create_dataset(
            session, owner_id=user_id, name=f"{fmt}-set", format=fmt, status="ready",
            storage_key="datasets/x", size=1, sha256="0" * 64, num_rows=rows,
            feature_shape=[height, width, 3], dtype="uint8", num_classes=2,
            stats={"image_sizes": sizes, "mean": [0.5] * 3, "std": [0.2] * 3})
        session.commit()
        return dataset.id


def submit(api: ApiHarness, headers: dict[str, str], model: Any, data: dict[str, Any]
           ) -> Any:
    spec = digits_spec(model=model, data={"batch_size": 16, **data}, lr_scheduler=None)
    return api.client.post("/v1/jobs", json=spec, headers=headers)


@pytest.mark.parametrize("fmt", ["recordio", "archive"])
def test_an_nchw_cnn_uploaded_for_3x32x32_trains_on_uploaded_images(api: ApiHarness,
                                                                    fmt: str) -> None:
    """The issue: refused with "the model takes input (1, 3, 32, 32) but the training
    data's rows are (32, 32, 3)" although the transforms end with ToTensor."""
    user_id, headers = api.make_user()
    model_id = upload_model(api, headers, gluon_cnn_files(flatten_to=8 * 16 * 16))
    images = image_set(api, user_id, fmt, {"32x32": 40})
    for transforms in ([{"type": "ToTensor"}], None, [
            {"type": "RandomFlipLeftRight"}, {"type": "ToTensor"},
            {"type": "Normalize", "mean": [0.5, 0.5, 0.5], "std": [0.2, 0.2, 0.2]}]):
        train = {"dataset": images, **({"transforms": transforms} if transforms else {})}
        response = submit(api, headers, {"model": model_id, "params": True},
                          {"train": train, "val": {"dataset": images}})
        assert response.status_code == 201, response.text


def test_transforms_decide_the_size_the_upload_must_fit(api: ApiHarness) -> None:
    user_id, headers = api.make_user()
    fixed = upload_model(api, headers, gluon_cnn_files(flatten_to=8 * 16 * 16))
    pooled = upload_model(api, headers, gluon_cnn_files())
    large = image_set(api, user_id, "archive", {"64x48": 10})
    to_32 = {"dataset": large, "transforms": [{"type": "Resize", "size": 32},
                                              {"type": "ToTensor"}]}
    crop_40 = {"dataset": large, "transforms": [{"type": "CenterCrop", "size": 40}]}
    assert submit(api, headers, {"model": fixed}, {"train": to_32}).status_code == 201
    assert submit(api, headers, {"model": pooled}, {"train": crop_40}).status_code == 201
    # the exported Dense weights are (10, 8*16*16), for 32x32 images: not for 40x40 crops
    refused = submit(api, headers, {"model": fixed}, {"train": crop_40})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["details"][0]["field"] == "model.model"
    assert "(16, 3, 40, 40)" in error["message"] and "cnn_dense0_weight" in error["message"]


def test_images_of_several_sizes_need_a_transform_to_one(api: ApiHarness) -> None:
    user_id, headers = api.make_user()
    model_id = upload_model(api, headers, gluon_cnn_files())
    mixed = image_set(api, user_id, "archive", {"32x32": 30, "40x36": 10})
    refused = submit(api, headers, {"model": model_id}, {"train": {"dataset": mixed}})
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["field"] == "data.train.transforms"
    cropped = {"dataset": mixed, "transforms": [{"type": "CenterCrop", "size": 32}]}
    assert submit(api, headers, {"model": model_id}, {"train": cropped}).status_code == 201


def test_a_reshape_that_cannot_apply_is_refused_at_submit_naming_it(api: ApiHarness) -> None:
    """The issue: ``shape: [-1, 1, 7, 7]`` on 64 features was accepted and failed in the
    worker; docs/job-spec.md promises an accepted job builds."""
    _, headers = api.make_user()
    layers = [{"type": "Dense", "units": 64}, {"type": "Reshape", "shape": [-1, 1, 7, 7]},
              {"type": "Conv2D", "channels": 4, "kernel_size": 3}, {"type": "Dense", "units": 10}]
    response = api.client.post("/v1/jobs", json=digits_spec(model=layers), headers=headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["details"][0]["field"] == "model.1"
    assert "cannot reshape (64, 64) with shape=(-1, 1, 7, 7)" in error["message"]
    first = [{"type": "Reshape", "shape": [-1, 1, 7, 7]}, {"type": "Dense", "units": 10}]
    response = api.client.post("/v1/jobs", json=digits_spec(model=first), headers=headers)
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["field"] == "model.0"
    fits = [{"type": "Reshape", "shape": [-1, 1, 8, 8]}, {"type": "Dense", "units": 10}]
    assert api.client.post("/v1/jobs", json=digits_spec(model=fits),
                           headers=headers).status_code == 201


def test_a_validation_split_the_model_cannot_take_is_refused(api: ApiHarness) -> None:
    user_id, headers = api.make_user()
    model_id = upload_model(api, headers, gluon_cnn_files(flatten_to=8 * 16 * 16))
    small = image_set(api, user_id, "recordio", {"32x32": 20})
    large = image_set(api, user_id, "recordio", {"48x48": 20})
    response = submit(api, headers, {"model": model_id, "params": False},
                      {"train": {"dataset": small}, "val": {"dataset": large}})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["details"][0]["field"] == "data.val"
    assert "(3, 48, 48)" in error["message"]
