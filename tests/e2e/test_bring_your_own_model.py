"""Issue 12 end to end: a network exported by MXNet 1.9.1 and a zoo resnet18_v1 train in
the service (real API and worker processes), survive pause/resume, and leave as MXNet files
that MXNet loads."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

import engine as mx
from rudder.client import Client
from tests import services
from tests.api import uploads
from tests.e2e.conftest import example_spec
from tests.e2e.events import EventTap, is_status, metric_at_least
from tests.e2e.harness import Stack, running_stack, stack_env
from tests.oracle import run_mxnet
from tests.services import wait_until
from tests.workers.datasets import files

pytestmark = pytest.mark.slow

# A user's residual network in MXNet Gluon: Reshape, Conv/BN/ReLU, a residual add, global
# pooling, Dense; hybridized and exported as MXNet writes it (random weights).
MXNET_EXPORT = """
import os, tempfile
class Residual(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.stem = gluon.nn.Conv2D(8, 3, padding=1)
            self.bn = gluon.nn.BatchNorm()
            self.branch = gluon.nn.Conv2D(8, 3, padding=1)
            self.pool = gluon.nn.GlobalAvgPool2D()
            self.out = gluon.nn.Dense(10)
    def hybrid_forward(self, F, x):
        x = F.reshape(x, shape=(0, 1, 8, 8))
        h = F.relu(self.bn(self.stem(x)))
        return self.out(self.pool(h + F.relu(self.branch(h))))
mx.random.seed(0)
net = Residual(prefix="user_")
net.initialize(mx.init.Xavier())
net.hybridize()
net(nd.ones((1, 64)))
folder = tempfile.mkdtemp()
net.export(os.path.join(folder, "net"), epoch=0)
for name in ("net-symbol.json", "net-0000.params"):
    with open(os.path.join(folder, name), "rb") as handle:
        outputs[name] = np.frombuffer(handle.read(), dtype=np.uint8)
"""

# A Gluon CNN for 3x32x32 images (NCHW, as every Gluon CNN), exported by MXNet 1.9.1.
MXNET_CNN_EXPORT = """
import os, tempfile
mx.random.seed(0)
net = gluon.nn.HybridSequential(prefix="cnn_")
with net.name_scope():
    net.add(gluon.nn.Conv2D(8, 3, padding=1), gluon.nn.BatchNorm(), gluon.nn.Activation("relu"),
            gluon.nn.MaxPool2D(2), gluon.nn.Conv2D(16, 3, padding=1),
            gluon.nn.Activation("relu"), gluon.nn.GlobalAvgPool2D(), gluon.nn.Dense(2))
net.initialize(mx.init.Xavier())
net.hybridize()
net(nd.ones((1, 3, 32, 32)))
folder = tempfile.mkdtemp()
net.export(os.path.join(folder, "cnn"), epoch=0)
for name in ("cnn-symbol.json", "cnn-0000.params"):
    with open(os.path.join(folder, name), "rb") as handle:
        outputs[name] = np.frombuffer(handle.read(), dtype=np.uint8)
"""

MXNET_IMPORT = """
import os, tempfile
folder = tempfile.mkdtemp()
for name in ("model-symbol.json", "model-0000.params"):
    with open(os.path.join(folder, name), "wb") as handle:
        handle.write(inputs[name].tobytes())
net = gluon.SymbolBlock.imports(os.path.join(folder, "model-symbol.json"), ["data"],
                                os.path.join(folder, "model-0000.params"))
outputs["y"] = net(nd.array(inputs["x"]))
"""


MXNET_ZOO_LOAD = """
import os, tempfile
path = os.path.join(tempfile.mkdtemp(), "model-0000.params")
with open(path, "wb") as handle:
    handle.write(inputs["params"].tobytes())
net = gluon.model_zoo.vision.resnet18_v1(classes=2)
net.collect_params().load(path)  # by full name, as MXNet loads an export's params
outputs["y"] = net(nd.array(inputs["x"]))
"""


@pytest.fixture(scope="module")
def roomy_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack whose lease outlives a resnet step on a busy CPU (the default would
    expire while the heartbeat thread waits for the GIL). It has its own database and
    broker: the session's other stacks share theirs, and their dispatchers and workers
    (with another object store) would otherwise send and take this stack's jobs."""
    home = tmp_path_factory.mktemp("e2e-byom")
    with services.postgres_database() as pg_url, services.redis_server() as redis_url:
        env = stack_env(pg_url, redis_url, f"file://{home / 'objects'}",
                        {"RUDDER_WORKER_LEASE_TTL_SECONDS": 60})
        with running_stack(env, home, user="byom-user") as running:
            yield running


@pytest.fixture
def roomy_client(roomy_stack: Stack) -> Iterator[Client]:
    with Client(roomy_stack.api_url, roomy_stack.token, timeout=60) as api_client:
        yield api_client


def _losses(client: Client, job_id: str) -> list[float]:
    points = client.metric_points(job_id, names=["train_loss"])
    return [p["value"] for p in sorted(points, key=lambda p: p["step"])]


def _export(client: Client, job_id: str, folder: Path) -> dict[str, bytes]:
    listed = {f["name"] for f in client.export(job_id)["files"]}
    assert listed == {"model-symbol.json", "model-0000.params"}
    return {name: client.download_export(job_id, name, folder / name).read_bytes()
            for name in sorted(listed)}


def test_an_mxnet_exported_network_trains_pauses_resumes_and_goes_back_to_mxnet(
    roomy_stack: Stack, roomy_client: Client, tmp_path: Path
) -> None:
    exported = run_mxnet(MXNET_EXPORT)
    symbol, params = tmp_path / "net-symbol.json", tmp_path / "net-0000.params"
    symbol.write_bytes(exported["net-symbol.json"].tobytes())
    params.write_bytes(exported["net-0000.params"].tobytes())
    model = roomy_client.upload_model(symbol, "1,64", params=params)
    assert model["ops"]["elemwise_add"] == 1 and model["output_shapes"] == [[1, 10]]

    spec = example_spec(name="byom", epochs=15, lr_scheduler=None,
                        model={"model": model["id"], "params": True},
                        optimizer={"type": "adam", "learning_rate": 0.01})
    job = roomy_client.submit(spec)
    tap = EventTap(roomy_stack.api_url, roomy_stack.token, job["id"])
    try:
        tap.wait_for(metric_at_least(5), 120, "first metrics")
        roomy_client.pause(job["id"])
        paused = tap.wait_for(is_status("paused"), 120, "paused status")
        roomy_client.resume(job["id"])
        tap.wait_for(is_status("succeeded"), 400, "success")
    finally:
        tap.close()
    assert paused.data["step"] < roomy_client.get_job(job["id"])["progress"]["step"]
    losses = _losses(roomy_client, job["id"])
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:5]), losses

    files = _export(roomy_client, job["id"], tmp_path / "trained")
    x = np.random.default_rng(0).random((4, 64)).astype(np.float32)
    ours = mx.gluon.SymbolBlock.imports(str(tmp_path / "trained" / "model-symbol.json"),
                                        ["data"], str(tmp_path / "trained" / "model-0000.params"))
    theirs = run_mxnet(MXNET_IMPORT, {"x": x, **{n: np.frombuffer(b, dtype=np.uint8)
                                                 for n, b in files.items()}})
    np.testing.assert_allclose(theirs["y"], ours(mx.nd.array(x)).asnumpy(), rtol=1e-4,
                               atol=1e-5)


