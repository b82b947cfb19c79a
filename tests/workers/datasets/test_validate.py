"""rudder.validate_dataset on real files, a real database and a local store: ready with
stats, or invalid with a reason naming the problem (issues 13 and 14)."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core import repositories
from core.db import session_scope
from core.models import new_id
from core.storage import LocalStore
from tests.workers.datasets import files
from workers.datasets.validate import validate_dataset


@pytest.fixture
def store(worker_env: dict[str, str]) -> LocalStore:
    return LocalStore(worker_env["RUDDER_STORAGE_URL"].removeprefix("file://"))


def _validate(store: LocalStore, fmt: str, named: dict[str, bytes]) -> dict[str, Any]:
    """Store ``named`` files as a completed upload, validate it, return the row."""
    dataset_id = new_id()
    stored = []
    for path, data in named.items():
        key = f"datasets/{dataset_id}/{path}"
        store.put(key, data)
        stored.append({"path": path, "key": key, "size": len(data)})
    with session_scope() as session:
        user = repositories.create_user(session, name=f"u-{dataset_id[:8]}")
        repositories.create_dataset(
            session, owner_id=user.id, id=dataset_id, name="d", format=fmt,
            status="validating", storage_key=stored[0]["key"], files=stored,
            size=sum(len(d) for d in named.values()), sha256="", num_rows=0,
            feature_shape=[], dtype="", num_classes=None,
        )
    validate_dataset(dataset_id, store)
    with session_scope() as session:
        row = repositories.get_dataset(session, dataset_id=dataset_id)
        assert row is not None
        columns = ("id", "status", "reason", "num_rows", "feature_shape", "num_classes",
                   "stats", "sha256")
        return {c: getattr(row, c) for c in columns}


def _invalid(store: LocalStore, fmt: str, named: dict[str, bytes], words: str) -> None:
    row = _validate(store, fmt, named)
    assert row["status"] == "invalid", row
    assert words in row["reason"], row["reason"]


def test_recordio_is_ready_with_its_stats(store: LocalStore) -> None:
    pictures = files.images(9)
    rec, idx = files.recordio([(float(i % 3), files.png(p)) for i, p in enumerate(pictures)])
    row = _validate(store, "recordio", {"train.rec": rec, "train.idx": idx})
    assert row["status"] == "ready", row["reason"]
    assert (row["num_rows"], row["feature_shape"], row["num_classes"]) == (9, [6, 8, 3], 3)
    stats = row["stats"]
    assert stats["image_sizes"] == {"6x8": 9}
    assert stats["class_counts"] == {"0": 3, "1": 3, "2": 3}
    pixels = np.stack(pictures).reshape(-1, 3) / 255.0
    np.testing.assert_allclose(stats["mean"], pixels.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(stats["std"], pixels.std(axis=0), rtol=1e-9)
    assert row["sha256"] == hashlib.sha256(rec).hexdigest()


def test_a_record_split_around_the_magic_is_joined(store: LocalStore) -> None:
    """dmlc splits a payload that contains the magic; the reader must join the parts."""
    magic = files.MAGIC.to_bytes(4, "little")
    payload = files.png(files.images(1)[0])
    payload += b"\0" * (-len(payload) % 4)
    # The magic sits (4-aligned) in trailing bytes after the PNG's end, which decoders skip.
    first, second = b"\0" * 24 + payload, b"tail"  # IRHeader: flag 0, label 0
    rec = (files.MAGIC.to_bytes(4, "little") + (1 << 29 | len(first)).to_bytes(4, "little")
           + first + magic + (3 << 29 | len(second)).to_bytes(4, "little") + second
           + b"\0" * (-len(second) % 4))
    row = _validate(store, "recordio", {"a.rec": rec, "a.idx": b"0\t0\n"})
    assert row["status"] == "ready", row["reason"]


def _break_second_magic(rec: bytes) -> bytes:
    second = rec.index(files.MAGIC.to_bytes(4, "little"), 1)
    return rec[:second] + b"\xde\xad" + rec[second + 2:]


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda rec, idx: (_break_second_magic(rec), idx), "magic"),
        (lambda rec, idx: (rec, idx + b"3\t999999\n"), "past the end"),
        (lambda rec, idx: (rec[:-20], idx), "past the end of the .rec"),
        (lambda rec, idx: (rec, b"0\tzero\n"), "key<TAB>offset"),
        (lambda rec, idx: (rec, b""), "names no records"),
    ],
)
def test_a_broken_recordio_is_invalid_with_the_reason(
    store: LocalStore, damage: Any, words: str
) -> None:
    rec, idx = files.recordio([(0.0, files.png(p)) for p in files.images(3)])
    rec, idx = damage(rec, idx)
    _invalid(store, "recordio", {"a.rec": rec, "a.idx": idx}, words)


def test_a_record_that_is_not_an_image_is_invalid(store: LocalStore) -> None:
    rec, idx = files.recordio([(0.0, files.png(files.images(1)[0])), (1.0, b"garbage")])
    _invalid(store, "recordio", {"a.rec": rec, "a.idx": idx}, "not a decodable image")


def test_an_image_folder_archive_is_labelled_like_image_folder_dataset(
    store: LocalStore,
) -> None:
    pictures = files.images(5, height=4, width=4)
    members = {"zebra/1.png": files.png(pictures[0]), "ant/a.png": files.png(pictures[1]),
               "ant/b.PNG": files.png(pictures[2]), "moth/x.png": files.png(pictures[3]),
               "moth/.DS_Store": b"junk", "moth/y.png": files.png(pictures[4])}
    for archive, fmt in ((files.zip_of(members), "a.zip"), (files.tar_of(members), "a.tgz")):
        row = _validate(store, "archive", {fmt: archive})
        assert row["status"] == "ready", row["reason"]
        assert row["stats"]["class_names"] == ["ant", "moth", "zebra"]
        assert row["stats"]["class_counts"] == {"0": 2, "1": 2, "2": 1}
        assert (row["num_rows"], row["num_classes"]) == (5, 3)


def _bomb() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("cats/a.png", b"\0" * 20_000_000)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "build", "words"),
    [
        ("a.zip", lambda m: files.zip_of(m | {"../../etc/x.png": m["cats/a.png"]}),
         "path traversal"),
        ("a.tgz", lambda m: files.tar_of(m | {"cats/../../x.png": m["cats/a.png"]}),
         "path traversal"),
        ("a.tar", lambda m: files.tar_of(m | {"/etc/x.png": m["cats/a.png"]}), "absolute"),
        ("a.zip", lambda m: files.zip_of(m, symlinks={"cats/b.png": "/etc/passwd"}),
         "symbolic link"),
        ("a.tgz", lambda m: files.tar_of(m, symlinks={"cats/b.png": "/etc/passwd"}),
         "symbolic link"),
        ("a.zip", lambda m: _bomb(), "zip bomb"),
        ("a.zip", lambda m: files.zip_of(m | {"cats/notes.txt": b"hello"}), "not an image"),
        ("a.zip", lambda m: files.zip_of(m | {"cats/b.png": b"not a png"}),
         "not a decodable image"),
        ("a.zip", lambda m: files.zip_of(m | {"loose.png": m["cats/a.png"]}),
         "not in a class folder"),
        ("a.zip", lambda m: b"PK\x03\x04 truncated", "neither a zip nor a tar"),
    ],
)
def test_a_hostile_archive_is_invalid_with_the_reason(
    store: LocalStore, name: str, build: Any, words: str
) -> None:
    members = {"cats/a.png": files.png(files.images(1)[0])}
    _invalid(store, "archive", {name: build(members)}, words)
    assert not Path("/etc/x.png").exists()


def test_npz_and_csv_uploads_are_checked_by_the_worker_too(store: LocalStore) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, data=np.ones((4, 2), dtype=np.float32), label=np.array([0, 1, 0, 1]))
    row = _validate(store, "npz", {"a.npz": buffer.getvalue()})
    assert (row["status"], row["num_rows"], row["stats"]["classes"]) == ("ready", 4, 2)
    _invalid(store, "csv", {"a.csv": b"x,y,label\n1,2,0\n3,1\n"}, "2 columns")
    _invalid(store, "csv", {"a.csv": b"x,label\n1,1e400\n"}, "not a finite number")


def test_validation_runs_once(store: LocalStore) -> None:
    rec, idx = files.recordio([(0.0, files.png(files.images(1)[0]))])
    row = _validate(store, "recordio", {"a.rec": rec, "a.idx": idx})
    assert row["status"] == "ready"
    assert validate_dataset(row["id"], store) == "skipped"
    assert validate_dataset(new_id(), store) == "skipped"  # a message for a deleted set


def test_a_recordio_written_by_mxnet_validates(store: LocalStore, tmp_path: Path) -> None:
    """The differential check: MXNet 1.9.1's MXIndexedRecordIO writes, the worker reads."""
    from tests.oracle import run_mxnet

    pictures = files.images(4)
    encoded = {f"png{i}": np.frombuffer(files.png(p), dtype=np.uint8)
               for i, p in enumerate(pictures)}
    prefix = tmp_path / "mx"
    run_mxnet(
        f"writer = mx.recordio.MXIndexedRecordIO('{prefix}.idx', '{prefix}.rec', 'w')\n"
        "for i in range(4):\n"
        "    header = mx.recordio.IRHeader(0, float(i % 2), i, 0)\n"
        "    writer.write_idx(i, mx.recordio.pack(header, inputs[f'png{i}'].tobytes()))\n"
        "writer.close()\n",
        encoded,
    )
    row = _validate(store, "recordio", {"mx.rec": prefix.with_suffix(".rec").read_bytes(),
                                        "mx.idx": prefix.with_suffix(".idx").read_bytes()})
    assert row["status"] == "ready", row["reason"]
    assert (row["num_rows"], row["num_classes"], row["feature_shape"]) == (4, 2, [6, 8, 3])
