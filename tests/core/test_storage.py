from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from core.multipart import PartCorrupt, StoredPart, composite_sha256
from core.storage import (
    InvalidKey,
    LocalStore,
    ObjectNotFound,
    ObjectStore,
    checkpoint_prefix,
    open_store,
)
from core.storage_s3 import S3Store


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "file":
        return open_store(f"file://{tmp_path / 'objects'}")
    url = request.getfixturevalue("s3_storage_url")
    return open_store(url, endpoint_url=request.getfixturevalue("s3_endpoint"))


def test_put_get_list_delete(store: ObjectStore, tmp_path: Path) -> None:
    store.put("jobs/a/1.bin", b"one")
    source = tmp_path / "two.bin"
    source.write_bytes(b"two" * 1000)
    store.put_file("jobs/a/2.bin", source)
    store.put("jobs/b/3.bin", b"")
    assert store.get("jobs/a/1.bin") == b"one"
    assert b"".join(store.stream("jobs/a/2.bin", chunk_size=7)) == b"two" * 1000
    assert store.size("jobs/a/2.bin") == 3000
    assert [(o.key, o.size) for o in store.list("jobs/a/")] == [
        ("jobs/a/1.bin", 3), ("jobs/a/2.bin", 3000)
    ]
    assert store.exists("jobs/b/3.bin") and not store.exists("jobs/b/4.bin")
    store.delete("jobs/a/1.bin")
    store.delete("jobs/a/1.bin")  # deleting twice is fine
    assert store.delete_prefix("jobs/") == 2
    assert store.list("jobs/") == []
    store.check()


def test_list_sees_only_its_prefix(store: ObjectStore) -> None:
    store.put("jobs/a/checkpoints/1/x", b"1")
    store.put("jobs/ab/y", b"2")
    store.put("jobsfile", b"3")
    assert [o.key for o in store.list("jobs/a")] == ["jobs/a/checkpoints/1/x", "jobs/ab/y"]
    assert [o.key for o in store.list("jobs/a/")] == ["jobs/a/checkpoints/1/x"]
    assert [o.key for o in store.list("jobs")] == [
        "jobs/a/checkpoints/1/x", "jobs/ab/y", "jobsfile"]
    assert store.list("jobs/none/") == []
    assert store.list("nothing/here/") == []


def test_missing_and_invalid_keys(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFound):
        store.get("nope")
    with pytest.raises(ObjectNotFound):
        store.stream("nope")
    with pytest.raises(ObjectNotFound):
        store.size("nope")
    for key in ("../escape", "/abs", "a/../../b", ""):
        with pytest.raises(InvalidKey):
            store.put(key, b"x")


def test_overwrite_replaces_the_whole_object(store: ObjectStore) -> None:
    store.put("k", b"long original content")
    store.put("k", b"short")
    assert store.get("k") == b"short"


def test_local_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    for i in range(5):
        store.put("ckpt/params.npz", bytes([i]) * 100)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["params.npz"]


def test_failed_local_write_keeps_the_old_object(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("k", b"good")
    missing = tmp_path / "does-not-exist"
    with pytest.raises(FileNotFoundError):
        store.put_file("k", missing)
    assert store.get("k") == b"good"
    assert [p.name for p in tmp_path.iterdir()] == ["k"]


def test_urls_choose_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_store("file://./.rudder/objects")
    assert isinstance(relative, LocalStore)
    assert relative.root == tmp_path / ".rudder" / "objects"
    assert isinstance(open_store(f"file://{tmp_path}/abs"), LocalStore)
    s3 = open_store("s3://bucket/some/prefix", endpoint_url="http://127.0.0.1:1")
    assert isinstance(s3, S3Store) and s3.prefix == "some/prefix/"
    with pytest.raises(ValueError, match="unsupported"):
        open_store("ftp://x")


def test_s3_prefix_isolates_stores(s3_endpoint: str, s3_storage_url: str) -> None:
    bucket = s3_storage_url.split("/")[2]
    first = open_store(f"s3://{bucket}/one", endpoint_url=s3_endpoint)
    second = open_store(f"s3://{bucket}/two", endpoint_url=s3_endpoint)
    first.put("x", b"1")
    assert second.list() == [] and not second.exists("x")
    assert [o.key for o in first.list()] == ["x"]


def test_checkpoint_layout() -> None:
    assert checkpoint_prefix("j1", 200) == "jobs/j1/checkpoints/0000000200/"


def test_deleting_a_folders_last_object_removes_the_empty_folders(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "objects")
    store.put("jobs/j/checkpoints/0000000010/params.npz", b"p")
    store.put("jobs/j/checkpoints/0000000020/params.npz", b"p")
    store.delete("jobs/j/checkpoints/0000000010/params.npz")
    checkpoints = tmp_path / "objects" / "jobs" / "j" / "checkpoints"
    assert [p.name for p in checkpoints.iterdir()] == ["0000000020"]
    store.delete("jobs/j/checkpoints/0000000020/params.npz")
    assert list((tmp_path / "objects").iterdir()) == []  # the store's root stays
    store.put("jobs/j/checkpoints/0000000030/params.npz", b"again")  # and is usable
    assert store.get("jobs/j/checkpoints/0000000030/params.npz") == b"again"


def test_sweep_removes_a_killed_local_writes_temporary_file(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("jobs/j/checkpoints/0000000010/params.npz", b"kept")
    # What a worker killed inside put() leaves: a temporary file (and its folder).
    for folder in ("0000000010", "0000000020"):
        (tmp_path / "jobs/j/checkpoints" / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / "jobs/j/checkpoints" / folder / ".tmp-x1y2.part").write_bytes(b"half")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / ".tmp-other.part").write_bytes(b"not under the prefix")
    assert store.sweep_debris("jobs/j/checkpoints/") == 3  # two files, one emptied folder
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "elsewhere", "elsewhere/.tmp-other.part", "jobs", "jobs/j", "jobs/j/checkpoints",
        "jobs/j/checkpoints/0000000010", "jobs/j/checkpoints/0000000010/params.npz"]
    assert store.sweep_debris("jobs/none/") == 0


