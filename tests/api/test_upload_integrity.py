"""A completed data set holds exactly what was validated (issue 25 item 4): a part that
arrives after ``complete`` changes nothing, interleaved sends of one part leave one of
them whole, and completion checks every stored part against its sha256. On the local
store and on S3 (moto over HTTP)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from core.storage import MULTIPART_DIR, ObjectStore, open_store
from tests.api import uploads
from tests.conftest import ApiHarness

MIB = 1024 * 1024


@pytest.fixture(params=["local", "s3"])
def upload_api(request: pytest.FixtureRequest, make_api: Any) -> ApiHarness:
    if request.param == "local":
        return make_api()  # type: ignore[no-any-return]
    endpoint = request.getfixturevalue("s3_endpoint")
    return make_api(  # type: ignore[no-any-return]
        storage_url=request.getfixturevalue("s3_storage_url"), s3_endpoint_url=endpoint)


def _store(api: ApiHarness) -> ObjectStore:
    return open_store(api.settings.storage_url, endpoint_url=api.settings.s3_endpoint_url)


PART_SIZE = 5 * MIB  # S3's smallest part but the last


def _open_upload(api: ApiHarness) -> tuple[dict[str, str], bytes, dict[str, Any]]:
    """A new user's open upload of a two-part file with every part sent: (headers, the
    file, the upload)."""
    _, headers = api.make_user()
    data = os.urandom(PART_SIZE + 1000)
    created = uploads.create(api.client, headers, {"a.npz": data}, part_size=PART_SIZE)
    assert created.status_code == 201, created.text
    upload: dict[str, Any] = created.json()
    for number, part in uploads.parts_of(upload, {"a.npz": data}).items():
        assert uploads.put_part(api.client, headers, upload["id"], number,
                                part).status_code == 200
    return headers, data, upload


def _put_slowly(api: ApiHarness, headers: dict[str, str], upload_id: str, number: int,
                data: bytes, meanwhile: Any) -> httpx.Response:
    """Send a part in two halves, running ``meanwhile()`` between them."""

    def body() -> Iterator[bytes]:
        yield data[: len(data) // 2]
        meanwhile()
        yield data[len(data) // 2:]

    with httpx.Client(base_url=api.url, timeout=60) as client:
        return client.put(
            f"/v1/datasets/uploads/{upload_id}/parts/{number}", content=body(),
            headers=headers | {"X-Part-SHA256": hashlib.sha256(data).hexdigest()},
        )


def test_a_part_arriving_after_complete_changes_nothing(upload_api: ApiHarness) -> None:
    """Before: answered 409, but its bytes went into the completed data set's file."""
    api = upload_api
    headers, data, upload = _open_upload(api)
    completed: dict[str, Any] = {}

    def complete() -> None:
        with httpx.Client(base_url=api.url, timeout=60) as client:
            done = client.post(f"/v1/datasets/uploads/{upload['id']}/complete",
                               headers=headers)
        assert done.status_code == 202, done.text
        completed.update(done.json())

    late = _put_slowly(api, headers, upload["id"], 1, b"\xff" * PART_SIZE, complete)
    assert late.status_code == 409, late.text
    stored = _store(api).get(f"datasets/{completed['id']}/a.npz")
    assert stored == data
    if completed["sha256"]:  # computed at completion by the local store
        assert completed["sha256"] == hashlib.sha256(stored).hexdigest()
    # The late send left nothing behind, staged or otherwise.
    assert [i.key for i in _store(api).list("")] == [f"datasets/{completed['id']}/a.npz"]
    assert _staged(api) == []


def test_interleaved_sends_of_one_part_leave_one_of_them_whole(upload_api: ApiHarness) -> None:
    """Before: both got 200 and the file matched neither (local store)."""
    api = upload_api
    headers, data, upload = _open_upload(api)
    first, second = b"\x01" * PART_SIZE, b"\x02" * PART_SIZE

    def other_send() -> None:
        with httpx.Client(base_url=api.url, timeout=60) as client:
            answer = uploads.put_part(client, headers, upload["id"], 1, second)
        assert answer.status_code == 200, answer.text

    assert _put_slowly(api, headers, upload["id"], 1, first, other_send).status_code == 200
    state = api.client.get(f"/v1/datasets/uploads/{upload['id']}", headers=headers).json()
    recorded = next(p["sha256"] for p in state["received"] if p["number"] == 1)
    done = api.client.post(f"/v1/datasets/uploads/{upload['id']}/complete", headers=headers)
    assert done.status_code == 202, done.text
    stored = _store(api).get(f"datasets/{done.json()['id']}/a.npz")
    assert stored[:PART_SIZE] in (first, second)
    assert hashlib.sha256(stored[:PART_SIZE]).hexdigest() == recorded
    assert stored[PART_SIZE:] == data[PART_SIZE:]


def _staged(api: ApiHarness) -> list[tuple[str, int]]:
    """(name, size) of every staged part, read behind the api's back."""
    url = api.settings.storage_url
    if url.startswith("file://"):
        root = Path(url.removeprefix("file://")) / MULTIPART_DIR
        return [(str(p), p.stat().st_size) for p in root.rglob("*") if p.is_file()]
    bucket, prefix = url.removeprefix("s3://").split("/", 1)
    listed = _s3(api).list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/{MULTIPART_DIR}/")
    return [(item["Key"], item["Size"]) for item in listed.get("Contents", [])]


def _s3(api: ApiHarness) -> Any:
    return boto3.client("s3", endpoint_url=api.settings.s3_endpoint_url,
                        region_name="us-east-1")


def _tamper_with_staged_parts(api: ApiHarness) -> int:
    """Overwrite every staged part with bytes of the same size, behind the api's back."""
    staged = _staged(api)
    for name, size in staged:
        if api.settings.storage_url.startswith("file://"):
            Path(name).write_bytes(b"\0" * size)
        else:
            bucket = api.settings.storage_url.removeprefix("s3://").split("/", 1)[0]
            _s3(api).put_object(Bucket=bucket, Key=name, Body=b"\0" * size)
    return len(staged)


def test_completion_checks_every_stored_part_and_names_a_bad_one(
    upload_api: ApiHarness,
) -> None:
    """A part whose stored bytes no longer match its sha256 is refused at completion
    (409 part_corrupt naming it); the upload stays open and the part is sent again."""
    api = upload_api
    headers, data, upload = _open_upload(api)
    assert _tamper_with_staged_parts(api) >= 1
    refused = api.client.post(f"/v1/datasets/uploads/{upload['id']}/complete", headers=headers)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "part_corrupt" and error["details"] == {"missing": [1]}
    assert "sha256" in error["message"]
    assert api.client.get("/v1/datasets", headers=headers).json()["data"] == []
    state = api.client.get(f"/v1/datasets/uploads/{upload['id']}", headers=headers).json()
    assert (state["status"], state["missing"]) == ("open", [1])
    for number, part in uploads.parts_of(upload, {"a.npz": data}).items():
        assert uploads.put_part(api.client, headers, upload["id"], number,
                                part).status_code == 200
    done = api.client.post(f"/v1/datasets/uploads/{upload['id']}/complete", headers=headers)
    assert done.status_code == 202, done.text
    assert _store(api).get(f"datasets/{done.json()['id']}/a.npz") == data
