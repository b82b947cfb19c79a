"""Dataset uploads: validate, store as npz in object storage, then record the row."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session

from api.errors import ApiError, field_error, in_use, not_found
from api.state import ServiceState
from core import repositories
from core.datasets import DatasetError, ValidatedDataset, validate_upload
from core.jobspec import PRINTABLE
from core.models import Dataset, JobStatus, User, is_id, new_id
from core.storage import dataset_key, dataset_prefix

log = logging.getLogger(__name__)


def store_upload(
    session: Session, *, state: ServiceState, owner: User, filename: str, name: str, raw: bytes
) -> Dataset:
    check_dataset_name(name)
    limits = state.settings.limits
    if len(raw) > limits.max_upload_bytes:
        raise ApiError(
            413, "payload_too_large",
            f"upload exceeds the limit of {limits.max_upload_bytes} bytes",
            details={"limit_bytes": limits.max_upload_bytes},
        )
    try:
        validated = validate_upload(
            filename, raw,
            max_rows=limits.max_dataset_rows, max_features=limits.max_dataset_features,
        )
    except DatasetError as exc:
        raise ApiError(
            422, "invalid_dataset", f"{exc.field}: {exc.message}",
            details=[{"field": exc.field, "message": exc.message}],
        ) from exc
    dataset_id = new_id()
    key = dataset_key(dataset_id, "npz")
    # Object first, row second: a row never points at a missing object, and an object
    # whose row could not be written is deleted again rather than left behind.
    state.store.put(key, validated.npz_bytes)
    with undo_object_on_failure(state, key):
        dataset = _create_row(
            session, owner, dataset_id, name, key, validated
        )
    return dataset


def _create_row(
    session: Session, owner: User, dataset_id: str, name: str, key: str,
    validated: ValidatedDataset,
) -> Dataset:
    dataset = repositories.create_dataset(
        session,
        owner_id=owner.id,
        id=dataset_id,
        name=name,
        format=validated.format,
        storage_key=key,
        size=len(validated.npz_bytes),
        sha256=validated.sha256,
        num_rows=validated.num_rows,
        feature_shape=validated.feature_shape,
        dtype=validated.dtype,
        num_classes=validated.num_classes,
        stats=validated.stats,
    )
    session.commit()
    return dataset


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
