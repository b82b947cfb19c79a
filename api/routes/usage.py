from __future__ import annotations

from fastapi import APIRouter

from api.deps import CurrentUser, SessionDep, StateDep
from api.schemas.usage import UsagePublic
from api.services import quota

router = APIRouter(prefix="/v1/usage", tags=["usage"])


@router.get("")
def get_usage(session: SessionDep, state: StateDep, user: CurrentUser) -> UsagePublic:
    """Your stored bytes by kind against your quota. Data sets (and chunked uploads in
    progress, by their declared size) and models count; checkpoints and exports, which
    the service writes for your jobs, are shown but not counted."""
    return quota.usage(session, state=state, owner=user)
