"""Object storage chosen by URL: ``file://path`` (local directory) or ``s3://bucket/prefix``.

Keys are ``/``-separated relative paths. The checkpoint and dataset key layouts live here
so the api and the workers agree on them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal
from urllib.parse import urlparse

from core.multipart import LocalPartWriter, PartCorrupt, PartWriter, StoredPart

CHUNK_SIZE = 1024 * 1024
# Staged parts of multipart uploads live under this prefix (in both stores); never listed
# as objects.
MULTIPART_DIR = ".multipart"
STAGED_NAME = re.compile(r"^[0-9]{5}-[0-9a-f]{32}$")


def staged_name(number: int) -> str:
    """A fresh name for one send of part ``number``: two sends never share an object."""
    return f"{number:05d}-{uuid.uuid4().hex}"


def check_part(part: StoredPart, size: int, sha256: str) -> None:
    """Refuse a staged part whose bytes are not the ones recorded for it."""
    if size != part.size or sha256 != part.sha256:
        raise PartCorrupt(part.number, f"holds {size} bytes with sha256 {sha256}, not the "
                                       f"{part.size} bytes with sha256 {part.sha256} it was "
                                       "sent with")

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
    def put_stream(self, key: str, handle: BinaryIO) -> None:
        """Store what ``handle`` holds from its current position on, read in chunks."""

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

    # ---- multipart uploads (core.multipart): each send of a part is staged privately as
    # it arrives (in any order, possibly again); the database records which staged part is
    # part n; completion writes the object from the recorded parts after checking each.
    # S3 requires every part but the last to be >= 5 MiB.
    min_part_size: int = 5 * 1024 * 1024

    @abstractmethod
    def start_multipart(self, key: str) -> str:
        """A new upload to ``key``; returns its token (a hex string)."""

    @abstractmethod
    def stage_part(self, key: str, token: str, number: int) -> PartWriter:
        """A writer for one send of part ``number`` (1-based) into a staged object of its
        own; ObjectNotFound when the upload is gone (completed or aborted)."""

    @abstractmethod
    def drop_staged(self, key: str, token: str, stored_as: str) -> None:
        """Delete one staged part (replaced by a later send, or never recorded)."""

    @abstractmethod
    def complete_multipart(self, key: str, token: str, parts: Sequence[StoredPart]) -> str | None:
        """Write ``key`` from the recorded ``parts`` in order, each checked against its
        size and sha256 (PartCorrupt names the first that fails; the staging stays, so
        the part can be sent again), then drop the staging. Returns the object's sha256
        where writing it computed it (the local store), else None."""

    @abstractmethod
    def abort_multipart(self, key: str, token: str) -> None:
        """Drop everything staged for an upload; aborting one that is gone is fine."""

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
        with open(path, "rb") as source:
            self.put_stream(key, source)

    def put_stream(self, key: str, handle: BinaryIO) -> None:
        def copy(target: Any) -> None:
            while chunk := handle.read(CHUNK_SIZE):
                target.write(chunk)

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

    # Staged parts live in .multipart/<token>/ inside the root (never listed as objects);
    # completion writes the object by copying them in order (the disk holds the upload
    # twice until the staging is dropped).
    min_part_size = 1

    def _parts_dir(self, token: str) -> Path:
        if not token.isalnum():
            raise InvalidKey(f"invalid multipart token {token!r}")
        return self.root / MULTIPART_DIR / token

    def _staged(self, token: str, stored_as: str) -> Path:
        if not STAGED_NAME.match(stored_as):
            raise InvalidKey(f"invalid staged part name {stored_as!r}")
        return self._parts_dir(token) / stored_as

    def start_multipart(self, key: str) -> str:
        _check_key(key)
        token = uuid.uuid4().hex
        self._parts_dir(token).mkdir(parents=True)
        return token

    def stage_part(self, key: str, token: str, number: int) -> PartWriter:
        stored_as = staged_name(number)
        try:
            return LocalPartWriter(self._staged(token, stored_as), stored_as)
        except FileNotFoundError as exc:
            raise ObjectNotFound(f"multipart upload {token} of {key}") from exc

    def drop_staged(self, key: str, token: str, stored_as: str) -> None:
        self._staged(token, stored_as).unlink(missing_ok=True)

    def complete_multipart(self, key: str, token: str, parts: Sequence[StoredPart]) -> str | None:
        whole = hashlib.sha256()

        def assemble(handle: Any) -> None:
            for part in parts:
                try:
                    source = open(self._staged(token, part.stored_as), "rb")  # noqa: SIM115
                except FileNotFoundError:
                    raise PartCorrupt(part.number, "is missing from the store") from None
                digest, size = hashlib.sha256(), 0
                with source:
                    while chunk := source.read(CHUNK_SIZE):
                        digest.update(chunk)
                        whole.update(chunk)
                        handle.write(chunk)
                        size += len(chunk)
                check_part(part, size, digest.hexdigest())

        self._write_atomically(key, assemble)
        shutil.rmtree(self._parts_dir(token), ignore_errors=True)
        return whole.hexdigest()

    def abort_multipart(self, key: str, token: str) -> None:
        shutil.rmtree(self._parts_dir(token), ignore_errors=True)

    def check(self) -> None:
        if not os.access(self.root, os.W_OK):
            raise PermissionError(f"object store {self.root} is not writable")


def open_store(
    url: str, *, endpoint_url: str | None = None, region: str = "us-east-1"
) -> ObjectStore:
    """``file://./relative``, ``file:///absolute`` or ``s3://bucket/prefix``."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        # file://./x keeps "." in netloc; join netloc and path so both forms work.
        return LocalStore((parsed.netloc + parsed.path) or ".")
    if parsed.scheme == "s3":
        from core.storage_s3 import S3Store

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
