"""Jobs on image data (issue 13): the synthetic mnist built-in and an uploaded RecordIO,
with transforms and ``normalize: auto``, trained by the real worker lifecycle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core import repositories as repo
from core.channel import Channel
from core.db import session_scope
from core.jobspec import parse_spec
from core.models import new_id
from core.storage import store_from_settings
from tests.workers.datasets import files
from workers.datasets.validate import validate_dataset
from workers.lifecycle import run_job
from workers.synthetic_data import synthetic_images

CNN = [{"type": "Conv2D", "channels": 8, "kernel_size": 3, "activation": "relu"},
       {"type": "MaxPool2D", "pool_size": 2},
       {"type": "Flatten"},
       {"type": "Dense", "units": 10}]


@pytest.fixture
def home(worker_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the worker keeps its data cache (settings.home/cache)."""
    from core.config import get_settings

    monkeypatch.setenv("RUDDER_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    return tmp_path / "home"


def _spec(data: dict[str, Any], epochs: int = 1) -> dict[str, Any]:
    return {"name": "images", "model": CNN, "data": data,
            "loss": {"type": "softmax_cross_entropy"}, "initializer": {"type": "xavier"},
            "optimizer": {"type": "adam", "learning_rate": 0.01}, "epochs": epochs,
            "metrics": ["accuracy"], "checkpoint": {"every_steps": 1000}, "seed": 1,
            "device": "cpu"}


def _submit(spec: dict[str, Any]) -> str:
    stored = parse_spec(spec).model_dump(mode="json")
    with session_scope() as session:
        user = repo.get_user_by_name(session, name="imgs") or repo.create_user(
            session, name="imgs")
        return repo.create_job(session, owner_id=user.id, name="images", spec=stored,
                               queue="cpu").id


def _job(job_id: str) -> Any:
    with session_scope() as session:
        return repo.get_job(session, job_id=job_id)


def test_synthetic_builtins_are_learnable_in_the_standard_formats(tmp_path: Path) -> None:
    from engine.gluon.data.vision import datasets
    from workers.synthetic_data import synthetic_root

    images, labels = synthetic_images("mnist", "test")
    mnist = datasets.MNIST(root=str(synthetic_root("mnist", tmp_path)), train=False)
    assert len(mnist) == len(labels)
    np.testing.assert_array_equal(mnist[5][0].asnumpy(), images[5])
    cifar = datasets.CIFAR10(root=str(synthetic_root("cifar10", tmp_path)), train=True)
    pictures, cifar_labels = synthetic_images("cifar10", "train")
    assert (len(cifar), cifar[7][1]) == (5000, cifar_labels[7])
    np.testing.assert_array_equal(cifar[7][0].asnumpy(), pictures[7])
    assert synthetic_images("mnist", "test")[1].tolist() == labels.tolist()  # deterministic


@pytest.mark.slow
def test_a_cnn_trains_on_synthetic_mnist_with_transforms(home: Path, channel: Channel) -> None:
    job_id = _submit(_spec({
        "train": {"builtin": "mnist", "transforms": [
            {"type": "RandomResizedCrop", "size": 28, "scale": [0.8, 1.0]},
            {"type": "ToTensor"}]},
        "val": {"builtin": "mnist", "split": "val"},
        "normalize": "auto", "batch_size": 64,
    }))
    assert run_job(job_id).result == "succeeded", _job(job_id).status_reason
    metrics = _job(job_id).latest_metrics
    assert metrics["val_accuracy"] > 0.5, metrics  # chance is 0.1


def test_an_uploaded_recordio_trains_through_the_cache(home: Path, channel: Channel) -> None:
    store = store_from_settings()
    pictures = files.images(64, height=12, width=12, seed=3)
    labels = [float(i % 2) for i in range(64)]
    for picture, label in zip(pictures, labels, strict=True):  # a learnable mark
        picture[:4, :4] = 255 if label else 0
    rec, idx = files.recordio([(lab, files.png(p)) for lab, p in zip(labels, pictures,
                                                                      strict=True)])
    dataset_id = new_id()
    stored = []
    for path, data in (("set.rec", rec), ("set.idx", idx)):
        store.put(f"datasets/{dataset_id}/{path}", data)
        stored.append({"path": path, "key": f"datasets/{dataset_id}/{path}", "size": len(data)})
    with session_scope() as session:
        user = repo.create_user(session, name="imgs")
        repo.create_dataset(session, owner_id=user.id, id=dataset_id, name="d",
                            format="recordio", status="validating", storage_key=stored[0]["key"],
                            files=stored, size=len(rec) + len(idx), sha256="", num_rows=0,
                            feature_shape=[], dtype="", num_classes=None)
    assert validate_dataset(dataset_id, store) == "ready"
    job_id = _submit(_spec({
        "train": {"dataset": dataset_id, "transforms": [{"type": "RandomFlipTopBottom"}]},
        "val": {"dataset": dataset_id, "transforms": [{"type": "CenterCrop", "size": 12}]},
        "normalize": "auto", "batch_size": 16,
    }, epochs=2))
    assert run_job(job_id).result == "succeeded", _job(job_id).status_reason
    cache = home / "cache" / "datasets" / dataset_id
    assert (cache / "data.rec").read_bytes() == rec
    assert _job(job_id).latest_metrics["train_accuracy"] > 0


def test_every_spec_transform_builds_through_the_engine_registry() -> None:
    import typing

    from core import transform_spec
    from workers.data_sources import build_transforms

    examples = {"Normalize": {"mean": [0.5, 0.4, 0.3], "std": 0.2}, "Resize": {"size": 6},
                "CenterCrop": {"size": 4}, "RandomResizedCrop": {"size": 4},
                "RandomBrightness": {"brightness": 0.3}, "RandomContrast": {"contrast": 0.3},
                "RandomSaturation": {"saturation": 0.3}, "RandomHue": {"hue": 0.1},
                "Cast": {"dtype": "float32"}}
    (union, _) = typing.get_args(transform_spec.Transform)
    for model in typing.get_args(union):
        name = model.model_fields["type"].annotation.__args__[0]
        spec = model(type=name, **examples.get(name, {}))
        pipeline = build_transforms([spec], None)
        image = np.full((8, 8, 3), 128, np.uint8)
        assert pipeline(image).shape[0] in (1, 3), name  # ends CHW (ToTensor appended)
