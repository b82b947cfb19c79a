from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from core import repositories as repo
from core.models import Job, JobStatus, LRChangeMode, User, utcnow
from core.tokens import authenticate, create_user_and_token, issue_token, revoke_token

SPEC = {"name": "x"}


def _user(session: Session) -> User:
    return repo.create_user(session, name=f"u-{uuid.uuid4().hex[:8]}")


def _job(session: Session, user: User, **kw: object) -> Job:
    return repo.create_job(session, owner_id=user.id, name="job", spec=SPEC, queue="cpu", **kw)  # type: ignore[arg-type]


def test_repositories_flush_but_never_commit(session_factory: sessionmaker[Session]) -> None:
    with session_factory() as session:
        user = _user(session)
        job = _job(session, user)
        session.rollback()
    with session_factory() as session:
        assert repo.get_job(session, job_id=job.id) is None
        assert repo.get_user(session, user_id=user.id) is None


def test_job_lookup_is_scoped_to_the_owner(db_session: Session) -> None:
    alice, bob = _user(db_session), _user(db_session)
    job = _job(db_session, alice)
    assert repo.get_job(db_session, job_id=job.id, owner_id=alice.id) is job
    assert repo.get_job(db_session, job_id=job.id, owner_id=bob.id) is None


def test_idempotency_key_is_unique_per_owner(db_session: Session) -> None:
    alice, bob = _user(db_session), _user(db_session)
    _job(db_session, alice, idempotency_key="k")
    _job(db_session, bob, idempotency_key="k")
    assert repo.get_job_by_idempotency_key(db_session, owner_id=bob.id, key="k") is not None
    with pytest.raises(IntegrityError):
        _job(db_session, alice, idempotency_key="k")


def test_transition_is_compare_and_set(db_session: Session) -> None:
    job = _job(db_session, _user(db_session))
    assert repo.transition_job(db_session, job_id=job.id, to_status=JobStatus.RUNNING,
                               from_statuses=[JobStatus.QUEUED])
    assert job.status == "running" and job.started_at is not None
    # a second worker that also thinks the job is queued loses
    assert not repo.transition_job(db_session, job_id=job.id, to_status=JobStatus.RUNNING,
                                   from_statuses=[JobStatus.QUEUED])
    assert repo.transition_job(db_session, job_id=job.id, to_status=JobStatus.SUCCEEDED)
    assert job.finished_at is not None
    # terminal statuses are final by default
    assert not repo.transition_job(db_session, job_id=job.id, to_status=JobStatus.RUNNING)
    events = repo.list_status_events(db_session, job_id=job.id)
    assert [e.status for e in events] == ["queued", "running", "succeeded"]


def test_concurrent_transitions_have_one_winner(
    database_url: str, session_factory: sessionmaker[Session]
) -> None:
    with session_factory() as session:
        job_id = _job(session, _user(session)).id
        session.commit()
    wins: list[bool] = []
    barrier = threading.Barrier(4)

    def race() -> None:
        with session_factory() as session:
            barrier.wait()
            won = repo.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING,
                                      from_statuses=[JobStatus.QUEUED])
            session.commit()
            wins.append(won)

    threads = [threading.Thread(target=race) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False, False, False, True]


def test_list_jobs_pages_and_filters(db_session: Session) -> None:
    user = _user(db_session)
    jobs = [_job(db_session, user) for _ in range(5)]
    repo.transition_job(db_session, job_id=jobs[0].id, to_status=JobStatus.CANCELLED)
    newest_first = repo.list_jobs(db_session, owner_id=user.id, limit=10)
    assert len(newest_first) == 5
    page = repo.list_jobs(db_session, owner_id=user.id, limit=2)
    rest = repo.list_jobs(db_session, owner_id=user.id, limit=10,
                          before=(page[-1].created_at, page[-1].id))
    assert [j.id for j in page + rest] == [j.id for j in newest_first]
    cancelled = repo.list_jobs(db_session, owner_id=user.id, limit=10, statuses=["cancelled"])
    assert [j.id for j in cancelled] == [jobs[0].id]


def test_progress_merges_latest_metrics(db_session: Session) -> None:
    job = _job(db_session, _user(db_session))
    repo.update_job_progress(db_session, job_id=job.id, epoch=1, step=10,
                             latest_metrics={"train_loss": 1.0, "train_accuracy": 0.5})
    repo.update_job_progress(db_session, job_id=job.id, epoch=1, step=20, current_lr=0.1,
                             latest_metrics={"train_loss": 0.5})
    assert (job.step, job.current_lr) == (20, 0.1)
    assert job.latest_metrics == {"train_loss": 0.5, "train_accuracy": 0.5}
    assert repo.increment_attempts(db_session, job_id=job.id) == 1