def test_sweep_aborts_an_unfinished_s3_multipart_upload(s3_endpoint: str,
                                                        s3_storage_url: str) -> None:
    store = open_store(s3_storage_url, endpoint_url=s3_endpoint)
    assert isinstance(store, S3Store)
    client, bucket = store.client, store.bucket
    # What a worker killed inside upload_file of a large object leaves behind.
    key = store.prefix + "jobs/j/checkpoints/0000000020/params.npz"
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)
    client.upload_part(Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1,
                       Body=b"x" * 1024)
    other = client.create_multipart_upload(Bucket=bucket, Key=store.prefix + "datasets/d/x")
    assert store.sweep_debris("jobs/j/checkpoints/") == 1
    left = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["UploadId"] for u in left] == [other["UploadId"]]
    assert store.list("jobs/") == []


def _send(store: ObjectStore, key: str, token: str, number: int, data: bytes) -> StoredPart:
    writer = store.stage_part(key, token, number)
    writer.write(data[:100])
    writer.write(data[100:])
    digest = hashlib.sha256(data).hexdigest()
    writer.finish(digest)
    return StoredPart(number, writer.stored_as, digest, len(data))


def test_multipart_parts_in_any_order_become_one_object(store: ObjectStore) -> None:
    part = max(store.min_part_size, 1000)
    data = bytes(range(256)) * ((2 * part + 300) // 256 + 1)
    data = data[: 2 * part + 300]
    token = store.start_multipart("datasets/x/a.rec")
    stored = {}
    for number in (3, 1, 2):
        offset = (number - 1) * part
        stored[number] = _send(store, "datasets/x/a.rec", token, number,
                               data[offset:offset + part])
    assert not store.exists("datasets/x/a.rec")
    assert store.list("") == []  # staged parts are not objects
    digest = store.complete_multipart("datasets/x/a.rec", token,
                                      [stored[n] for n in (1, 2, 3)])
    assert store.get("datasets/x/a.rec") == data
    assert digest in (None, hashlib.sha256(data).hexdigest())
    if isinstance(store, S3Store):  # the composite the store checks is the one S3 keeps
        head = store.client.head_object(Bucket=store.bucket, Key=store.prefix + "datasets/x/a.rec",
                                        ChecksumMode="ENABLED")
        assert head["ChecksumSHA256"].split("-")[0] == composite_sha256(
            [stored[n].sha256 for n in (1, 2, 3)])
    assert [i.key for i in store.list("")] == ["datasets/x/a.rec"]  # the staging is gone
    if isinstance(store, LocalStore):
        assert [p for p in store.root.rglob("*") if p.is_file()] == [
            store.root / "datasets/x/a.rec"]


def test_a_part_that_changed_in_the_store_is_refused_at_completion(
    store: ObjectStore,
) -> None:
    """Completion reads each recorded part and checks it; one that no longer holds what
    was recorded is named, nothing is written, and the rest stays staged."""
    size = max(store.min_part_size, 1000)
    token = store.start_multipart("datasets/z/a.csv")
    first = _send(store, "datasets/z/a.csv", token, 1, b"a" * size)
    second = _send(store, "datasets/z/a.csv", token, 2, b"b" * 500)
    lying = StoredPart(2, second.stored_as, hashlib.sha256(b"c" * 500).hexdigest(), 500)
    with pytest.raises(PartCorrupt) as caught:
        store.complete_multipart("datasets/z/a.csv", token, [first, lying])
    assert caught.value.number == 2
    assert not store.exists("datasets/z/a.csv")
    store.complete_multipart("datasets/z/a.csv", token, [first, second])
    assert store.get("datasets/z/a.csv") == b"a" * size + b"b" * 500


def test_an_aborted_multipart_upload_leaves_nothing(store: ObjectStore, tmp_path: Path) -> None:
    token = store.start_multipart("datasets/y/a.csv")
    _send(store, "datasets/y/a.csv", token, 1, b"abc")
    discarded = store.stage_part("datasets/y/a.csv", token, 2)
    discarded.write(b"def")
    discarded.discard()
    finished_then_dropped = _send(store, "datasets/y/a.csv", token, 3, b"ghi")
    store.drop_staged("datasets/y/a.csv", token, finished_then_dropped.stored_as)
    store.abort_multipart("datasets/y/a.csv", token)
    store.abort_multipart("datasets/y/a.csv", token)  # twice is fine
    assert store.list("") == []
    if isinstance(store, LocalStore):
        assert [p for p in store.root.rglob("*") if p.is_file()] == []
        with pytest.raises(ObjectNotFound):  # a send after the abort finds no upload
            store.stage_part("datasets/y/a.csv", token, 1)
    else:
        assert store.list_all("") == []  # type: ignore[attr-defined]
