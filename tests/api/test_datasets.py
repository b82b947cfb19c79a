from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select

from core.models import Dataset
from core.storage import open_store
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness


def _npz(**arrays: Any) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _count(api: ApiHarness) -> int:
    with api.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Dataset)) or 0)


def test_upload_npz_then_train_on_it(api: ApiHarness) -> None:
    _, headers = api.make_user()
    data = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)
    label = np.arange(50) % 3
    response = api.client.post(
        "/v1/datasets",
        files={"file": ("blobs.npz", _npz(data=data, label=label))},
        data={"name": "blobs"},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    dataset = response.json()
    stats = dataset.pop("stats")
    assert dataset | {"id": None, "created_at": None, "sha256": None, "size": None} == {
        "id": None, "name": "blobs", "format": "npz", "size": None, "sha256": None,
        "num_rows": 50, "feature_shape": [8], "dtype": "float32", "num_classes": 3,
        "created_at": None, "status": "ready", "reason": None, "files": None,
        "validation": None, "validation_started_at": None,
    }
    assert (stats["records"], stats["classes"], stats["channels"]) == (50, 3, 8)
    assert stats["class_counts"] == {"0": 17, "1": 17, "2": 16}
    np.testing.assert_allclose(stats["mean"], data.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(stats["std"], data.std(axis=0), rtol=1e-5)
    store = open_store(api.settings.storage_url)
    with np.load(io.BytesIO(store.get(f"datasets/{dataset['id']}/data.npz")),
                 allow_pickle=False) as stored:
        np.testing.assert_array_equal(stored["data"], data)
    listed = api.client.get("/v1/datasets", headers=headers).json()["data"]
    assert [d["id"] for d in listed] == [dataset["id"]]
    spec = digits_spec(data={"train": {"dataset": dataset["id"]}, "batch_size": 10})
    assert api.client.post("/v1/jobs", json=spec, headers=headers).status_code == 201


def test_upload_csv_is_converted(api: ApiHarness) -> None:
    _, headers = api.make_user()
    csv = b"a,b,label\n1,2,0\n3,4,1\n5,6.5,1\n"
    response = api.client.post(
        "/v1/datasets", files={"file": ("tiny.csv", csv)}, headers=headers
    )
    assert response.status_code == 201, response.text
    assert response.json()["num_rows"] == 3
    assert response.json()["feature_shape"] == [2]
    assert response.json()["num_classes"] == 2


def test_datasets_are_private(api: ApiHarness) -> None:
    _, alice = api.make_user()
    _, bob = api.make_user()
    csv = b"x,label\n1,0\n"
    dataset_id = api.client.post(
        "/v1/datasets", files={"file": ("a.csv", csv)}, headers=alice
    ).json()["id"]
    assert api.client.get("/v1/datasets", headers=bob).json()["data"] == []
    spec = digits_spec(data={"train": {"dataset": dataset_id}, "batch_size": 1})
    assert api.client.post("/v1/jobs", json=spec, headers=bob).status_code == 422


class _Evil:
    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("pwned",))


@pytest.mark.parametrize(
    ("filename", "content", "words"),
    [
        ("evil.npz", _npz(data=np.array([_Evil()], dtype=object), label=np.zeros(1)), "pickled"),
        ("evil.npz", pickle.dumps({"data": [1, 2]}), "npz"),
        ("wrong.npz", _npz(features=np.zeros((2, 2)), label=np.zeros(2)), "'data'"),
        ("short.npz", _npz(data=np.zeros((3, 2)), label=np.zeros(2)), "rows"),
        ("nan.npz", _npz(data=np.full((2, 2), np.nan), label=np.zeros(2)), "NaN"),
        ("text.npz", _npz(data=np.array([["a"]]), label=np.zeros(1)), "numeric"),
        ("nolabel.csv", b"a,b\n1,2\n", "label"),
        ("words.csv", b"a,label\nhello,1\n", "line 2"),
        ("data.txt", b"1,2,3", ".npz or a .csv"),
    ],
)
def test_bad_uploads_are_refused_and_not_stored(
    api: ApiHarness, filename: str, content: bytes, words: str
) -> None:
    _, headers = api.make_user()
    before = _count(api)
    response = api.client.post(
        "/v1/datasets", files={"file": (filename, content)}, headers=headers
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_dataset"
    assert words in error["message"]
    assert _count(api) == before
    assert open_store(api.settings.storage_url).list("datasets/") == []


def test_oversized_upload_is_413(make_api: Any) -> None:
    api = make_api(limits={"max_upload_bytes": 10_000})
    _, headers = api.make_user()
    big = _npz(data=np.zeros((1000, 10), dtype=np.float32), label=np.zeros(1000))
    response = api.client.post("/v1/datasets", files={"file": ("big.npz", big)}, headers=headers)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert _count(api) == 0 or api.client.get("/v1/datasets", headers=headers).json()["data"] == []


def test_oversized_chunked_upload_is_413(make_api: Any) -> None:
    api = make_api(limits={"max_upload_bytes": 10_000})
    _, headers = api.make_user()

    def body() -> Any:  # no Content-Length: the server must count as it reads
        yield b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.csv\"\r\n\r\n"
        for _ in range(100):
            yield b"1," * 500
        yield b"\r\n--b--\r\n"

    response = api.client.post(
        "/v1/datasets", content=body(),
        headers=headers | {"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert response.status_code == 413, response.text
    assert api.client.get("/v1/datasets", headers=headers).json()["data"] == []


def test_delete_a_dataset_unless_an_active_job_uses_it(api: ApiHarness) -> None:
    """Issue 15: DELETE /v1/datasets/{id} removes the row and the stored file; 409 while a
    job that can still run reads it."""
    from core import repositories
    from core.models import JobStatus

    _, headers = api.make_user()
    data = np.zeros((20, 4), dtype=np.float32)
    dataset = api.client.post(
        "/v1/datasets", files={"file": ("d.npz", _npz(data=data, label=np.arange(20) % 2))},
        headers=headers,
    ).json()
    spec = digits_spec(data={"train": {"dataset": dataset["id"]}, "batch_size": 10})
    job_id = api.client.post("/v1/jobs", json=spec, headers=headers).json()["id"]
    busy = api.client.delete(f"/v1/datasets/{dataset['id']}", headers=headers)
    assert busy.status_code == 409 and busy.json()["error"]["details"] == {"jobs": [job_id]}
    with api.sessions() as session:
        repositories.transition_job(session, job_id=job_id, to_status=JobStatus.CANCELLED)
        session.commit()
    _, stranger = api.make_user()
    assert api.client.delete(f"/v1/datasets/{dataset['id']}", headers=stranger).status_code == 404
    assert api.client.delete(f"/v1/datasets/{dataset['id']}", headers=headers).status_code == 204
    assert api.client.get("/v1/datasets", headers=headers).json()["data"] == []
    store = open_store(api.settings.storage_url)
    assert not store.exists(f"datasets/{dataset['id']}/data.npz")


@pytest.mark.parametrize(
    ("form", "filename"),
    [({"name": "abc\x00def"}, "tiny.csv"), ({"name": "a\x1fb"}, "t.csv")],
)
def test_a_control_character_in_the_name_is_a_422_and_nothing_is_stored(
    api: ApiHarness, form: dict[str, str], filename: str
) -> None:
    """Issue 14 item 4: a NUL in a dataset name was a 500 on PostgreSQL and left the
    uploaded object behind."""
    _, headers = api.make_user()
    before = _count(api)
    response = api.client.post(
        "/v1/datasets", files={"file": (filename, b"x,label\n1,0\n")}, data=form,
        headers=headers,
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["details"][0]["field"] == "name"
    assert _count(api) == before
    assert open_store(api.settings.storage_url).list("datasets/") == []


def test_the_object_is_deleted_when_its_row_cannot_be_written(api: ApiHarness) -> None:
    """Object first, row second: when the row fails the object must not stay behind."""
    from types import SimpleNamespace

    from api.services.datasets import store_upload
    from core.models import User

    store = open_store(api.settings.storage_url)
    ghost = User(id="00000000-0000-4000-8000-000000000000", name="ghost")  # no such row
    state = SimpleNamespace(settings=api.settings, store=store)
    with api.sessions() as session, pytest.raises(Exception, match="(?i)foreign key"):
        store_upload(session, state=state, owner=ghost,  # type: ignore[arg-type]
                     filename="t.csv", name="t", source=io.BytesIO(b"x,label\n1,0\n"),
                     size=12)
    assert store.list("datasets/") == []


@pytest.mark.parametrize("field", ["1" * 131_073, '"' + "1" * 131_073 + '"'])
def test_a_csv_field_past_the_limit_is_a_422_naming_the_line_and_the_limit(
    api: ApiHarness, field: str
) -> None:
    """Issue 25 item 6: the csv module's ``_csv.Error`` was an uncaught 500."""
    _, headers = api.make_user()
    before = _count(api)
    raw = f"x,label\n1,0\n{field},1\n".encode()
    response = api.client.post("/v1/datasets", files={"file": ("long.csv", raw)},
                               headers=headers)
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "line 3" in message and "131072" in message, message
    assert _count(api) == before