def test_metric_points_are_idempotent(db_session: Session) -> None:
    job = _job(db_session, _user(db_session))
    points = [repo.MetricPointIn(step=s, epoch=0, name=n, value=s * 0.1)
              for s in (1, 2) for n in ("train_loss", "lr")]
    repo.add_metric_points(db_session, job_id=job.id, points=points)
    repo.add_metric_points(db_session, job_id=job.id, points=points[:2])
    stored = repo.list_metric_points(db_session, job_id=job.id)
    assert len(stored) == 4
    assert stored[0].time.tzinfo is not None
    only_lr = repo.list_metric_points(db_session, job_id=job.id, names=["lr"], after_step=1)
    assert [(p.step, p.name) for p in only_lr] == [(2, "lr")]


def test_lr_changes_confirm_once(db_session: Session) -> None:
    user = _user(db_session)
    job = _job(db_session, user)
    change = repo.create_lr_change(db_session, job_id=job.id, requested_lr=0.1,
                                   mode=LRChangeMode.OVERRIDE, requested_by=user.id)
    assert change.status == "pending"
    assert repo.mark_lr_change_applied(db_session, change_id=change.id, applied_step=7,
                                       applied_lr=0.1)
    assert not repo.mark_lr_change_applied(db_session, change_id=change.id, applied_step=9)
    db_session.refresh(change)
    assert (change.status, change.applied_step) == ("applied", 7)
    other = repo.create_lr_change(db_session, job_id=job.id, requested_lr=0.2,
                                  mode=LRChangeMode.SCALE, requested_by=user.id)
    assert repo.mark_lr_change_rejected(db_session, change_id=other.id, reason="finished")
    since = utcnow() - timedelta(minutes=1)
    assert len(repo.lr_change_times_since(db_session, job_id=job.id, since=since)) == 2
    assert [c.id for c in repo.list_lr_changes(db_session, job_id=job.id)] == [
        change.id, other.id
    ]


def test_checkpoints_latest_and_pruning(db_session: Session) -> None:
    job = _job(db_session, _user(db_session))
    files = {"params.npz": {"sha256": "a", "size": 10}, "meta.json": {"sha256": "b", "size": 2}}
    for step in (200, 400, 600):
        repo.add_checkpoint(db_session, job_id=job.id, step=step, epoch=step // 200,
                            key_prefix=f"jobs/{job.id}/checkpoints/{step:010d}/", files=files)
    again = repo.add_checkpoint(db_session, job_id=job.id, step=600, epoch=3,
                                key_prefix="p/", files=files)
    assert again.size == 12
    latest = repo.latest_checkpoint(db_session, job_id=job.id)
    assert latest is not None and latest.step == 600
    repo.delete_checkpoints(db_session, job_id=job.id, steps=[200])
    assert [c.step for c in repo.list_checkpoints(db_session, job_id=job.id)] == [400, 600]


def test_deleting_a_user_cascades(db_session: Session) -> None:
    user = _user(db_session)
    job_id = _job(db_session, user).id
    db_session.delete(user)
    db_session.flush()
    db_session.expire_all()
    assert repo.get_job(db_session, job_id=job_id) is None


def test_tokens_are_stored_hashed(
    session_factory: sessionmaker[Session], db_session: Session
) -> None:
    user, token = create_user_and_token(db_session, name=f"t-{uuid.uuid4().hex[:6]}",
                                        secret="k1")
    db_session.flush()
    assert token.startswith("rdr_")
    from sqlalchemy import select

    from core.models import ApiToken
    stored = db_session.scalars(select(ApiToken).where(ApiToken.user_id == user.id)).one()
    assert token not in stored.token_hash and stored.prefix == token[:10]
    assert authenticate(db_session, token=token, secret="k1") is user
    assert authenticate(db_session, token=token, secret="other-secret") is None
    assert authenticate(db_session, token="rdr_wrong", secret="k1") is None
    assert revoke_token(db_session, token=token, secret="k1")
    assert authenticate(db_session, token=token, secret="k1") is None
    db_session.rollback()  # SQLite has one writer: let issue_token's session write
    # issue_token commits, and reuses the user of that name
    name = f"cli-{uuid.uuid4().hex[:6]}"
    first_id, first = issue_token(name, factory=session_factory, secret="k1")
    second_id, second = issue_token(name, factory=session_factory, secret="k1")
    assert first_id == second_id and first != second
