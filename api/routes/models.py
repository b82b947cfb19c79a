from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Response, UploadFile, status
from fastapi.concurrency import run_in_threadpool

from api.deps import CurrentUser, SessionDep, StateDep
from api.schemas.models import ModelPublic, ModelsPublic
from api.services import models as service
from core.jobspec import PRINTABLE

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.post("", status_code=status.HTTP_201_CREATED)
async def upload_model(
    symbol: Annotated[UploadFile, File(description="MXNet symbol JSON (net-symbol.json)")],
    input_shape: Annotated[str, Form(max_length=128,
                                     description="the input's shape, batch first: 1,3,32,32")],
    session: SessionDep,
    state: StateDep,
    user: CurrentUser,
    params: Annotated[UploadFile | None, File(
        description="MXNet params (net-0000.params), the initial weights")] = None,
    input_name: Annotated[str, Form(max_length=128)] = "data",
    name: Annotated[str | None, Form(max_length=255, pattern=PRINTABLE)] = None,
) -> ModelPublic:
    """Upload an MXNet model: validated (parse, known ops, shapes for ``input_shape``,
    params names and shapes) before anything is stored; 4xx naming the problem if not."""
    limits = state.settings.limits
    upload = service.ModelUpload(
        # a file name is the client's text: printable, and no longer than the column
        name=name or "".join(c for c in symbol.filename or "" if c.isprintable())[:255]
        or "model",
        symbol=await symbol.read(limits.max_symbol_bytes + 1),
        params=await params.read(limits.max_upload_bytes + 1) if params is not None else None,
        input_shape=input_shape,
        input_name=input_name,
    )
    model = await run_in_threadpool(
        service.store_model, session, state=state, owner=user, upload=upload
    )
    return ModelPublic.model_validate(model)


@router.get("")
def list_models(session: SessionDep, user: CurrentUser) -> ModelsPublic:
    rows = service.list_owned_models(session, owner=user)
    return ModelsPublic(data=[ModelPublic.model_validate(r) for r in rows])


@router.get("/{model_id}")
def get_model(model_id: str, session: SessionDep, user: CurrentUser) -> ModelPublic:
    """One model: its ops, parameter count, input and output shapes."""
    return ModelPublic.model_validate(
        service.get_owned_model(session, owner=user, model_id=model_id)
    )


@router.delete("/{model_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_model(model_id: str, session: SessionDep, state: StateDep,
                 user: CurrentUser) -> Response:
    """Delete a model and its files; 409 while a queued, running or paused job uses it."""
    service.delete_model(session, state=state, owner=user, model_id=model_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
