from __future__ import annotations

import os
from typing import Annotated

from fastapi import APIRouter, File, Form, Response, UploadFile, status
from fastapi.concurrency import run_in_threadpool

from api.deps import CurrentUser, SessionDep, StateDep
from api.errors import field_error
from api.schemas.datasets import DatasetPublic, DatasetsPublic
from api.services.datasets import delete_dataset as delete_dataset_service
from api.services.datasets import get_owned_dataset, list_owned_datasets, store_upload
from core.jobspec import PRINTABLE

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])


@router.post("", status_code=status.HTTP_201_CREATED)
async def upload_dataset(
    file: Annotated[UploadFile, File(description=".npz (arrays data, label) or .csv")],
    session: SessionDep,
    state: StateDep,
    user: CurrentUser,
    name: Annotated[str | None, Form(max_length=255, pattern=PRINTABLE)] = None,
) -> DatasetPublic:
    """Upload a data set in one request (never unpickled). Up to
    ``limits.inline_validation_bytes`` (4 MiB) it is validated at once and comes back
    ``ready`` (or a 422 naming the problem); a larger file comes back ``validating`` and
    the validation queue makes it ``ready`` or ``invalid`` with a reason. It counts
    against your storage quota (413 ``quota_exceeded``)."""
    filename = file.filename or ""
    if not filename:
        raise field_error("file", "a file name ending in .npz or .csv is required")
    source = file.file  # spooled to disk by the form parser; read in chunks from here on
    source.seek(0, os.SEEK_END)
    size = source.tell()
    source.seek(0)
    dataset = await run_in_threadpool(
        store_upload, session, state=state, owner=user, filename=filename,
        name=name or filename, source=source, size=size,
    )
    return DatasetPublic.model_validate(dataset)


@router.get("")
def list_datasets(session: SessionDep, user: CurrentUser) -> DatasetsPublic:
    rows = list_owned_datasets(session, owner=user)
    return DatasetsPublic(data=[DatasetPublic.model_validate(r) for r in rows])


@router.get("/{dataset_id}")
def get_dataset(dataset_id: str, session: SessionDep, user: CurrentUser) -> DatasetPublic:
    """One data set: its status (``validating``, ``ready``, ``invalid`` with a reason) and
    what validation computed (records, classes, image sizes, per-channel mean/std)."""
    return DatasetPublic.model_validate(
        get_owned_dataset(session, owner=user, dataset_id=dataset_id)
    )


@router.delete("/{dataset_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_dataset(
    dataset_id: str, session: SessionDep, state: StateDep, user: CurrentUser
) -> Response:
    """Delete a data set and its stored file; 409 while a queued, running or paused job
    uses it."""
    delete_dataset_service(session, state=state, owner=user, dataset_id=dataset_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
