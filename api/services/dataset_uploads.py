"""Resumable chunked uploads: create, store parts as they arrive, complete, abort.

Part bodies never sit in the api's memory: the route streams each send of a part into a
staged object of its own (core.multipart), and ``record_part`` makes it part ``n`` only
while the upload is open (a compare-and-set under the upload's row lock), so a send that
arrives after ``complete`` changes nothing. Completion claims the upload, reads the
recorded parts, writes each file from them (checking every part's size and sha256; on
the local store also computing the whole file's sha256), writes the row as
``validating`` and sends ``rudder.validate_dataset`` to the validation queue after the
commit. A part whose stored bytes fail the check is forgotten and the upload reopened,
so the client sends that part again.
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
from api.services import quota
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
from core.multipart import PartCorrupt, PartWriter, StoredFileCorrupt, StoredPart
from core.queue import enqueue_dataset_validation
from core.storage import ObjectNotFound

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
    quota.check(session, state=state, owner=owner, adding=total, what="upload")
    session.rollback()
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
    try:
        # The declared size is reserved from here until completion, abort or expiry.
        quota.reserve(session, state=state, owner=owner, adding=total, what="upload")
        upload = repositories.create_upload(
            session, owner_id=owner.id, id=new_id(), name=body.name, part_size=part_size,
            total_size=total, files=files, dataset_id=dataset_id,
        )
        session.commit()
    except BaseException:
        session.rollback()
        _drop_staging(state, files)
        raise
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
                                str(f["token"]), index + 1, size)
    # Release the connection (the embedded SQLite has one) while the body streams in.
    session.rollback()
    if target is None:
        raise field_error("number", f"part numbers run from 1 to {total}")
    return target


def open_part(state: ServiceState, target: PartTarget) -> PartWriter:
    """A staged object for this send of the part; 409 when the upload is gone."""
    try:
        return state.store.stage_part(target.key, target.token, target.store_number)
    except ObjectNotFound as exc:
        raise _gone(target) from exc


def _gone(target: PartTarget) -> ApiError:
    return ApiError(409, "conflict", f"upload {target.upload_id} was aborted or completed "
                                     f"while part {target.number} was being sent; it was "
                                     "not stored")


def record_part(
    session: Session, *, state: ServiceState, writer: PartWriter, target: PartTarget,
    sha256: str,
) -> UploadPartPublic:
    """Make a received, verified, staged send part ``number``, unless the upload was
    aborted or completed meanwhile (then the staged send is dropped: 409). The send it
    replaces, if any, is dropped after the commit."""
    recorded, previous = repositories.record_upload_part_if_open(
        session, upload_id=target.upload_id, number=target.number,
        size=target.expected_size, sha256=sha256, stored_as=writer.stored_as,
    )
    if not recorded:
        session.rollback()
        writer.discard()
        raise _gone(target)
    session.commit()
    if previous is not None and previous != writer.stored_as:
        _drop_quietly(state, target.key, target.token, previous)
    return UploadPartPublic(number=target.number, size=target.expected_size, sha256=sha256)


def _drop_quietly(state: ServiceState, key: str, token: str, stored_as: str) -> None:
    try:
        state.store.drop_staged(key, token, stored_as)
    except Exception:  # noqa: BLE001 - the upload's completion or abort drops it anyway
        log.warning("could not drop replaced part %s of %s", stored_as, key, exc_info=True)


def complete_upload(
    session: Session, *, state: ServiceState, owner: User, upload_id: str
) -> Dataset:
    upload = _owned_upload(session, owner, upload_id)
    if upload.status != UploadStatus.OPEN.value:
        raise ApiError(409, "conflict", f"upload {upload_id} is already {upload.status}")
    _refuse_if_incomplete(upload, repositories.list_upload_parts(session, upload_id=upload.id))
    if not repositories.claim_upload_for_completion(session, upload_id=upload.id):
        raise ApiError(409, "conflict", f"upload {upload_id} is already being completed")
    session.commit()
    # Read after the claim: no part can be recorded any more (record_part needs "open").
    parts = {p.number: p for p in repositories.list_upload_parts(session, upload_id=upload.id)}
    session.rollback()  # writing the files may take a while; hold no connection meanwhile
    written: list[str] = []
    try:
        _refuse_if_incomplete(upload, list(parts.values()))
        digests = {}
        for f in upload.files:
            first = int(f["first_part"])
            stored = [StoredPart(n - first + 1, parts[n].stored_as, parts[n].sha256, parts[n].size)
                      for n in range(first, first + int(f["parts"]))]
            try:
                digests[str(f["key"])] = state.store.complete_multipart(
                    str(f["key"]), str(f["token"]), stored)
            except PartCorrupt as exc:  # numbered within its file: name the global part
                raise PartCorrupt(first + exc.number - 1, exc.why) from exc
            written.append(str(f["key"]))
        main_key = _main_key(upload)
        dataset = repositories.create_dataset(
            session, owner_id=owner.id, id=upload.dataset_id, name=upload.name,
            format=str(upload.files[0]["format"]), status=DatasetStatus.VALIDATING.value,
            storage_key=main_key, size=upload.total_size, sha256=digests[main_key] or "",
            num_rows=0, feature_shape=[], dtype="", num_classes=None,
            validation_sent_at=utcnow(),
            files=[{"path": f["path"], "key": f["key"], "size": f["size"]} for f in upload.files],
        )
        # Kept (completed) so a client that lost the answer can find its data set.
        repositories.set_upload_status(session, upload_id=upload.id,
                                       from_status=UploadStatus.COMPLETING,
                                       to_status=UploadStatus.COMPLETED)
        session.commit()
    except BaseException as exc:
        session.rollback()
        _reopen(session, state, upload, written, exc)
        if isinstance(exc, PartCorrupt):
            raise ApiError(
                409, "part_corrupt", f"part {exc.number} {exc.why}; send it again, then complete",
                details={"missing": [exc.number]},
            ) from exc
        if isinstance(exc, StoredFileCorrupt):
            raise ApiError(409, "upload_corrupt", f"{exc}; complete the upload again") from exc
        raise
    if state.settings.redis_url:
        try:
            enqueue_dataset_validation(dataset.id, broker_url=state.settings.redis_url)
        except Exception:  # noqa: BLE001 - the worker's sweep validates it later
            log.exception("could not enqueue the validation of dataset %s", dataset.id)
    return dataset


def _refuse_if_incomplete(upload: DatasetUpload, parts: Sequence[DatasetUploadPart]) -> None:
    missing = describe(upload, list(parts)).missing
    if missing:
        raise ApiError(
            409, "upload_incomplete",
            f"upload {upload.id} is missing {len(missing)} part(s): "
            f"{missing[:20]}{' ...' if len(missing) > 20 else ''}; send them, then complete",
            details={"missing": missing},
        )


def _reopen(session: Session, state: ServiceState, upload: DatasetUpload, written: list[str],
            exc: BaseException) -> None:
    """A completion that failed leaves the upload open, as it was: the files it wrote go,
    a corrupt part is forgotten (the client sends it again), the rest stays staged."""
    for key in written:
        try:
            state.store.delete(key)
        except Exception:  # noqa: BLE001 - the data set's deletion or a sweep removes it
            log.exception("could not remove %s after a failed completion", key)
    if isinstance(exc, PartCorrupt):
        repositories.forget_upload_part(session, upload_id=upload.id, number=exc.number)
    repositories.set_upload_status(session, upload_id=upload.id,
                                   from_status=UploadStatus.COMPLETING,
                                   to_status=UploadStatus.OPEN)
    session.commit()


def _main_key(upload: DatasetUpload) -> str:
    for f in upload.files:
        if not str(f["path"]).lower().endswith(".idx"):
            return str(f["key"])
    return str(upload.files[0]["key"])


def abort_upload(session: Session, *, state: ServiceState, owner: User, upload_id: str) -> None:
    upload = _owned_upload(session, owner, upload_id)
    if not repositories.delete_upload(session, upload_id=upload.id):
        raise ApiError(409, "conflict", f"upload {upload_id} is {upload.status}")
    session.commit()
    _drop_staging(state, upload.files)


def _drop_staging(state: ServiceState, files: Sequence[dict[str, object]]) -> None:
    for f in files:
        try:
            state.store.abort_multipart(str(f["key"]), str(f["token"]))
        except Exception:  # noqa: BLE001 - the row is gone; leftover parts are debris
            log.exception("the staged parts of %s remain after the upload ended", f["key"])
