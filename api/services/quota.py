"""The per-user storage quota (``limits.max_dataset_bytes_per_user``): everything a user
uploads counts, data sets (single-request and chunked) and models.

A check that passes and the insert it allows are one atomic step: ``reserve`` locks the
user's row (core.repositories.lock_user_storage) before summing what is held, and the
caller inserts its row and commits under that lock, so concurrent requests of one user
are decided one after the other. A chunked upload reserves its declared size when it
starts; aborting it (or its expiry) deletes the row and so releases it.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from api.errors import ApiError
from api.schemas.usage import UsageBytes, UsagePublic
from api.state import ServiceState
from core import repositories
from core.models import User
from core.storage import job_export_prefix

COUNTED = ["datasets", "uploads_in_progress", "models"]
# Exports live only in object storage: one listing per job, for this many newest jobs.
EXPORT_LISTED_JOBS = 500


def _refuse(quota: int, used: int, adding: int, what: str) -> ApiError:
    return ApiError(
        413, "quota_exceeded",
        f"this {what} of {adding} bytes would exceed your storage quota of {quota} bytes "
        f"({used} bytes in use; `rudder usage` shows what)",
        details={"quota_bytes": quota, "used_bytes": used, "requested_bytes": adding},
    )


def check(session: Session, *, state: ServiceState, owner: User, adding: int,
          what: str) -> None:
    """Refuse early (no lock) what cannot fit; ``reserve`` decides for good."""
    quota = state.settings.limits.max_dataset_bytes_per_user
    used = repositories.bytes_held_by(session, owner_id=owner.id)
    if used + adding > quota:
        raise _refuse(quota, used, adding, what)


def reserve(session: Session, *, state: ServiceState, owner: User, adding: int,
            what: str) -> None:
    """Lock the owner's storage until the caller's commit and refuse (413) if ``adding``
    more bytes would not fit. The caller inserts the row that holds them, then commits."""
    repositories.lock_user_storage(session, user_id=owner.id)
    check(session, state=state, owner=owner, adding=adding, what=what)


def usage(session: Session, *, state: ServiceState, owner: User) -> UsagePublic:
    counted = repositories.upload_bytes_by_kind(session, owner_id=owner.id)
    checkpoints = repositories.checkpoint_bytes_of(session, owner_id=owner.id)
    jobs = repositories.job_ids_of(session, owner_id=owner.id, limit=EXPORT_LISTED_JOBS)
    session.rollback()  # the listings below may take a while; hold no connection
    exports = sum(item.size for job_id in jobs
                  for item in state.store.list(job_export_prefix(job_id)))
    quota = state.settings.limits.max_dataset_bytes_per_user
    used = sum(counted.values())
    return UsagePublic(
        quota_bytes=quota, used_bytes=used, available_bytes=max(0, quota - used),
        counted=COUNTED,
        bytes=UsageBytes(**counted, checkpoints=checkpoints, exports=exports),
    )
