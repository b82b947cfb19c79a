from __future__ import annotations

from fastapi import APIRouter

from api.deps import ChannelDep, CurrentUser, SessionDep
from api.schemas.workers import WorkersPublic
from api.services import workers as service

router = APIRouter(prefix="/v1/workers", tags=["workers"])


@router.get("")
def list_workers(channel: ChannelDep, session: SessionDep, user: CurrentUser) -> WorkersPublic:
    """Workers that sent a heartbeat in the last 20 s (queues served, current job, CPU,
    memory, GPU memory when they use one) and how many tasks wait in each queue.

    Another user's job shows only as ``busy``, without its id.
    """
    return service.describe(channel, session, user=user)
