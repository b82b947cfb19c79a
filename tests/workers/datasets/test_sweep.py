"""The watchdog's data-set housekeeping: lost validations are sent again (once), and
uploads abandoned for days are aborted."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from core import repositories
from core.db import session_scope
from core.models import new_id, utcnow
from core.storage import LocalStore
from workers.datasets.sweep import expire_abandoned_uploads, resend_stale_validations


def _user() -> str:
    with session_scope() as session:
        return repositories.create_user(session, name=f"u-{new_id()[:8]}").id


def test_a_validation_sent_long_ago_is_sent_again_once(worker_env: dict[str, str]) -> None:
    owner = _user()
    long_ago, recently = utcnow() - timedelta(hours=2), utcnow()
    ids = {}
    for name, sent in (("lost", long_ago), ("fresh", recently)):
        ids[name] = new_id()
        with session_scope() as session:
            repositories.create_dataset(
                session, owner_id=owner, id=ids[name], name=name, format="csv",
                status="validating", storage_key="k", size=1, sha256="", num_rows=0,
                feature_shape=[], dtype="", validation_sent_at=sent,
            )
    sent: list[str] = []
    assert resend_stale_validations(sent.append, stale_seconds=600) == [ids["lost"]]
    assert sent == [ids["lost"]]
    assert resend_stale_validations(sent.append, stale_seconds=600) == []  # re-sent just now


def test_an_abandoned_upload_is_aborted(worker_env: dict[str, str]) -> None:
    store = LocalStore(worker_env["RUDDER_STORAGE_URL"].removeprefix("file://"))
    owner = _user()
    token = store.start_multipart("datasets/x/a.csv")
    writer = store.stage_part("datasets/x/a.csv", token, 1)
    writer.write(b"abc")
    writer.finish(hashlib.sha256(b"abc").hexdigest())
    with session_scope() as session:
        upload = repositories.create_upload(
            session, owner_id=owner, id=new_id(), name="old", part_size=3, total_size=3,
            files=[{"path": "a.csv", "key": "datasets/x/a.csv", "token": token,
                    "first_part": 1, "parts": 1, "size": 3}],
            dataset_id=new_id(), created_at=utcnow() - timedelta(days=8),
        )
        upload_id = upload.id
    with session_scope() as session:  # its declared size is reserved against the quota
        assert repositories.bytes_held_by(session, owner_id=owner) == 3
    assert expire_abandoned_uploads(store, max_age_seconds=7 * 24 * 3600) == [upload_id]
    with session_scope() as session:
        assert repositories.get_upload(session, upload_id=upload_id, owner_id=owner) is None
        assert repositories.bytes_held_by(session, owner_id=owner) == 0  # and released
    assert [p for p in store.root.rglob("*") if p.is_file()] == []
