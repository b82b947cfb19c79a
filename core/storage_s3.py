"""An S3-compatible bucket as the object store (AWS, MinIO, moto): core.storage's
``ObjectStore`` over boto3."""

from __future__ import annotations

import base64
import hashlib
import os
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

from core.multipart import (
    PartCorrupt,
    PartWriter,
    SpooledPartWriter,
    StoredFileCorrupt,
    StoredPart,
    composite_sha256,
)
from core.storage import (
    CHUNK_SIZE,
    MULTIPART_DIR,
    STAGED_NAME,
    InvalidKey,
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    _check_key,
    check_part,
    staged_name,
)


def _base64(sha256_hex: str) -> str:
    return base64.b64encode(bytes.fromhex(sha256_hex)).decode()


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

    def put_stream(self, key: str, handle: BinaryIO) -> None:
        self.client.upload_fileobj(handle, self.bucket, self._key(key))

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

    def list_all(self, prefix: str = "") -> list[ObjectInfo]:
        """Every key under ``prefix``, staged parts included."""
        paginator = self.client.get_paginator("list_objects_v2")
        found = []
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            for item in page.get("Contents", []):
                found.append(ObjectInfo(key=item["Key"][len(self.prefix):], size=item["Size"]))
        return found

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        return [item for item in self.list_all(prefix)
                if not item.key.startswith(MULTIPART_DIR + "/")]

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

    # Staged parts are objects under .multipart/<token>/ (store.list hides them); the
    # object is assembled on completion by a server-side copy of each recorded part into
    # a fresh S3 multipart upload, so a completion that failed can simply be retried.
    def _staged_key(self, token: str, stored_as: str) -> str:
        if not token.isalnum() or not STAGED_NAME.match(stored_as):
            raise InvalidKey(f"invalid staged part {token}/{stored_as}")
        return f"{self.prefix}{MULTIPART_DIR}/{token}/{stored_as}"

    def start_multipart(self, key: str) -> str:
        _check_key(key)
        return uuid.uuid4().hex

    def stage_part(self, key: str, token: str, number: int) -> PartWriter:
        stored_as = staged_name(number)
        staged = self._staged_key(token, stored_as)

        def upload(path: str, sha256: str) -> None:
            # S3 checks the body against the checksum on receipt and keeps it.
            with open(path, "rb") as body:
                self.client.put_object(Bucket=self.bucket, Key=staged, Body=body,
                                       ChecksumAlgorithm="SHA256",
                                       ChecksumSHA256=_base64(sha256))

        def drop() -> None:
            self.client.delete_object(Bucket=self.bucket, Key=staged)

        return SpooledPartWriter(stored_as, upload, drop)

    def drop_staged(self, key: str, token: str, stored_as: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._staged_key(token, stored_as))

    def _check_staged(self, token: str, part: StoredPart) -> str:
        staged = self._staged_key(token, part.stored_as)
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=staged,
                                           ChecksumMode="ENABLED")
        except self.client.exceptions.ClientError as exc:
            if self._is_missing(exc):
                raise PartCorrupt(part.number, "is missing from the store") from exc
            raise
        stored = head.get("ChecksumSHA256")
        if stored:
            sha256 = base64.b64decode(stored).hex()
        else:  # a store that keeps no checksums (or an object replaced without one): read it
            digest = hashlib.sha256()
            for chunk in self.stream(staged[len(self.prefix):]):
                digest.update(chunk)
            sha256 = digest.hexdigest()
        check_part(part, int(head["ContentLength"]), sha256)
        return staged

    def complete_multipart(self, key: str, token: str, parts: Sequence[StoredPart]) -> str | None:
        target = self._key(key)
        sources = [self._check_staged(token, part) for part in parts]
        upload = self.client.create_multipart_upload(Bucket=self.bucket, Key=target,
                                                      ChecksumAlgorithm="SHA256")
        upload_id = upload["UploadId"]
        try:
            entries = []
            for index, (part, source) in enumerate(zip(parts, sources, strict=True), start=1):
                copied = self.client.upload_part_copy(
                    Bucket=self.bucket, Key=target, UploadId=upload_id, PartNumber=index,
                    CopySource={"Bucket": self.bucket, "Key": source},
                )["CopyPartResult"]
                entry = {"PartNumber": index, "ETag": copied["ETag"]}
                if copied.get("ChecksumSHA256"):
                    check_part(part, part.size, base64.b64decode(copied["ChecksumSHA256"]).hex())
                    entry["ChecksumSHA256"] = copied["ChecksumSHA256"]
                entries.append(entry)
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=target, UploadId=upload_id,
                MultipartUpload={"Parts": entries},
            )
        except BaseException:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=target,
                                               UploadId=upload_id)
            raise
        self._check_whole(target, parts)
        self.abort_multipart(key, token)  # the staged parts are copied: drop them
        return None

    def _check_whole(self, target: str, parts: Sequence[StoredPart]) -> None:
        """The assembled object against the recorded parts, by S3's composite checksum
        (where the store keeps one); the whole file's own sha256 is the validator's."""
        head = self.client.head_object(Bucket=self.bucket, Key=target, ChecksumMode="ENABLED")
        stored = str(head.get("ChecksumSHA256") or "").split("-")[0]
        expected = composite_sha256([part.sha256 for part in parts])
        if stored and stored != expected:
            self.client.delete_object(Bucket=self.bucket, Key=target)
            raise StoredFileCorrupt(f"{target}: S3's checksum {stored} is not the {expected} "
                                    "its recorded parts make")

    def abort_multipart(self, key: str, token: str) -> None:
        if not token.isalnum():
            raise InvalidKey(f"invalid multipart token {token!r}")
        for item in self.list_all(f"{MULTIPART_DIR}/{token}/"):
            self.client.delete_object(Bucket=self.bucket, Key=self.prefix + item.key)
