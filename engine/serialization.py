"""The engine's on-disk formats: named arrays in an ``.npz`` archive plus JSON metadata,
and MXNet's binary NDArray-list format for files meant for MXNet.

Every save/load path of the engine goes through here, so no file is ever pickled: object
arrays are refused on save, and archives are opened with ``allow_pickle=False``. Metadata,
when given, is stored as UTF-8 JSON bytes in the array ``__meta__``. The engine's own
checkpoints (parameters, optimizer and trainer states) are npz; ``nd.save``, ``export`` and
``model.save_checkpoint`` write MXNet's format (:mod:`engine.ndarray.mxnet_format`), as
MXNet does, and :func:`load_array_file` reads either, recognising MXNet's by its magic.

>>> import io, numpy
>>> buffer = io.BytesIO()
>>> save_npz(buffer, {"w": numpy.ones(2, dtype="float32")}, meta={"step": 3})
>>> arrays, meta = load_npz(buffer.getvalue())
>>> arrays["w"].tolist(), meta
([1.0, 1.0], {'step': 3})
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy

META_KEY = "__meta__"


class SerializationError(ValueError):
    """A file is not a readable npz archive (corrupt, a single array, pickled, bad JSON)."""


def npz_bytes(arrays: Mapping[str, numpy.ndarray], meta: Any = None) -> bytes:
    """The archive :func:`save_npz` writes, as bytes."""
    buffer = io.BytesIO()
    save_npz(buffer, arrays, meta)
    return buffer.getvalue()


def save_npz(file: Any, arrays: Mapping[str, numpy.ndarray], meta: Any = None,
             atomic: bool = False) -> None:
    """Write ``arrays`` (and ``meta`` as JSON) to a path or a writable binary file.

    A path is written under exactly that name (``numpy.savez`` would append ``.npz``);
    with ``atomic`` it is written to a temporary name and renamed, so a crash never leaves
    a half-written file under the real name.
    """
    packed = dict(arrays)
    for name, arr in packed.items():
        if numpy.asarray(arr).dtype == object:
            raise ValueError(f"refusing to save object array {name!r} (it would need pickle)")
    if meta is not None:
        packed[META_KEY] = numpy.frombuffer(json.dumps(meta).encode(), dtype=numpy.uint8)
    if not isinstance(file, (str, os.PathLike)):
        numpy.savez(file, **packed)
        return
    target = os.fspath(file)
    written = f"{target}.tmp-{os.getpid()}" if atomic else target
    try:
        with open(written, "wb") as handle:
            numpy.savez(handle, **packed)
        if atomic:
            os.replace(written, target)
    finally:
        if atomic and os.path.exists(written):
            os.remove(written)


def load_npz(file: Any) -> tuple[dict[str, numpy.ndarray], Any]:
    """``(arrays, meta)`` from a path, a readable binary file or bytes; ``meta`` is None
    when the archive has none. A missing path raises ``FileNotFoundError``; anything
    unreadable raises :class:`SerializationError`."""
    if isinstance(file, (bytes, bytearray, memoryview)):
        file = io.BytesIO(bytes(file))
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as handle:  # closed even when the archive is corrupt
            return load_npz(handle)
    try:
        archive = numpy.load(file, allow_pickle=False)
        if not isinstance(archive, numpy.lib.npyio.NpzFile):
            raise SerializationError("a single array, not an npz archive")
        with archive:
            arrays = {name: archive[name] for name in archive.files}
        raw_meta = arrays.pop(META_KEY, None)
        meta = None if raw_meta is None else json.loads(raw_meta.tobytes().decode())
    except SerializationError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError,
            UnicodeDecodeError) as err:
        raise SerializationError(f"corrupt or not an npz archive, or it holds pickled "
                                 f"objects, which Rudder never loads ({err})") from err
    return arrays, meta


_KIND_KEY = "__rudder_kind__"  # npz files from nd.save: whether a list or a dict was saved


def read_bytes(file: Any) -> bytes:
    """The whole content of a path, a readable binary file, or bytes."""
    if isinstance(file, (bytes, bytearray, memoryview)):
        return bytes(file)
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as handle:
            return handle.read()
    return bytes(file.read())


def load_array_file(file: Any) -> dict[str, numpy.ndarray] | list[numpy.ndarray]:
    """Arrays of a file in MXNet's binary format or the engine's npz: a dict when the file
    names them, else a list. Anything else raises :class:`SerializationError`.

    >>> from engine.ndarray.mxnet_format import write_params
    >>> load_array_file(write_params([numpy.ones(2, dtype="float32")]))[0].tolist()
    [1.0, 1.0]
    """
    from .ndarray.mxnet_format import is_mxnet_params, read_arrays

    data = read_bytes(file)
    if is_mxnet_params(data):
        try:
            arrays, names = read_arrays(data)
        except ValueError as err:
            raise SerializationError(f"corrupt MXNet params file: {err}") from None
        if not names:
            return arrays
        if len(set(names)) != len(names):
            raise SerializationError("corrupt MXNet params file: a name is used twice")
        return dict(zip(names, arrays, strict=True))
    packed, _ = load_npz(data)
    kind = str(packed.pop(_KIND_KEY, "dict"))
    if kind == "list":
        return [packed[n] for n in sorted(packed)]
    return packed
