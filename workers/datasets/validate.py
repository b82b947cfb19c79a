"""``rudder.validate_dataset``: fetch a completed upload from object storage to a local
file, check it by format, and record ``ready`` with its stats or ``invalid`` with the
reason. Runs in the worker because decoding images needs Pillow and the engine's
formats, which the api must not import, and because it may take minutes.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from pathlib import Path
from typing import Any

from core import repositories
from core.config import get_settings
from core.datasets import DatasetError, validate_csv, validate_npz
from core.db import session_scope
from core.models import DatasetStatus
from core.storage import ObjectStore
from workers.datasets.archive import validate_archive
from workers.datasets.recordio import validate_recordio
from workers.datasets.summary import InvalidDataset, Summary

log = logging.getLogger("rudder.worker.datasets")
# npz and CSV are parsed in memory (core.datasets); bigger sets belong in RecordIO.
MAX_IN_MEMORY_BYTES = 1024**3


def _download(store: ObjectStore, key: str, target: Path) -> str:
    """Stream the object to ``target``; returns its sha256."""
    digest = hashlib.sha256()
    with open(target, "wb") as handle:
        for chunk in store.stream(key):
            digest.update(chunk)
            handle.write(chunk)
    return digest.hexdigest()


def _check(fmt: str, paths: dict[str, Path]) -> Summary:
    if fmt == "recordio":
        rec = next(p for name, p in paths.items() if name.lower().endswith(".rec"))
        idx = next(p for name, p in paths.items() if name.lower().endswith(".idx"))
        return validate_recordio(rec, idx)
    if fmt == "archive":
        return validate_archive(next(iter(paths.values())))
    if fmt in ("npz", "csv"):
        (path,) = paths.values()
        if path.stat().st_size > MAX_IN_MEMORY_BYTES:
            raise InvalidDataset(f"{fmt} uploads are limited to {MAX_IN_MEMORY_BYTES} bytes; "
                                 "use RecordIO for larger sets")
        limits = get_settings().limits
        check = validate_npz if fmt == "npz" else validate_csv
        try:
            validated = check(path.read_bytes(), max_rows=limits.max_dataset_rows,
                              max_features=limits.max_dataset_features)
        except DatasetError as exc:
            raise InvalidDataset(f"{exc.field}: {exc.message}") from exc
        return Summary(validated.num_rows, validated.feature_shape, validated.dtype,
                       validated.num_classes, validated.stats)
    raise InvalidDataset(f"unknown format {fmt!r}")


def validate_dataset(dataset_id: str, store: ObjectStore) -> str:
    """Validate one data set in ``validating``; returns its new status (or a reason it
    was skipped). Safe to run twice: a data set already decided is left alone."""
    with session_scope() as session:
        dataset = repositories.get_dataset(session, dataset_id=dataset_id)
        if dataset is None or dataset.status != DatasetStatus.VALIDATING.value:
            return "skipped"
        fmt, main_key = dataset.format, dataset.storage_key
        files = list(dataset.files or [{"path": f"data.{fmt}", "key": main_key}])
        session.rollback()
    fields: dict[str, Any]
    with tempfile.TemporaryDirectory(prefix="rudder-validate-") as scratch:
        try:
            paths, digest = {}, ""
            for index, f in enumerate(files):
                path = Path(scratch) / f"{index}{Path(str(f['path'])).suffix}"
                sha = _download(store, str(f["key"]), path)
                digest = sha if f["key"] == main_key else digest
                paths[str(f["path"])] = path
            summary = _check(fmt, paths)
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

