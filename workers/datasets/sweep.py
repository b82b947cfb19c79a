"""Housekeeping for data sets, run by the worker's watchdog thread.

- A data set still ``validating`` long after its validation was sent (the message was
  lost with Redis, or the worker validating it was killed) is sent again; the send time
  is a compare-and-set, so of several watchdogs exactly one re-sends.
- An upload left open for days is aborted: its staged parts stop holding disk and its
  reservation stops holding quota.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from core import repositories as repo
from core.config import get_settings
from core.db import session_scope
from core.models import utcnow
from core.queue import enqueue_dataset_validation
from core.storage import ObjectStore

log = logging.getLogger(__name__)

# Validation of a large set decodes up to 20,000 images; well within this.
STALE_VALIDATION_SECONDS = 30 * 60
ABANDONED_UPLOAD_SECONDS = 7 * 24 * 3600


def _send_validation(dataset_id: str) -> None:
    broker = get_settings().redis_url
    if not broker:
        raise RuntimeError("RUDDER_REDIS_URL is not set")
    enqueue_dataset_validation(dataset_id, broker_url=broker)


def resend_stale_validations(
    send: Callable[[str], None] = _send_validation,
    stale_seconds: float = STALE_VALIDATION_SECONDS,
) -> list[str]:
    now = utcnow()
    cutoff = now - timedelta(seconds=stale_seconds)
    with session_scope() as session:
        stale = repo.validations_sent_before(session, cutoff=cutoff)
    resent = []
    for dataset_id, before in stale:
        with session_scope() as session:
            claimed = repo.mark_validation_sent(session, dataset_id=dataset_id,
                                                previous=before, now=now)
        if claimed:
            send(dataset_id)
            resent.append(dataset_id)
            log.warning("dataset %s still validating; validation sent again", dataset_id)
    return resent


def expire_abandoned_uploads(
    store: ObjectStore, max_age_seconds: float = ABANDONED_UPLOAD_SECONDS
) -> list[str]:
    cutoff = utcnow() - timedelta(seconds=max_age_seconds)
    with session_scope() as session:
        abandoned = [(u.id, list(u.files)) for u in
                     repo.open_uploads_created_before(session, cutoff=cutoff)]
    expired = []
    for upload_id, files in abandoned:
        with session_scope() as session:
            if not repo.delete_upload(session, upload_id=upload_id):
                continue  # completed (or aborted) since it was listed
        for planned in files:
            store.abort_multipart(str(planned["key"]), str(planned["token"]))
        expired.append(upload_id)
        log.warning("upload %s abandoned for %.0f s; aborted", upload_id, max_age_seconds)
    return expired


def sweep_datasets(store: ObjectStore) -> None:
    resend_stale_validations()
    expire_abandoned_uploads(store)
