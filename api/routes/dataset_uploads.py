"""Resumable chunked uploads: ``POST /v1/datasets/uploads`` → ``PUT …/parts/{n}`` (each
with its sha256) → ``POST …/complete``; ``GET`` says which parts arrived, ``DELETE``
aborts."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from api.deps import CurrentUser, SessionDep, StateDep
from api.errors import ApiError, field_error
from api.schemas.datasets import DatasetPublic, UploadCreate, UploadPartPublic, UploadPublic
from api.services import dataset_uploads as service
from core.multipart import PartWriter

router = APIRouter(prefix="/v1/datasets/uploads", tags=["datasets"])
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
PART_NUMBER_MAX = service.MAX_PARTS


@router.post("", status_code=status.HTTP_201_CREATED)
def create_upload(
    body: UploadCreate, session: SessionDep, state: StateDep, user: CurrentUser
) -> UploadPublic:
    """Start an upload of one file (.npz, .csv, .zip, .tar) or a RecordIO pair (.rec +
    .idx). The answer numbers the parts; send each with ``PUT …/parts/{n}``."""
    return service.create_upload(session, state=state, owner=user, body=body)


@router.get("/{upload_id}")
def get_upload(upload_id: str, session: SessionDep, user: CurrentUser) -> UploadPublic:
    """The upload's state: which parts arrived (with their sha256) and which are missing,
    so an interrupted client resumes where it stopped."""
    return service.get_upload(session, owner=user, upload_id=upload_id)


@router.put("/{upload_id}/parts/{number}")
async def put_part(
    upload_id: str,
    number: int,
    request: Request,
    session: SessionDep,
    state: StateDep,
    user: CurrentUser,
    x_part_sha256: Annotated[
        str, Header(description="hex sha256 of this part's bytes")
    ],
) -> UploadPartPublic:
    """Store part ``number`` (the raw body). Its size must be the one the upload's
    ``files`` imply and its sha256 must match the header. Each send is stored on its own
    and becomes the part only if it arrived whole and the upload is still open; sending a
    part again replaces it (a failed send leaves the earlier one in place)."""
    if not 1 <= number <= PART_NUMBER_MAX:
        raise field_error("number", f"must be between 1 and {PART_NUMBER_MAX}")
    expected_sha = x_part_sha256.strip().lower()
    if not SHA256_HEX.match(expected_sha):
        raise field_error("X-Part-SHA256", "must be 64 hex digits (the part's sha256)")
    target = await run_in_threadpool(
        service.part_target, session, owner=user, upload_id=upload_id, number=number
    )
    writer = await run_in_threadpool(service.open_part, state, target)
    try:
        size, digest = await _receive(request, writer, target.expected_size)
        problem = _verify(number, size, digest, target.expected_size, expected_sha)
        if problem is not None:
            raise problem
        await run_in_threadpool(writer.finish, digest)
    except BaseException:
        writer.discard()
        raise
    return await run_in_threadpool(
        service.record_part, session, state=state, writer=writer, target=target, sha256=digest
    )


def _verify(
    number: int, size: int, digest: str, expected_size: int, expected_sha: str
) -> ApiError | None:
    if size != expected_size:
        return ApiError(
            422, "part_size_mismatch",
            f"part {number} has {size} bytes but must have {expected_size} "
            "(truncated or too long); send it again",
            details={"expected_bytes": expected_size, "received_bytes": size},
        )
    if digest != expected_sha:
        return ApiError(
            422, "checksum_mismatch",
            f"part {number}'s sha256 is {digest}, not the {expected_sha} sent in "
            "X-Part-SHA256; send it again",
            details={"expected": expected_sha, "received": digest},
        )
    return None


async def _receive(request: Request, writer: PartWriter, expected: int) -> tuple[int, str]:
    """Stream the body into ``writer`` (the part's own staged object), hashing as it
    comes; nothing past ``expected`` bytes is written.

    Writes are plain blocking writes on the event loop: they land in the page cache in
    microseconds per chunk, cheaper than a thread hop for each one.
    """
    size, hasher = 0, hashlib.sha256()
    async for chunk in request.stream():
        size += len(chunk)
        if size > expected:
            break
        hasher.update(chunk)
        writer.write(chunk)
    return size, hasher.hexdigest()


@router.post("/{upload_id}/complete", status_code=status.HTTP_202_ACCEPTED)
def complete_upload(
    upload_id: str, session: SessionDep, state: StateDep, user: CurrentUser
) -> DatasetPublic:
    """Join the parts into the data set; 409 naming the missing parts if any. The data
    set starts ``validating``; a worker makes it ``ready`` or ``invalid`` with a reason."""
    dataset = service.complete_upload(session, state=state, owner=user, upload_id=upload_id)
    return DatasetPublic.model_validate(dataset)


@router.delete("/{upload_id}", status_code=status.HTTP_204_NO_CONTENT)
def abort_upload(
    upload_id: str, session: SessionDep, state: StateDep, user: CurrentUser
) -> Response:
    """Abort an open upload and drop the parts received so far."""
    service.abort_upload(session, state=state, owner=user, upload_id=upload_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
