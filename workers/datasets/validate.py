"""``rudder.validate_dataset``: fetch a completed upload from object storage to a local
file, check it by format, and record ``ready`` with its stats or ``invalid`` with the
reason. Runs in the validation worker (its own queue, ``datasets``, so it never waits
behind training) because decoding images needs Pillow, and because it may take minutes.

Every format is checked as a stream with memory bounded by a few blocks (npz and CSV:
core.datasets; RecordIO and archives: one record or member at a time), so a 1 GiB CSV
costs the worker tens of MiB, not gigabytes (bench/dataset_validation.py). A CSV is
converted once, here, to the npz the training loader reads (``dataset_key(id, "npz")``).

The file's sha256 is computed while it downloads. Where completion already recorded one
(the local store computes it), the two must agree: a stored file that changed after its
upload is refused rather than trained on.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from pathlib import Path
from typing import Any

from core import repositories
from core.config import get_settings
from core.datasets import DatasetError, validate_table
from core.db import session_scope
from core.models import DatasetStatus
from core.storage import ObjectStore, dataset_key
from workers.datasets.archive import validate_archive
from workers.datasets.recordio import validate_recordio
from workers.datasets.summary import InvalidDataset, Summary

log = logging.getLogger("rudder.worker.datasets")


def _download(store: ObjectStore, key: str, target: Path) -> str:
    """Stream the object to ``target``; returns its sha256."""
    digest = hashlib.sha256()
    with open(target, "wb") as handle:
        for chunk in store.stream(key):
            digest.update(chunk)
            handle.write(chunk)
    return digest.hexdigest()


def _check_table(fmt: str, path: Path, store: ObjectStore, dataset_id: str) -> Summary:
    limits = get_settings().limits
    with open(path, "rb") as source, tempfile.TemporaryFile(dir=path.parent) as converted:
        try:
            found = validate_table(fmt, source, converted=converted,
                                   max_rows=limits.max_dataset_rows,
                                   max_features=limits.max_dataset_features)
        except DatasetError as exc:
            raise InvalidDataset(f"{exc.field}: {exc.message}") from exc
        if fmt == "csv":  # what the training loader reads (workers.lifecycle)
            converted.seek(0)
            store.put_stream(dataset_key(dataset_id, "npz"), converted)
    return Summary(found.num_rows, found.feature_shape, found.dtype, found.num_classes,
                   found.stats)


def _check(fmt: str, paths: dict[str, Path], store: ObjectStore, dataset_id: str) -> Summary:
    if fmt == "recordio":
        rec = next(p for name, p in paths.items() if name.lower().endswith(".rec"))
        idx = next(p for name, p in paths.items() if name.lower().endswith(".idx"))
        return validate_recordio(rec, idx)
    if fmt == "archive":
        return validate_archive(next(iter(paths.values())))
    if fmt in ("npz", "csv"):
        (path,) = paths.values()
        return _check_table(fmt, path, store, dataset_id)
    raise InvalidDataset(f"unknown format {fmt!r}")


def validate_dataset(dataset_id: str, store: ObjectStore) -> str:
    """Validate one data set in ``validating``; returns its new status (or a reason it
    was skipped). Safe to run twice: a data set already decided is left alone."""
    with session_scope() as session:
        dataset = repositories.get_dataset(session, dataset_id=dataset_id)
        if dataset is None or dataset.status != DatasetStatus.VALIDATING.value:
            return "skipped"
        fmt, main_key, recorded = dataset.format, dataset.storage_key, dataset.sha256
        files = list(dataset.files or [{"path": f"data.{fmt}", "key": main_key}])
        repositories.mark_validation_started(session, dataset_id=dataset_id)
    fields: dict[str, Any]
    with tempfile.TemporaryDirectory(prefix="rudder-validate-") as scratch:
        try:
            paths, digest = {}, ""
            for index, f in enumerate(files):
                path = Path(scratch) / f"{index}{Path(str(f['path'])).suffix}"
                sha = _download(store, str(f["key"]), path)
                digest = sha if f["key"] == main_key else digest
                paths[str(f["path"])] = path
            if recorded and digest != recorded:
                raise InvalidDataset(
                    f"the stored file's sha256 is {digest}, not the {recorded} recorded "
                    "when its upload completed (it changed in object storage); upload it "
                    "again")
            summary = _check(fmt, paths, store, dataset_id)
        except InvalidDataset as exc:
            fields = {"status": DatasetStatus.INVALID.value, "reason": str(exc)[:2000]}
        except Exception as exc:  # noqa: BLE001 - a reason beats a data set stuck validating
            log.exception("validating dataset %s failed", dataset_id)
            fields = {"status": DatasetStatus.INVALID.value,
                      "reason": f"could not be read ({type(exc).__name__})"}
        else:
            fields = {
                "status": DatasetStatus.READY.value, "reason": None, "sha256": digest,
                "num_rows": summary.num_rows, "feature_shape": summary.feature_shape,
                "dtype": summary.dtype, "num_classes": summary.num_classes,
                "stats": summary.stats,
            }
    with session_scope() as session:
        repositories.update_dataset(session, dataset_id=dataset_id, **fields)
        session.commit()
    return str(fields["status"])
