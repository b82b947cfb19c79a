"""Resumable chunked uploads: create, store parts as they arrive, complete, abort.

Part bodies never sit in the api's memory: the route streams each one through the
store's part writer (on the local store straight into the assembled file at the part's
offset; on S3 a spooled file that becomes one multipart part). Completion joins the
parts into the data set's objects, writes the row as ``validating`` and sends
``rudder.validate_dataset`` to a worker after the commit.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from api.errors import ApiError, field_error, not_found
from api.schemas.datasets import UploadCreate, UploadFilePublic, UploadPartPublic, UploadPublic
from api.services.datasets import undo_object_on_failure
from api.state import ServiceState
from core import repositories
from core.models import (
    Dataset,
    DatasetStatus,
    DatasetUpload,
    DatasetUploadPart,
    UploadStatus,
    User,
    is_id,
    new_id,
    utcnow,
)
from core.multipart import PartWriter
from core.queue import enqueue_dataset_validation

log = logging.getLogger(__name__)

# What a finished upload may be, by the files it holds (checked again by the worker).
SINGLE_FILE_FORMATS = {".npz": "npz", ".csv": "csv", ".zip": "archive", ".tar": "archive",
                       ".tgz": "archive", ".tar.gz": "archive"}
MAX_PARTS = 10_000  # S3's limit per multipart upload


def _format_of(paths: list[str]) -> str:
    lowered = sorted(p.lower() for p in paths)
    if len(lowered) == 2:
        if sorted(Path(p).suffix for p in lowered) == [".idx", ".rec"]:
            return "recordio"
        raise field_error("files", "two files must be a RecordIO pair: one .rec and one .idx")
    for suffix, fmt in SINGLE_FILE_FORMATS.items():
        if lowered[0].endswith(suffix):
            return fmt
    if lowered[0].endswith(".rec"):
        raise field_error("files", "a .rec needs its .idx: send both files in one upload")
    raise field_error(
        "files", "unsupported file type; upload .npz, .csv, .rec + .idx, .zip or .tar"
    )


def create_upload(
    session: Session, *, state: ServiceState, owner: User, body: UploadCreate
) -> UploadPublic:
    limits = state.settings.limits
    fmt = _format_of([f.path for f in body.files])
    if len({f.path for f in body.files}) != len(body.files):
        raise field_error("files", "file names must differ")
    part_size = body.part_size or limits.default_upload_part_bytes
    if part_size > limits.max_upload_part_bytes:
        raise field_error("part_size", f"must be at most {limits.max_upload_part_bytes} bytes")
    total = sum(f.size for f in body.files)
    if any(f.size > part_size for f in body.files) and part_size < state.store.min_part_size:
        raise field_error(
            "part_size", f"this store needs parts of at least {state.store.min_part_size} bytes"
        )
    held = repositories.bytes_held_by(session, owner_id=owner.id)
    quota = limits.max_dataset_bytes_per_user
    if held + total > quota:
        raise ApiError(
            413, "quota_exceeded",
            f"this upload of {total} bytes would exceed your data quota of {quota} bytes "
            f"({held} bytes in use)",
            details={"quota_bytes": quota, "used_bytes": held, "requested_bytes": total},
        )
    dataset_id = new_id()
    files: list[dict[str, object]] = []
    next_part = 1
    for f in body.files:
        parts = max(1, math.ceil(f.size / part_size))
        files.append({"path": f.path, "size": f.size, "key": f"datasets/{dataset_id}/{f.path}",
                      "first_part": next_part, "parts": parts, "format": fmt})
        next_part += parts
    if next_part - 1 > MAX_PARTS:
        raise field_error("part_size", f"too small: the upload would need more than "
                                       f"{MAX_PARTS} parts")
    for planned in files:
        planned["token"] = state.store.start_multipart(str(planned["key"]))
    upload = repositories.create_upload(
        session, owner_id=owner.id, id=new_id(), name=body.name, part_size=part_size,
        total_size=total, files=files, dataset_id=dataset_id,
    )
    session.commit()
    return describe(upload, [])


def describe(upload: DatasetUpload, parts: Sequence[DatasetUploadPart]) -> UploadPublic:
    received = [UploadPartPublic.model_validate(p) for p in parts]
    total_parts = sum(int(f["parts"]) for f in upload.files)
    have = {p.number for p in received}
    return UploadPublic(
        id=upload.id, name=upload.name, status=upload.status,  # type: ignore[arg-type]
        part_size=upload.part_size, total_size=upload.total_size, total_parts=total_parts,
        files=[UploadFilePublic(path=f["path"], size=f["size"], first_part=f["first_part"],
                                parts=f["parts"]) for f in upload.files],
        received=received, missing=[n for n in range(1, total_parts + 1) if n not in have],
        dataset_id=str(upload.dataset_id), created_at=upload.created_at,
    )


def _owned_upload(session: Session, owner: User, upload_id: str) -> DatasetUpload:
    upload = (
        repositories.get_upload(session, upload_id=upload_id, owner_id=owner.id)
        if is_id(upload_id) else None
    )
    if upload is None:
        raise not_found("upload", upload_id)
    return upload


def get_upload(session: Session, *, owner: User, upload_id: str) -> UploadPublic:
    upload = _owned_upload(session, owner, upload_id)
    return describe(upload, list(repositories.list_upload_parts(session, upload_id=upload.id)))


@dataclass(frozen=True)
class PartTarget:
    """Where part ``number`` goes and how big it must be."""

    upload_id: str
    owner_id: str
    number: int
    key: str
    token: str
    store_number: int  # 1-based within its file's multipart upload
    offset: int  # where the part starts in its file
    expected_size: int


def part_target(session: Session, *, owner: User, upload_id: str, number: int) -> PartTarget:
    upload = _owned_upload(session, owner, upload_id)
    if upload.status != UploadStatus.OPEN.value:
        raise ApiError(409, "conflict", f"upload {upload_id} is {upload.status}; "
                                        "parts can only be sent to an open upload")
    total = sum(int(f["parts"]) for f in upload.files)
    target = None
    for f in upload.files:
        first, count = int(f["first_part"]), int(f["parts"])
        if first <= number < first + count:
            index = number - first
            size = min(upload.part_size, int(f["size"]) - index * upload.part_size)
            target = PartTarget(upload.id, upload.owner_id, number, str(f["key"]),
                                str(f["token"]), index + 1, index * upload.part_size, size)
    # Release the connection (the embedded SQLite has one) while the body streams in.
    session.rollback()
    if target is None:
        raise field_error("number", f"part numbers run from 1 to {total}")
    return target


def open_part(state: ServiceState, target: PartTarget) -> PartWriter:
    return state.store.part_writer(target.key, target.token, target.store_number, target.offset)


def record_part(
    session: Session, *, writer: PartWriter, target: PartTarget, sha256: str
) -> UploadPartPublic:
    """Store a received, verified part and record it, unless the upload was aborted or
    completed while the part streamed in."""
    upload = repositories.get_upload(session, upload_id=target.upload_id,
                                     owner_id=target.owner_id)
    if upload is None or upload.status != UploadStatus.OPEN.value:
        writer.discard()
        raise ApiError(409, "conflict", f"upload {target.upload_id} was aborted or completed "
                                        f"while part {target.number} was being sent")
    etag = writer.commit()
    part = repositories.record_upload_part(
        session, upload_id=target.upload_id, number=target.number,
        size=target.expected_size, sha256=sha256, etag=etag,
    )
    session.commit()
    return UploadPartPublic.model_validate(part)


def forget_part(session: Session, *, target: PartTarget) -> None:
    """A failed send of a part overwrote (locally) or replaces its earlier bytes: the part
    counts as missing until it is sent again whole."""
    repositories.forget_upload_part(session, upload_id=target.upload_id, number=target.number)
    session.commit()


def complete_upload(
    session: Session, *, state: ServiceState, owner: User, upload_id: str
) -> Dataset:
    upload = _owned_upload(session, owner, upload_id)
    if upload.status != UploadStatus.OPEN.value:
        raise ApiError(409, "conflict", f"upload {upload_id} is already {upload.status}")
    parts = repositories.list_upload_parts(session, upload_id=upload.id)
    state_now = describe(upload, list(parts))
    if state_now.missing:
        shown = state_now.missing[:20]
        raise ApiError(
            409, "upload_incomplete",
            f"upload {upload_id} is missing {len(state_now.missing)} part(s): "
            f"{shown}{' ...' if len(state_now.missing) > 20 else ''}; send them, then complete",
            details={"missing": state_now.missing},
        )
    if not repositories.claim_upload_for_completion(session, upload_id=upload.id):
        raise ApiError(409, "conflict", f"upload {upload_id} is already being completed")
    session.commit()
    etags = {p.number: p.etag for p in parts}
    keys = [str(f["key"]) for f in upload.files]
    with undo_object_on_failure(state, *keys):
        for f in upload.files:
            first = int(f["first_part"])
            file_parts = [(n - first + 1, etags[n]) for n in range(first, first + int(f["parts"]))]
            state.store.complete_multipart(str(f["key"]), str(f["token"]), file_parts)
        dataset = repositories.create_dataset(
            session, owner_id=owner.id, id=upload.dataset_id, name=upload.name,
            format=str(upload.files[0]["format"]), status=DatasetStatus.VALIDATING.value,
            storage_key=_main_key(upload), size=upload.total_size, sha256="", num_rows=0,
            feature_shape=[], dtype="", num_classes=None, validation_sent_at=utcnow(),
            files=[{"path": f["path"], "key": f["key"], "size": f["size"]} for f in upload.files],
        )
        # Kept (completed) so a client that lost the answer can find its data set.
        upload.status = UploadStatus.COMPLETED.value
        session.commit()
    if state.settings.redis_url:
        try:
            enqueue_dataset_validation(dataset.id, broker_url=state.settings.redis_url)
        except Exception:  # noqa: BLE001 - the worker's sweep validates it later
            log.exception("could not enqueue the validation of dataset %s", dataset.id)
    return dataset


def _main_key(upload: DatasetUpload) -> str:
    for f in upload.files:
        if not str(f["path"]).lower().endswith(".idx"):
            return str(f["key"])
    return str(upload.files[0]["key"])


def abort_upload(session: Session, *, state: ServiceState, owner: User, upload_id: str) -> None:
    upload = _owned_upload(session, owner, upload_id)
    if upload.status != UploadStatus.OPEN.value:
        raise ApiError(409, "conflict", f"upload {upload_id} is {upload.status}")
    repositories.delete_upload(session, upload_id=upload.id)
    session.commit()
    for f in upload.files:
        try:
            state.store.abort_multipart(str(f["key"]), str(f["token"]))
        except Exception:  # noqa: BLE001 - the row is gone; leftover parts are debris
            log.exception("upload %s aborted but its parts of %s remain", upload_id, f["key"])
