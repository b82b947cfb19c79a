"""Object storage chosen by URL: ``file://path`` (local directory) or ``s3://bucket/prefix``.

Keys are ``/``-separated relative paths. The checkpoint and dataset key layouts live here
so the api and the workers agree on them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlparse

from core.multipart import InPlacePartWriter, Parts, PartWriter, SpooledPartWriter

CHUNK_SIZE = 1024 * 1024
# The local store keeps multipart parts here, under its root; never listed as objects.
MULTIPART_DIR = ".multipart"

# ---- the checkpoint layout (design.md), the one definition api and workers share
PARAMS_FILE: Final = "params.npz"
TRAINER_FILE: Final = "trainer.npz"
META_FILE: Final = "meta.json"  # written last: a checkpoint is complete once it exists
CheckpointFileName = Literal["params.npz", "trainer.npz", "meta.json"]
CHECKPOINT_FILES: tuple[CheckpointFileName, ...] = (PARAMS_FILE, TRAINER_FILE, META_FILE)


def job_objects_prefix(job_id: str) -> str:
    """Everything object storage holds for one job (deleted with the job)."""
    return f"jobs/{job_id}/"


def checkpoints_prefix(job_id: str) -> str:
    return f"{job_objects_prefix(job_id)}checkpoints/"


def checkpoint_prefix(job_id: str, step: int) -> str:
    """``jobs/{job_id}/checkpoints/{step:010d}/`` (design.md's layout)."""
    return f"{checkpoints_prefix(job_id)}{step:010d}/"


def checkpoint_file_key(job_id: str, step: int, name: CheckpointFileName) -> str:
    return checkpoint_prefix(job_id, step) + name


def dataset_prefix(dataset_id: str) -> str:
    """Every object of one data set (deleted with it)."""
    return f"datasets/{dataset_id}/"


def dataset_key(dataset_id: str, fmt: str) -> str:
    return f"{dataset_prefix(dataset_id)}data.{fmt}"


# An uploaded model's files, named as MXNet's ``export`` names them (``<prefix>-symbol.json``,
# ``<prefix>-0000.params``) so a download is usable as is.
MODEL_SYMBOL_FILE = "model-symbol.json"
MODEL_PARAMS_FILE = "model-0000.params"
# {"input_name": "data", "input_shape": [1, 3, 32, 32]}: what the upload declared
MODEL_META_FILE = "model.json"


def model_prefix(model_id: str) -> str:
    return f"models/{model_id}/"


def job_export_prefix(job_id: str) -> str:
    """Where a finished job's network is written in MXNet's format (symbol + params)."""
    return job_objects_prefix(job_id) + "export/"


class ObjectNotFound(KeyError):
    """The key does not exist in the store."""


class InvalidKey(ValueError):
    """The key would escape the store (absolute, ``..``) or is empty."""


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int


def _check_key(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("..", ".") for p in parts) or "\\" in key:
        raise InvalidKey(f"invalid object key {key!r}")
    return key


class ObjectStore(ABC):
    """What the service needs from a blob store."""

    url: str

    @abstractmethod
    def put(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def put_file(self, key: str, path: str | os.PathLike[str]) -> None: ...

    @abstractmethod
    def get(self, key: str) -> bytes: ...

    @abstractmethod
    def stream(self, key: str, *, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
        """Yield the object in chunks; raises ObjectNotFound before the first chunk."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def size(self, key: str) -> int: ...

    @abstractmethod
    def list(self, prefix: str = "") -> list[ObjectInfo]: ...

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete one object; deleting a missing key is not an error."""

    # ---- multipart writes: each part is written through a PartWriter as it arrives (in
    # any order, possibly again) and the parts become one object on completion. ``token``
    # names one multipart upload. S3 requires every part but the last to be >= 5 MiB.
    min_part_size: int = 5 * 1024 * 1024

    @abstractmethod
    def start_multipart(self, key: str) -> str: ...

    @abstractmethod
    def part_writer(self, key: str, token: str, number: int, offset: int) -> PartWriter:
        """A writer for part ``number`` (1-based), which starts at byte ``offset``."""

    @abstractmethod
    def complete_multipart(self, key: str, token: str, parts: Parts) -> None:
        """Join ``(number, etag)`` parts, in order, into the object ``key``."""

    @abstractmethod
    def abort_multipart(self, key: str, token: str) -> None:
        """Drop the parts of an upload; aborting one that is gone is not an error."""

    def delete_prefix(self, prefix: str) -> int:
        items = self.list(prefix)
        for item in items:
            self.delete(item.key)
        return len(items)

    def check(self) -> None:
        """Raise if the store cannot be reached (used by /readyz)."""
        self.list("__readyz__/")

    @abstractmethod
    def sweep_debris(self, prefix: str) -> int:
        """Remove what interrupted writes left under ``prefix`` and is no object: a
        directory store's ``.tmp-*.part`` files and empty directories, an S3 bucket's
        unfinished multipart uploads. Returns how many were removed. Only for a prefix no
        live writer is using (a job's checkpoints, swept by the worker holding its lease).
        """


class LocalStore(ObjectStore):
    """A directory; writes go to a temp file in the same directory and are renamed into
    place, so a reader never sees half an object even if the writer dies."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.url = f"file://{self.root}"

    def _path(self, key: str) -> Path:
        return self.root / _check_key(key)

    def _write_atomically(self, key: str, write: Any) -> None:
        target = self._path(key)
        for _ in range(3):  # a delete may remove the (then empty) folder in between
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".part")
                break
            except FileNotFoundError:
                continue
        else:
            raise FileNotFoundError(f"cannot create a file under {target.parent}")
        try:
            with os.fdopen(fd, "wb") as handle:
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put(self, key: str, data: bytes) -> None:
        self._write_atomically(key, lambda handle: handle.write(data))

    def put_file(self, key: str, path: str | os.PathLike[str]) -> None:
        def copy(handle: Any) -> None:
            with open(path, "rb") as source:
                while chunk := source.read(CHUNK_SIZE):
                    handle.write(chunk)

        self._write_atomically(key, copy)

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError) as exc:
            raise ObjectNotFound(key) from exc

    def stream(self, key: str, *, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
        try:
            handle = open(self._path(key), "rb")  # closed by _chunks
        except (FileNotFoundError, IsADirectoryError) as exc:
            raise ObjectNotFound(key) from exc
        return self._chunks(handle, chunk_size)

    @staticmethod
    def _chunks(handle: Any, chunk_size: int) -> Iterator[bytes]:
        with handle:
            while chunk := handle.read(chunk_size):
                yield chunk

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def size(self, key: str) -> int:
        try:
            return self._path(key).stat().st_size
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        # Walk only the deepest directory the prefix names, not the whole store.
        directory = self.root
        if "/" in prefix:
            directory = self.root / _check_key(prefix.rsplit("/", 1)[0])
        if not directory.is_dir():
            return []
        found = []
        for path in directory.rglob("*"):
            if not path.is_file() or path.name.startswith(".tmp-"):
                continue
            key = path.relative_to(self.root).as_posix()
            if key.startswith(MULTIPART_DIR + "/"):
                continue
            if key.startswith(prefix):
                found.append(ObjectInfo(key=key, size=path.stat().st_size))
        return sorted(found, key=lambda item: item.key)

    def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        self._remove_empty_parents(path.parent)

    def _remove_empty_parents(self, directory: Path) -> None:
        """A key's directories exist only while they hold objects: pruning a checkpoint
        must not leave its empty step folder behind."""
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:  # not empty (or gone, or a writer just used it): stop here
                return
            directory = directory.parent

    def sweep_debris(self, prefix: str) -> int:
        top = self.root / _check_key(prefix.rstrip("/")) if prefix.strip("/") else self.root
        if not top.is_dir():
            return 0
        removed = 0
        # Deepest first, so a folder emptied by removing its debris goes too.
        for path in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if path.is_file() and path.name.startswith(".tmp-") and path.name.endswith(".part"):
                path.unlink(missing_ok=True)
                removed += 1
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
                removed += 1
        if top != self.root and not any(top.iterdir()):
            self._remove_empty_parents(top)
        return removed

    # An upload is assembled in place: every part is written at its offset into
    # .multipart/<token>/data (inside the root, so completing is a rename, not a copy of
    # gigabytes, and the disk never holds the data twice).
    min_part_size = 1

    def _parts_dir(self, token: str) -> Path:
        if not token.isalnum():
            raise InvalidKey(f"invalid multipart token {token!r}")
        return self.root / MULTIPART_DIR / token

    def start_multipart(self, key: str) -> str:
        _check_key(key)
        token = uuid.uuid4().hex
        directory = self._parts_dir(token)
        directory.mkdir(parents=True)
        (directory / "data").touch()
        return token

    def part_writer(self, key: str, token: str, number: int, offset: int) -> PartWriter:
        target = self._parts_dir(token) / "data"
        if not target.is_file():
            raise ObjectNotFound(f"multipart upload {token} of {key}")
        return InPlacePartWriter(target, offset, etag=f"{token}-{number}")

    def complete_multipart(self, key: str, token: str, parts: Parts) -> None:
        directory = self._parts_dir(token)
        data = directory / "data"
        with open(data, "rb+") as handle:
            os.fsync(handle.fileno())
        final = self._path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(data, final)
        shutil.rmtree(directory, ignore_errors=True)

    def abort_multipart(self, key: str, token: str) -> None:
        shutil.rmtree(self._parts_dir(token), ignore_errors=True)

    def check(self) -> None:
        if not os.access(self.root, os.W_OK):
            raise PermissionError(f"object store {self.root} is not writable")


class S3Store(ObjectStore):
    """An S3-compatible bucket (AWS, MinIO, moto) under an optional key prefix."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        client: Any = None,
    ):
        import boto3  # the api image may run without S3; import only when used

        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client = client or boto3.client("s3", endpoint_url=endpoint_url, region_name=region)
        self.url = f"s3://{bucket}/{self.prefix}"

    def _key(self, key: str) -> str:
        return self.prefix + _check_key(key)

    def _is_missing(self, exc: Exception) -> bool:
        error = getattr(exc, "response", {}).get("Error", {})
        return str(error.get("Code")) in ("404", "NoSuchKey", "NotFound")

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def put_file(self, key: str, path: str | os.PathLike[str]) -> None:
        self.client.upload_file(os.fspath(path), self.bucket, self._key(key))

    def _get_body(self, key: str) -> Any:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        except self.client.exceptions.ClientError as exc:
            if self._is_missing(exc):
                raise ObjectNotFound(key) from exc
            raise

    def get(self, key: str) -> bytes:
        body = self._get_body(key)
        with body:
            return bytes(body.read())

    def stream(self, key: str, *, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
        body = self._get_body(key)

        def chunks() -> Iterator[bytes]:
            with body:
                yield from body.iter_chunks(chunk_size)

        return chunks()

    def size(self, key: str) -> int:
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except self.client.exceptions.ClientError as exc:
            if self._is_missing(exc):
                raise ObjectNotFound(key) from exc
            raise
        return int(head["ContentLength"])

    def exists(self, key: str) -> bool:
        try:
            self.size(key)
        except ObjectNotFound:
            return False
        return True

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        paginator = self.client.get_paginator("list_objects_v2")
        found = []
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            for item in page.get("Contents", []):
                found.append(ObjectInfo(key=item["Key"][len(self.prefix):], size=item["Size"]))
        return found

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def sweep_debris(self, prefix: str) -> int:
        # A killed put_object leaves nothing; a killed multipart upload (upload_file of a
        # large file) leaves parts that are billed and invisible to listings until aborted.
        paginator = self.client.get_paginator("list_multipart_uploads")
        removed = 0
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            for upload in page.get("Uploads", []):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"],
                                                   UploadId=upload["UploadId"])
                removed += 1
        return removed

    def check(self) -> None:
        self.client.head_bucket(Bucket=self.bucket)

    def start_multipart(self, key: str) -> str:
        answer = self.client.create_multipart_upload(Bucket=self.bucket, Key=self._key(key))
        return str(answer["UploadId"])

    def part_writer(self, key: str, token: str, number: int, offset: int) -> PartWriter:
        def upload(path: str) -> str:
            with open(path, "rb") as body:
                answer = self.client.upload_part(
                    Bucket=self.bucket, Key=self._key(key), UploadId=token,
                    PartNumber=number, Body=body,
                )
            return str(answer["ETag"])

        return SpooledPartWriter(upload)

    def complete_multipart(self, key: str, token: str, parts: Parts) -> None:
        self.client.complete_multipart_upload(
            Bucket=self.bucket, Key=self._key(key), UploadId=token,
            MultipartUpload={
                "Parts": [{"PartNumber": n, "ETag": etag} for n, etag in sorted(parts)]
            },
        )

    def abort_multipart(self, key: str, token: str) -> None:
        try:
            self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=self._key(key), UploadId=token
            )
        except self.client.exceptions.ClientError as exc:
            if "NoSuchUpload" not in str(exc):
                raise


def open_store(
    url: str, *, endpoint_url: str | None = None, region: str = "us-east-1"
) -> ObjectStore:
    """``file://./relative``, ``file:///absolute`` or ``s3://bucket/prefix``."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        # file://./x keeps "." in netloc; join netloc and path so both forms work.
        return LocalStore((parsed.netloc + parsed.path) or ".")
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValueError(f"storage URL {url!r} names no bucket")
        return S3Store(parsed.netloc, parsed.path, endpoint_url=endpoint_url, region=region)
    raise ValueError(f"unsupported storage URL {url!r}; use file:// or s3://")


def store_from_settings() -> ObjectStore:
    from core.config import get_settings

    settings = get_settings()
    return open_store(
        settings.storage_url, endpoint_url=settings.s3_endpoint_url, region=settings.s3_region
    )


def checkpoint_keys_by_step(store: ObjectStore, job_id: str) -> dict[int, list[str]]:
    """One listing of the job's checkpoint keys, grouped by step (complete or not)."""
    base = checkpoints_prefix(job_id)
    grouped: dict[int, list[str]] = {}
    for item in store.list(base):
        head = item.key[len(base):].split("/", 1)[0]
        if head.isdigit():
            grouped.setdefault(int(head), []).append(item.key)
    return grouped


def delete_checkpoint_keys(store: ObjectStore, keys: list[str]) -> None:
    """Delete one checkpoint's keys, meta.json first: a half-deleted checkpoint then
    reads as incomplete, never as complete with a file missing."""
    for key in sorted(keys, key=lambda k: not k.endswith("/" + META_FILE)):
        store.delete(key)
