"""Helpers for chunked-upload tests: send files through the real upload endpoints."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx


def create(
    client: httpx.Client, headers: dict[str, str], files: dict[str, bytes], *,
    part_size: int = 1000, name: str = "set",
) -> httpx.Response:
    body = {"name": name, "part_size": part_size,
            "files": [{"path": path, "size": len(data)} for path, data in files.items()]}
    return client.post("/v1/datasets/uploads", json=body, headers=headers)


def parts_of(upload: dict[str, Any], files: dict[str, bytes]) -> dict[int, bytes]:
    """Every part's bytes by global part number, as the upload's plan numbers them."""
    size = upload["part_size"]
    parts = {}
    for planned in upload["files"]:
        data = files[planned["path"]]
        for index in range(planned["parts"]):
            parts[planned["first_part"] + index] = data[index * size:(index + 1) * size]
    return parts


def put_part(
    client: httpx.Client, headers: dict[str, str], upload_id: str, number: int, data: bytes,
    *, sha256: str | None = None,
) -> httpx.Response:
    digest = sha256 or hashlib.sha256(data).hexdigest()
    return client.put(
        f"/v1/datasets/uploads/{upload_id}/parts/{number}", content=data,
        headers=headers | {"X-Part-SHA256": digest},
    )


def upload(
    client: httpx.Client, headers: dict[str, str], files: dict[str, bytes], *,
    part_size: int = 1000, name: str = "set",
) -> dict[str, Any]:
    """Create, send every part, complete; returns the data set (status validating)."""
    created = create(client, headers, files, part_size=part_size, name=name)
    assert created.status_code == 201, created.text
    upload_id = created.json()["id"]
    for number, data in parts_of(created.json(), files).items():
        answer = put_part(client, headers, upload_id, number, data)
        assert answer.status_code == 200, answer.text
    done = client.post(f"/v1/datasets/uploads/{upload_id}/complete", headers=headers)
    assert done.status_code == 202, done.text
    dataset: dict[str, Any] = done.json()
    return dataset
