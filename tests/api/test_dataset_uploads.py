"""Resumable chunked uploads (issue 13) and their refusals (issue 14)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from core.storage import open_store
from tests.api import uploads
from tests.conftest import ApiHarness

REC = os.urandom(4500)
IDX = b"0\t0\n"


def _leftovers(api: ApiHarness) -> list[str]:
    """Everything on disk under the local store (objects and multipart parts)."""
    root = api.settings.storage_url.removeprefix("file://")
    found = []
    for folder, _, names in os.walk(root):
        found += [os.path.relpath(os.path.join(folder, n), root) for n in names]
    return sorted(found)


def test_parts_in_any_order_then_resume_then_complete(api: ApiHarness) -> None:
    _, headers = api.make_user()
    files = {"train.rec": REC, "a-train.idx": IDX}  # any names: the suffixes pair them
    created = uploads.create(api.client, headers, files, part_size=1000)
    assert created.status_code == 201, created.text
    upload = created.json()
    assert upload["total_parts"] == 6 and upload["missing"] == [1, 2, 3, 4, 5, 6]
    assert [(f["path"], f["first_part"], f["parts"]) for f in upload["files"]] == [
        ("train.rec", 1, 5), ("a-train.idx", 6, 1)
    ]
    parts = uploads.parts_of(upload, files)
    for number in (5, 2, 6):  # out of order, then the client is "interrupted"
        assert uploads.put_part(api.client, headers, upload["id"], number,
                                parts[number]).status_code == 200
    state = api.client.get(f"/v1/datasets/uploads/{upload['id']}", headers=headers).json()
    assert state["missing"] == [1, 3, 4]
    assert [p["number"] for p in state["received"]] == [2, 5, 6]
    assert state["received"][1]["size"] == 500  # the last part of the .rec is short
    for number in state["missing"]:
        assert uploads.put_part(api.client, headers, upload["id"], number,
                                parts[number]).status_code == 200
    # Sending a part again (a resumed client unsure it arrived) replaces it.
    assert uploads.put_part(api.client, headers, upload["id"], 1, parts[1]).status_code == 200
    done = api.client.post(f"/v1/datasets/uploads/{upload['id']}/complete", headers=headers)
    assert done.status_code == 202, done.text
    dataset = done.json()
    assert (dataset["status"], dataset["format"], dataset["size"]) == (
        "validating", "recordio", len(REC) + len(IDX))
    assert dataset["id"] == upload["dataset_id"]
    store = open_store(api.settings.storage_url)
    assert store.get(f"datasets/{dataset['id']}/train.rec") == REC
    assert store.get(f"datasets/{dataset['id']}/a-train.idx") == IDX
    shown = api.client.get(f"/v1/datasets/{dataset['id']}", headers=headers).json()
    assert shown["status"] == "validating"
    assert [f["path"] for f in shown["files"]] == ["train.rec", "a-train.idx"]
    # Deleting the data set removes both objects and no multipart debris is left.
    assert api.client.delete(f"/v1/datasets/{dataset['id']}", headers=headers).status_code == 204
    assert _leftovers(api) == []


def test_a_wrong_checksum_is_refused_and_not_recorded(api: ApiHarness) -> None:
    _, headers = api.make_user()
    upload = uploads.create(api.client, headers, {"a.csv": b"x" * 1500}).json()
    answer = uploads.put_part(api.client, headers, upload["id"], 1, b"x" * 1000,
                              sha256="0" * 64)
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "checksum_mismatch"
    state = api.client.get(f"/v1/datasets/uploads/{upload['id']}", headers=headers).json()
    assert state["received"] == [] and state["missing"] == [1, 2]


def test_a_failed_resend_leaves_the_received_part_in_place(api: ApiHarness) -> None:
    """Each send of a part is stored on its own: a bad resend of a part that arrived
    whole is refused and the earlier send stays the part (it used to overwrite its range
    on the local store, so the part had to count as missing again)."""
    _, headers = api.make_user()
    files = {"a.csv": b"a" * 1000 + b"b" * 500}
    upload = uploads.create(api.client, headers, files).json()
    parts = uploads.parts_of(upload, files)
    assert uploads.put_part(api.client, headers, upload["id"], 1, parts[1]).status_code == 200
    bad = uploads.put_part(api.client, headers, upload["id"], 1, b"z" * 1000,
                           sha256="1" * 64)
    assert bad.status_code == 422
    state = api.client.get(f"/v1/datasets/uploads/{upload['id']}", headers=headers).json()
    assert state["missing"] == [2]
    uploads.put_part(api.client, headers, upload["id"], 2, parts[2])
    done = api.client.post(f"/v1/datasets/uploads/{upload['id']}/complete", headers=headers)
    store = open_store(api.settings.storage_url)
    assert store.get(f"datasets/{done.json()['id']}/a.csv") == files["a.csv"]


@pytest.mark.parametrize(("number", "data"), [(1, b"x" * 999), (1, b"x" * 1001), (2, b"x" * 499)])
def test_a_truncated_or_overlong_part_is_refused(
    api: ApiHarness, number: int, data: bytes
) -> None:
    _, headers = api.make_user()
    upload = uploads.create(api.client, headers, {"a.csv": b"x" * 1500}).json()
    answer = uploads.put_part(api.client, headers, upload["id"], number, data)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "part_size_mismatch"
    assert error["details"]["expected_bytes"] == (1000 if number == 1 else 500)
    state = api.client.get(f"/v1/datasets/uploads/{upload['id']}", headers=headers).json()
    assert state["received"] == []


def test_completing_before_every_part_arrived_names_the_missing_ones(api: ApiHarness) -> None:
    _, headers = api.make_user()
    files = {"a.csv": b"x" * 3500}
    upload = uploads.create(api.client, headers, files).json()
    parts = uploads.parts_of(upload, files)
    uploads.put_part(api.client, headers, upload["id"], 3, parts[3])
    early = api.client.post(f"/v1/datasets/uploads/{upload['id']}/complete", headers=headers)
    assert early.status_code == 409
    assert early.json()["error"]["code"] == "upload_incomplete"
    assert early.json()["error"]["details"] == {"missing": [1, 2, 4]}
    assert api.client.get("/v1/datasets", headers=headers).json()["data"] == []
    # The upload is still open: finishing it works.
    for number in (1, 2, 4):
        uploads.put_part(api.client, headers, upload["id"], number, parts[number])
    done = api.client.post(f"/v1/datasets/uploads/{upload['id']}/complete", headers=headers)
    assert done.status_code == 202
    again = api.client.post(f"/v1/datasets/uploads/{upload['id']}/complete", headers=headers)
    assert again.status_code == 409
    late = uploads.put_part(api.client, headers, upload["id"], 1, parts[1])
    assert late.status_code == 409


def test_another_users_upload_is_not_found(api: ApiHarness) -> None:
    _, alice = api.make_user()
    _, bob = api.make_user()
    files = {"a.csv": b"x" * 10}
    upload = uploads.create(api.client, alice, files).json()
    path = f"/v1/datasets/uploads/{upload['id']}"
    assert api.client.get(path, headers=bob).status_code == 404
    assert uploads.put_part(api.client, bob, upload["id"], 1, files["a.csv"]).status_code == 404
    assert api.client.post(path + "/complete", headers=bob).status_code == 404
    assert api.client.delete(path, headers=bob).status_code == 404
    dataset = uploads.upload(api.client, alice, files)
    assert api.client.get(f"/v1/datasets/{dataset['id']}", headers=bob).status_code == 404
    for hostile in ("../../../../etc/passwd", "abc%00def"):
        assert api.client.get(f"/v1/datasets/uploads/{hostile}", headers=alice).status_code == 404


def test_abort_drops_the_parts(api: ApiHarness) -> None:
    _, headers = api.make_user()
    files = {"a.zip": b"x" * 2500}
    upload = uploads.create(api.client, headers, files).json()
    uploads.put_part(api.client, headers, upload["id"], 1, uploads.parts_of(upload, files)[1])
    assert _leftovers(api) != []
    assert api.client.delete(f"/v1/datasets/uploads/{upload['id']}",
                             headers=headers).status_code == 204
    assert _leftovers(api) == []
    assert api.client.get(f"/v1/datasets/uploads/{upload['id']}",
                          headers=headers).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "files": [{"path": "../evil.npz", "size": 10}]}, "files.0.path"),
        ({"name": "x", "files": [{"path": "a.rec", "size": 10}]}, "files"),
        ({"name": "x", "files": [{"path": "a.exe", "size": 10}]}, "files"),
        ({"name": "x", "files": [{"path": "a.rec", "size": 10}, {"path": "b.csv", "size": 1}]},
         "files"),
        ({"name": "a\x00b", "files": [{"path": "a.csv", "size": 10}]}, "name"),
        ({"name": "x", "files": [{"path": "a.csv", "size": 0}]}, "files.0.size"),
        ({"name": "x", "files": [{"path": "a.csv", "size": 10**9}], "part_size": 10},
         "part_size"),
        ({"name": "x", "files": [{"path": "a.csv", "size": 10}], "part_size": 2**31},
         "part_size"),
    ],
)
def test_a_bad_upload_request_names_the_field(
    api: ApiHarness, body: dict[str, Any], field: str
) -> None:
    _, headers = api.make_user()
    answer = api.client.post("/v1/datasets/uploads", json=body, headers=headers)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["details"][0]["field"] == field
    assert _leftovers(api) == []


def test_the_per_user_quota_counts_data_sets_and_open_uploads(make_api: Any) -> None:
    api = make_api(limits={"max_dataset_bytes_per_user": 5000})
    _, headers = api.make_user()
    uploads.upload(api.client, headers, {"a.csv": b"x" * 2000})
    assert uploads.create(api.client, headers, {"b.csv": b"x" * 2000}).status_code == 201
    over = uploads.create(api.client, headers, {"c.csv": b"x" * 1001})
    assert over.status_code == 413
    assert over.json()["error"]["code"] == "quota_exceeded"
    assert over.json()["error"]["details"]["used_bytes"] == 4000
    _, other = api.make_user()  # quotas are per user
    assert uploads.create(api.client, other, {"c.csv": b"x" * 1001}).status_code == 201


def test_parts_are_bounded_by_the_part_limit_not_the_small_upload_limit(make_api: Any) -> None:
    api = make_api(limits={"max_upload_bytes": 1000, "max_upload_part_bytes": 4096})
    _, headers = api.make_user()
    dataset = uploads.upload(api.client, headers, {"a.csv": b"x" * 9000}, part_size=4096)
    assert dataset["size"] == 9000
    too_big = uploads.create(api.client, headers, {"a.csv": b"x" * 9000}, part_size=5000)
    assert too_big.status_code == 422


def test_uploads_on_s3_use_multipart(
    make_api: Any, s3_endpoint: str, s3_storage_url: str
) -> None:
    api = make_api(storage_url=s3_storage_url, s3_endpoint_url=s3_endpoint,
                   limits={"max_upload_part_bytes": 8 * 1024 * 1024})
    _, headers = api.make_user()
    data = os.urandom(6 * 1024 * 1024)
    small = uploads.create(api.client, headers, {"a.npz": data}, part_size=1024 * 1024)
    assert small.status_code == 422 and "at least" in small.json()["error"]["message"]
    dataset = uploads.upload(api.client, headers, {"a.npz": data}, part_size=5 * 1024 * 1024)
    store = open_store(s3_storage_url, endpoint_url=s3_endpoint)
    assert store.get(f"datasets/{dataset['id']}/a.npz") == data


def test_a_job_may_only_use_a_ready_data_set_and_image_transforms_on_images(
    api: ApiHarness,
) -> None:
    from tests.api.specs import digits_spec

    _, headers = api.make_user()
    validating = uploads.upload(api.client, headers, {"a.csv": b"x,label\n1,0\n"})
    spec = digits_spec(data={"train": {"dataset": validating["id"]}, "batch_size": 1})
    answer = api.client.post("/v1/jobs", json=spec, headers=headers)
    assert answer.status_code == 422
    assert "is validating" in answer.json()["error"]["message"]
    ready = api.client.post("/v1/datasets", files={"file": ("t.csv", b"x,label\n1,0\n")},
                            headers=headers).json()
    spec = digits_spec(data={"train": {"dataset": ready["id"], "transforms": [
        {"type": "ToTensor"}]}, "batch_size": 1})
    answer = api.client.post("/v1/jobs", json=spec, headers=headers)
    assert answer.status_code == 422
    assert answer.json()["error"]["details"][0]["field"] == "data.train.transforms"


def test_a_part_still_streaming_when_the_upload_is_aborted_is_a_409(api: ApiHarness) -> None:
    import hashlib

    import httpx

    _, headers = api.make_user()
    data = b"p" * 2000
    upload = uploads.create(api.client, headers, {"a.csv": data}, part_size=2000).json()

    def body() -> Any:
        yield data[:1000]
        with httpx.Client(base_url=api.url) as other:  # abort while this part is in flight
            gone = other.delete(f"/v1/datasets/uploads/{upload['id']}", headers=headers)
            assert gone.status_code == 204
        yield data[1000:]

    answer = api.client.put(
        f"/v1/datasets/uploads/{upload['id']}/parts/1", content=body(),
        headers=headers | {"X-Part-SHA256": hashlib.sha256(data).hexdigest()},
    )
    assert answer.status_code == 409, answer.text
    assert _leftovers(api) == []
