"""Per-user storage quota (issue 25 items 7 and 8): reservations that hold under races,
everything a user uploads counted, and ``GET /v1/usage``."""

from __future__ import annotations

import io
import threading
from typing import Any

import httpx
import numpy as np

from tests.api import uploads

QUOTA = 50_000


def _concurrently(count: int, request: Any) -> list[httpx.Response]:
    """``count`` requests released at the same instant, each on its own connection."""
    barrier = threading.Barrier(count)
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def run() -> None:
        barrier.wait()
        answer = request()
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


def test_concurrent_reservations_never_overcommit_the_quota(make_api: Any) -> None:
    """Eight uploads of a fifth of the quota each, sent at once: five fit, three are
    413 quota_exceeded (before: 5 to 8 accepted on SQLite and PostgreSQL)."""
    api = make_api(limits={"max_dataset_bytes_per_user": QUOTA})
    _, headers = api.make_user()
    body = {"name": "x", "files": [{"path": "a.csv", "size": QUOTA // 5}]}

    def create() -> httpx.Response:
        with httpx.Client(base_url=api.url, timeout=30) as client:
            return client.post("/v1/datasets/uploads", json=body, headers=headers)

    for _attempt in range(3):  # three rounds: a race that loses sometimes must not pass
        answers = _concurrently(8, create)
        codes = sorted(a.status_code for a in answers)
        assert codes == [201] * 5 + [413] * 3, [a.text for a in answers]
        for answer in answers:
            if answer.status_code == 201:
                gone = api.client.delete(f"/v1/datasets/uploads/{answer.json()['id']}",
                                         headers=headers)
                assert gone.status_code == 204  # aborting releases the reservation


def _npz(rows: int) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, data=np.ones((rows, 4), np.float32), label=np.arange(rows) % 3)
    return buffer.getvalue()


def test_single_request_data_sets_and_models_count_against_the_quota(make_api: Any) -> None:
    """Before: single-request uploads and model params were never counted (three 8 MiB
    sets and two 32 MiB params files fitted a 16 MiB quota)."""
    from tests import model_files

    raw = _npz(100)  # an npz is stored as sent: it counts len(raw)
    api = make_api(limits={"max_dataset_bytes_per_user": 3 * len(raw) + len(raw) // 2})
    _, headers = api.make_user()
    sizes = []
    for _ in range(3):
        answer = api.client.post("/v1/datasets", files={"file": ("t.npz", raw)},
                                 headers=headers)
        assert answer.status_code == 201, answer.text
        sizes.append(answer.json()["size"])
    assert sizes == [len(raw)] * 3
    over = api.client.post("/v1/datasets", files={"file": ("t.npz", raw)}, headers=headers)
    assert over.status_code == 413, over.text
    assert over.json()["error"]["code"] == "quota_exceeded"
    assert over.json()["error"]["details"]["used_bytes"] == sum(sizes)
    symbol = model_files.symbol_json()
    model = api.client.post(
        "/v1/models", files={"symbol": ("s.json", symbol),
                             "params": ("p.params", model_files.params_file())},
        data={"input_shape": "1,64"}, headers=headers)
    assert model.status_code == 413, model.text
    assert model.json()["error"]["code"] == "quota_exceeded"
    assert api.client.get("/v1/models", headers=headers).json()["data"] == []
    usage = api.client.get("/v1/usage", headers=headers).json()
    assert usage["bytes"]["datasets"] == sum(sizes) == usage["used_bytes"]
    assert usage["bytes"]["models"] == 0


def test_usage_shows_bytes_by_kind_against_the_quota(make_api: Any) -> None:
    from core import repositories
    from core.storage import job_export_prefix, open_store
    from tests import model_files
    from tests.api.specs import digits_spec

    api = make_api(limits={"max_dataset_bytes_per_user": 10**9})
    _, headers = api.make_user()
    buffer = io.BytesIO()
    np.savez(buffer, data=np.zeros((10, 4), np.float32), label=np.arange(10) % 2)
    dataset = api.client.post("/v1/datasets", files={"file": ("d.npz", buffer.getvalue())},
                              headers=headers).json()
    open_upload = uploads.create(api.client, headers, {"big.csv": b"x" * 5000}).json()
    symbol, params = model_files.symbol_json(), model_files.params_file()
    model = api.client.post(
        "/v1/models", files={"symbol": ("s.json", symbol), "params": ("p.params", params)},
        data={"input_shape": "1,64"}, headers=headers)
    assert model.status_code == 201, model.text
    job = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()
    with api.sessions() as session:
        repositories.add_checkpoint(
            session, job_id=job["id"], step=10, epoch=0, key_prefix="x/",
            files={"params.npz": {"sha256": "0" * 64, "size": 700},
                   "trainer.npz": {"sha256": "0" * 64, "size": 300}})
        session.commit()
    open_store(api.settings.storage_url).put(job_export_prefix(job["id"]) + "model-0000.params",
                                             b"p" * 123)
    _, stranger = api.make_user()
    assert api.client.get("/v1/usage", headers=stranger).json()["used_bytes"] == 0
    usage = api.client.get("/v1/usage", headers=headers).json()
    assert usage["bytes"] == {
        "datasets": dataset["size"], "uploads_in_progress": open_upload["total_size"],
        "models": len(symbol) + len(params), "checkpoints": 1000, "exports": 123,
    }
    assert usage["counted"] == ["datasets", "uploads_in_progress", "models"]
    assert usage["used_bytes"] == dataset["size"] + 5000 + len(symbol) + len(params)
    assert usage["quota_bytes"] == 10**9
    assert usage["available_bytes"] == 10**9 - usage["used_bytes"]
