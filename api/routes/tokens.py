from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from api.deps import CurrentUser, SessionDep, StateDep
from api.schemas.tokens import TokensPublic
from api.services import tokens as service

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


@router.get("")
def list_tokens(request: Request, session: SessionDep, user: CurrentUser) -> TokensPublic:
    """The caller's tokens, newest first, revoked and expired ones included; ``current``
    marks the one this request used. Tokens are made with ``rudder token create``."""
    current = getattr(request.state, "token_hash", None)
    return service.list_tokens(session, owner=user, current_hash=current)


@router.delete("/{token_id}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_token(
    token_id: str, session: SessionDep, state: StateDep, user: CurrentUser
) -> Response:
    """Revoke one of the caller's tokens (the current one too). It stops working at once
    on every api process; revoking it again is a no-op."""
    service.revoke(session, state=state, owner=user, token_id=token_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
