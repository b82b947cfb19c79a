"""Single-request data set uploads (``POST /v1/datasets``), listing and deletion.

A small .npz/.csv (up to ``limits.inline_validation_bytes``) is validated in the request
by the streaming validators (core.datasets: memory bounded by a few blocks, not by the
file) and stored as npz: it comes back ``ready``. A larger one is stored as sent and
validated by the validation queue like a chunked upload (``validating``), so a big file
never costs the api's request threads its parse. Either way the bytes count against the
owner's quota, reserved atomically with the row (api.services.quota).
"""

from __future__ import annotations

import hashlib
import logging
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from sqlalchemy.orm import Session

from api.errors import ApiError, field_error, in_use, not_found
from api.services import quota
from api.state import ServiceState
from core import repositories
from core.datasets import DatasetError, DatasetSummary, table_format, validate_table
from core.jobspec import PRINTABLE
from core.models import Dataset, DatasetStatus, JobStatus, User, is_id, new_id, utcnow
from core.queue import enqueue_dataset_validation
from core.storage import dataset_key, dataset_prefix

log = logging.getLogger(__name__)


def _refused(exc: DatasetError) -> ApiError:
    return ApiError(422, "invalid_dataset", f"{exc.field}: {exc.message}",
                    details=[{"field": exc.field, "message": exc.message}])


def store_upload(
    session: Session, *, state: ServiceState, owner: User, filename: str, name: str,
    source: BinaryIO, size: int,
) -> Dataset:
    """Store the file in ``source`` (``size`` bytes) as a data set of ``owner``."""
    check_dataset_name(name)
    limits = state.settings.limits
    if size > limits.max_upload_bytes:
        raise ApiError(
            413, "payload_too_large",
            f"upload exceeds the limit of {limits.max_upload_bytes} bytes",
            details={"limit_bytes": limits.max_upload_bytes},
        )
    try:
        fmt = table_format(filename)
    except DatasetError as exc:
        raise _refused(exc) from exc
    quota.check(session, state=state, owner=owner, adding=size, what="upload")
    session.rollback()
    if size <= limits.inline_validation_bytes:
        return _validate_and_store(session, state, owner, fmt, name, source)
    return _store_for_validation(session, state, owner, fmt, name, filename, source, size)


def _validate_and_store(session: Session, state: ServiceState, owner: User, fmt: str,
                        name: str, source: BinaryIO) -> Dataset:
    limits = state.settings.limits
    with tempfile.TemporaryFile() as converted:
        try:
            summary = validate_table(fmt, source, converted=converted,
                                     max_rows=limits.max_dataset_rows,
                                     max_features=limits.max_dataset_features)
        except DatasetError as exc:
            raise _refused(exc) from exc
        stored = converted if fmt == "csv" else source
        stored.seek(0)
        digest, size = _digest(stored)
        stored.seek(0)
        dataset_id = new_id()
        key = dataset_key(dataset_id, "npz")
        # Object first, row second: a row never points at a missing object, and an
        # object whose row could not be written is deleted again.
        state.store.put_stream(key, stored)
    with undo_object_on_failure(state, key):
        quota.reserve(session, state=state, owner=owner, adding=size, what="upload")
        dataset = repositories.create_dataset(
            session, owner_id=owner.id, id=dataset_id, name=name, storage_key=key, size=size,
            sha256=digest, **_columns(summary),
        )
        session.commit()
    return dataset


def _store_for_validation(session: Session, state: ServiceState, owner: User, fmt: str,
                          name: str, filename: str, source: BinaryIO, size: int) -> Dataset:
    """Store the file as sent; the validation queue makes it ready or invalid."""
    source.seek(0)
    digest, _ = _digest(source)
    source.seek(0)
    dataset_id = new_id()
    key = f"{dataset_prefix(dataset_id)}upload.{fmt}"
    state.store.put_stream(key, source)
    with undo_object_on_failure(state, key):
        quota.reserve(session, state=state, owner=owner, adding=size, what="upload")
        dataset = repositories.create_dataset(
            session, owner_id=owner.id, id=dataset_id, name=name, format=fmt,
            status=DatasetStatus.VALIDATING.value, storage_key=key, size=size, sha256=digest,
            num_rows=0, feature_shape=[], dtype="", num_classes=None,
            validation_sent_at=utcnow(), files=[{"path": filename, "key": key, "size": size}],
        )
        session.commit()
    if state.settings.redis_url:
        try:
            enqueue_dataset_validation(dataset.id, broker_url=state.settings.redis_url)
        except Exception:  # noqa: BLE001 - the worker's sweep validates it later
            log.exception("could not enqueue the validation of dataset %s", dataset.id)
    return dataset


def _digest(handle: BinaryIO) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    while chunk := handle.read(1024 * 1024):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def _columns(summary: DatasetSummary) -> dict[str, Any]:
    return {"format": summary.format, "num_rows": summary.num_rows,
            "feature_shape": summary.feature_shape, "dtype": summary.dtype,
            "num_classes": summary.num_classes, "stats": summary.stats}


def check_dataset_name(name: str) -> None:
    """A name may come from the file name, which the form's pattern did not check;
    PostgreSQL refuses NUL in text, so refuse control characters here as a 422."""
    if not name or len(name) > 255 or not re.match(PRINTABLE, name):
        raise field_error("name", "must be 1 to 255 characters without control characters")


@contextmanager
def undo_object_on_failure(state: ServiceState, *keys: str) -> Iterator[None]:
    try:
        yield
    except BaseException:
        for key in keys:
            try:
                state.store.delete(key)
            except Exception:  # noqa: BLE001 - the sweep in workers removes it later
                log.exception("could not undo object %s after a failed row write", key)
        raise


# A job in one of these may still read the data set (a paused one when it resumes).
ACTIVE_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.PAUSED)


def get_owned_dataset(session: Session, *, owner: User, dataset_id: str) -> Dataset:
    dataset = repositories.get_dataset(
        session, dataset_id=dataset_id, owner_id=owner.id
    ) if is_id(dataset_id) else None
    if dataset is None:
        raise not_found("dataset", dataset_id)
    return dataset


def delete_dataset(session: Session, *, state: ServiceState, owner: User, dataset_id: str) -> None:
    get_owned_dataset(session, owner=owner, dataset_id=dataset_id)
    using = repositories.jobs_using_dataset(
        session, owner_id=owner.id, dataset_id=dataset_id, statuses=ACTIVE_STATUSES
    )
    if using:
        raise in_use("dataset", dataset_id, using)
    repositories.delete_dataset(session, dataset_id=dataset_id)
    session.commit()
    prefix = dataset_prefix(dataset_id)
    try:
        state.store.delete_prefix(prefix)
    except Exception:  # noqa: BLE001 - the row is gone; leftover objects are debris
        log.exception("dataset %s deleted but objects under %s remain", dataset_id, prefix)


def list_owned_datasets(session: Session, *, owner: User) -> list[Dataset]:
    return repositories.list_datasets(session, owner_id=owner.id)