def test_a_zoo_resnet18_job_trains_on_32x32_images_and_exports(
    roomy_stack: Stack, roomy_client: Client, tmp_path: Path
) -> None:
    rng = np.random.default_rng(0)
    label = np.arange(48) % 2
    data = rng.normal(0, 0.2, size=(48, 3, 32, 32)).astype(np.float32)
    data += np.where(label == 1, 1.0, -1.0)[:, None, None, None].astype(np.float32)
    path = tmp_path / "images.npz"
    buffer = io.BytesIO()
    np.savez(buffer, data=data, label=label)
    path.write_bytes(buffer.getvalue())
    dataset = roomy_client.upload_dataset(path)
    spec = example_spec(name="zoo", epochs=2, lr_scheduler=None, metrics=["accuracy"],
                        model={"zoo": "resnet18_v1", "classes": 2},
                        optimizer={"type": "adam", "learning_rate": 0.001},
                        data={"train": {"dataset": dataset["id"]}, "batch_size": 16})
    job = roomy_client.submit(spec)
    tap = EventTap(roomy_stack.api_url, roomy_stack.token, job["id"])
    try:
        tap.wait_for(is_status("succeeded"), 400, "success")
    finally:
        tap.close()
    losses = _losses(roomy_client, job["id"])
    assert min(losses[len(losses) // 2:]) < losses[0], losses
    files = _export(roomy_client, job["id"], tmp_path / "trained")
    # MXNet's own constructor loads the trained params by name, and predicts as we do
    x = np.random.default_rng(1).normal(size=(2, 3, 32, 32)).astype(np.float32)
    theirs = run_mxnet(MXNET_ZOO_LOAD, {"x": x, "params": np.frombuffer(
        files["model-0000.params"], dtype=np.uint8)})
    ours = mx.gluon.SymbolBlock.imports(str(tmp_path / "trained" / "model-symbol.json"),
                                        ["data"], str(tmp_path / "trained" / "model-0000.params"))
    np.testing.assert_allclose(theirs["y"], ours(mx.nd.array(x)).asnumpy(), rtol=1e-4,
                               atol=1e-4)


def _labelled_images(count: int) -> list[tuple[int, bytes]]:
    """32x32 RGB noise; class 1 has a bright top-left corner, class 0 a dark one."""
    rng = np.random.default_rng(0)
    images = []
    for index in range(count):
        pixels = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
        label = index % 2
        pixels[:12, :12] = 255 if label else 0
        images.append((label, files.png(pixels)))
    return images


def test_an_mxnet_exported_cnn_trains_on_an_uploaded_recordio_and_image_archive(
    roomy_stack: Stack, roomy_client: Client, tmp_path: Path
) -> None:
    """Issue 26 item 1: the Gluon CNN (NCHW) uploaded with --input-shape 1,3,32,32 was
    refused on every uploaded .rec and image archive (HWC); the transforms end with
    ToTensor, so it trains on both."""
    exported = run_mxnet(MXNET_CNN_EXPORT)
    symbol, params = tmp_path / "cnn-symbol.json", tmp_path / "cnn-0000.params"
    symbol.write_bytes(exported["cnn-symbol.json"].tobytes())
    params.write_bytes(exported["cnn-0000.params"].tobytes())
    model = roomy_client.upload_model(symbol, "1,3,32,32", params=params)
    images = _labelled_images(48)
    rec, idx = files.recordio([(float(label), png) for label, png in images])
    archive = files.zip_of({f"{('dark', 'bright')[label]}/{i}.png": png
                            for i, (label, png) in enumerate(images)})
    headers = {"Authorization": f"Bearer {roomy_stack.token}"}
    with httpx.Client(base_url=roomy_stack.api_url, timeout=60) as http:
        for name, upload in (("rec", {"set.rec": rec, "set.idx": idx}),
                             ("archive", {"set.zip": archive})):
            dataset = uploads.upload(http, headers, upload, part_size=64 * 1024, name=name)
            wait_until(lambda d=dataset: roomy_client.dataset(d["id"])["status"] == "ready",
                       300, interval=0.5, what=f"the {name} set validated")
            spec = example_spec(
                name=f"cnn-on-{name}", epochs=6, lr_scheduler=None, metrics=["accuracy"],
                model={"model": model["id"], "params": True},
                optimizer={"type": "adam", "learning_rate": 0.01},
                data={"train": {"dataset": dataset["id"], "transforms": [
                    {"type": "RandomFlipLeftRight"}, {"type": "ToTensor"}]},
                      "batch_size": 16})
            job = roomy_client.submit(spec)
            wait_until(lambda j=job: roomy_client.get_job(j["id"])["status"] not in (
                "queued", "running"), 400, interval=1, what=f"the job on the {name} set")
            finished = roomy_client.get_job(job["id"])
            assert finished["status"] == "succeeded", finished
            losses = _losses(roomy_client, job["id"])
            assert np.mean(losses[-3:]) < np.mean(losses[:3]), (name, losses)

