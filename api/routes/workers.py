from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import ChannelDep, CurrentUser, SessionDep
from api.schemas.workers import WorkersHistoryPublic, WorkersPublic
from api.services import workers as service

router = APIRouter(prefix="/v1/workers", tags=["workers"])


@router.get("")
def list_workers(channel: ChannelDep, session: SessionDep, user: CurrentUser) -> WorkersPublic:
    """Workers that sent a heartbeat in the last 20 s (queues served, current job, CPU,
    memory, GPU memory when they use one) and how many tasks wait in each queue.

    Another user's job shows only as ``busy``, without its id.
    """
    return service.describe(channel, session, user=user)


@router.get("/history")
def workers_history(
    channel: ChannelDep, session: SessionDep, user: CurrentUser,
    minutes: Annotated[int, Query(ge=1, le=60)] = 60,
) -> WorkersHistoryPublic:
    """Each worker's CPU, memory and pace (steps/s of the job it ran) per heartbeat over
    the last ``minutes`` (an hour at most: what the channel keeps), oldest first."""
    return service.history(channel, session, minutes=minutes)
