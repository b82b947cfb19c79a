"""MXNet's own binary NDArray-list format (``mx.nd.save``, ``.params`` files), both ways.

The layout, as MXNet 1.9 writes it (all little-endian)::

    uint64 0x112 (list magic) | uint64 0 (reserved) | uint64 count | count arrays |
    uint64 name count (0 or count) | per name: uint64 length, UTF-8 bytes

and each array::

    uint32 0xF993FAC9 (V2; 0xF993FACA = V3, numpy shape semantics) | int32 storage type |
    int32 ndim | int64 dims[ndim] | int32 dev_type | int32 dev_id | int32 type flag |
    raw data (C order)

Files come from users, so the reader trusts nothing: every count, dimension and length is
checked against what is left of the input before anything is allocated, and the data of an
array must fit in the bytes that are actually there. Nothing is ever unpickled; a pickle or
an npz archive is named as such in the error.

>>> import numpy
>>> blob = write_params({"w": numpy.ones((2, 3), dtype="float32")})
>>> {k: v.shape for k, v in read_params(blob, max_bytes=1 << 20).items()}
{'w': (2, 3)}
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

import numpy

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA
MAX_NDIM = 32  # MXNet's own limit on tensor rank
MAX_NAME_BYTES = 4096

# MXNet's type flags (mshadow's kFloat32 = 0, ...); bfloat16 (12) has no numpy type.
_DTYPES = ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool",
           "int16", "uint16", "uint32", "uint64"]
_FLAG_OF = {numpy.dtype(name): flag for flag, name in enumerate(_DTYPES)}
_STORAGE = {0: "default", 1: "row_sparse", 2: "csr"}
_CPU = 1  # MXNet's dev_type for cpu; files always say where an array lived, loads ignore it


def is_mxnet_params(data: bytes | bytearray | memoryview) -> bool:
    """True when ``data`` starts like a file ``mx.nd.save`` writes."""
    return len(data) >= 8 and struct.unpack_from("<Q", data, 0)[0] == LIST_MAGIC


def write_params(arrays: Mapping[str, numpy.ndarray] | Sequence[numpy.ndarray]) -> bytes:
    """The bytes of ``mx.nd.save(fname, arrays)``: a dict keeps its names, a list has none.

    >>> len(write_params([numpy.zeros(1, dtype="float32")]))
    68
    """
    if isinstance(arrays, Mapping):
        names = [str(k) for k in arrays]
        values = [numpy.asarray(v) for v in arrays.values()]
    else:
        names = []
        values = [numpy.asarray(v) for v in arrays]
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(values))]
    for name, value in zip(names or [None] * len(values), values, strict=True):
        flag = _FLAG_OF.get(value.dtype)
        if flag is None:
            where = f" {name!r}" if name is not None else ""
            raise ValueError(f"cannot save array{where} of dtype {value.dtype} in MXNet's format; "
                             f"supported dtypes: {', '.join(_DTYPES)}")
        parts.append(struct.pack("<Iii", V2_MAGIC, 0, value.ndim))
        parts.append(struct.pack(f"<{value.ndim}q", *value.shape))
        parts.append(struct.pack("<iii", _CPU, 0, flag))
        parts.append(numpy.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))
                     .tobytes())
    parts.append(struct.pack("<Q", len(names)))
    for name in names:
        encoded = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(encoded)))
        parts.append(encoded)
    return b"".join(parts)


def read_arrays(data: bytes | bytearray | memoryview, *, max_bytes: int | None = None,
                ) -> tuple[list[numpy.ndarray], list[str]]:
    """``(arrays, names)`` of an MXNet NDArray-list file; ``names`` is empty for a list.

    Raises ValueError naming the problem (and the array, by position) for anything that is
    not exactly this format: a pickle, an npz archive, a truncated file, an unknown dtype
    flag, a sparse array, dimensions that would need more bytes than the file holds.
    """
    view = memoryview(data).cast("B")
    if max_bytes is not None and len(view) > max_bytes:
        raise ValueError(f"params file is {len(view)} bytes, more than the limit of "
                         f"{max_bytes} bytes")
    _check_magic(view)
    reader = _Reader(view)
    reader.u64("list magic")
    reader.u64("reserved field")
    count = reader.u64("array count")
    # the smallest array record is 28 bytes (magic, stype, ndim, ctx, flag): bound count now
    if count > reader.remaining() // 28:
        raise ValueError(f"params file declares {count} arrays but holds only "
                         f"{reader.remaining()} more bytes")
    arrays = [_read_array(reader, i) for i in range(count)]
    name_count = reader.u64("name count")
    if name_count not in (0, count):
        raise ValueError(f"params file has {count} arrays but {name_count} names")
    names = [_read_name(reader, i) for i in range(name_count)]
    if reader.remaining():
        raise ValueError(f"params file has {reader.remaining()} unexpected bytes after the "
                         "last name")
    return arrays, names


def read_params(data: bytes | bytearray | memoryview, *, max_bytes: int,
                ) -> dict[str, numpy.ndarray]:
    """Named arrays of an MXNet ``.params`` file (``mx.nd.save`` of a dict,
    ``save_parameters``, ``export``); strict, for untrusted uploads.

    Raises ValueError with the reason: over ``max_bytes``, not this format (a pickle, an npz
    archive, garbage), truncated or inconsistent headers, no names, a name used twice.

    >>> read_params(b"\\x80\\x04K\\x01.", max_bytes=100)
    Traceback (most recent call last):
    ...
    ValueError: params file is a Python pickle, which Rudder never loads; save it with mx.nd.save
    """
    arrays, names = read_arrays(data, max_bytes=max_bytes)
    if arrays and not names:
        raise ValueError("params file holds an unnamed list of arrays; parameters need names "
                         "(save a dict, as save_parameters and export do)")
    out: dict[str, numpy.ndarray] = {}
    for name, value in zip(names, arrays, strict=True):
        if name in out:
            raise ValueError(f"params file names {name!r} twice")
        out[name] = value
    return out


# ------------------------------------------------------------------------------ reading
class _Reader:
    """Bounds-checked little-endian reads from a byte view."""

    def __init__(self, view: memoryview) -> None:
        self.view = view
        self.pos = 0

    def remaining(self) -> int:
        return len(self.view) - self.pos

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or size > self.remaining():
            raise ValueError(f"params file is truncated: {what} needs {size} bytes at offset "
                             f"{self.pos}, only {self.remaining()} left")
        chunk = self.view[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple[int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def u64(self, what: str) -> int:
        return self.unpack("<Q", what)[0]


def _check_magic(view: memoryview) -> None:
    head = bytes(view[:8])
    if head[:1] == b"\x80" or head[:1] in (b"(", b"}", b"]"):
        raise ValueError("params file is a Python pickle, which Rudder never loads; save it "
                         "with mx.nd.save")
    if head[:2] == b"PK":
        raise ValueError("params file is an npz (zip) archive, not MXNet's binary format")
    if len(head) < 8 or struct.unpack("<Q", head)[0] != LIST_MAGIC:
        raise ValueError("params file is not in MXNet's NDArray format (it does not start "
                         "with the list magic 0x112)")


def _read_array(reader: _Reader, index: int) -> numpy.ndarray:
    where = f"array {index}"
    (magic,) = reader.unpack("<I", f"{where} magic")
    if magic not in (V2_MAGIC, V3_MAGIC):
        old = " (MXNet before 1.0 wrote it; re-save it with a newer MXNet)" \
            if magic == V1_MAGIC or magic <= MAX_NDIM else ""
        raise ValueError(f"{where}: unknown NDArray magic 0x{magic:08X}{old}")
    (stype,) = reader.unpack("<i", f"{where} storage type")
    if stype != 0:
        kind = _STORAGE.get(stype, f"unknown ({stype})")
        raise ValueError(f"{where}: storage type {kind} is not supported; save dense arrays "
                         "(tostype('default'))")
    (ndim,) = reader.unpack("<i", f"{where} ndim")
    if ndim < 0:  # an array without a shape (MXNet's "none"): nothing follows
        if ndim == -1:
            return numpy.zeros((0,), dtype=numpy.float32)
        raise ValueError(f"{where}: negative ndim {ndim}")
    if ndim > MAX_NDIM:
        raise ValueError(f"{where}: ndim {ndim} is more than {MAX_NDIM}")
    shape = reader.unpack(f"<{ndim}q", f"{where} shape")
    if any(d < 0 for d in shape):
        raise ValueError(f"{where}: negative dimension in shape {shape}")
    reader.unpack("<ii", f"{where} context")
    (flag,) = reader.unpack("<i", f"{where} type flag")
    if not 0 <= flag < len(_DTYPES):
        raise ValueError(f"{where}: type flag {flag} is not a dtype Rudder reads "
                         f"(0..{len(_DTYPES) - 1}: {', '.join(_DTYPES)})")
    dtype = numpy.dtype(_DTYPES[flag]).newbyteorder("<")
    size = 1
    for d in shape:
        size *= d  # python ints: no overflow; checked against the bytes before any allocation
    nbytes = size * dtype.itemsize
    if nbytes > reader.remaining():
        raise ValueError(f"{where}: shape {tuple(shape)} of {dtype.name} needs {nbytes} bytes, "
                         f"only {reader.remaining()} left in the file")
    raw = reader.take(nbytes, f"{where} data")
    host = numpy.frombuffer(raw, dtype=dtype).reshape(shape)
    return host.astype(dtype.newbyteorder("="), copy=True)


def _read_name(reader: _Reader, index: int) -> str:
    length = reader.u64(f"name {index} length")
    if length > MAX_NAME_BYTES:
        raise ValueError(f"name {index} is {length} bytes long, more than {MAX_NAME_BYTES}")
    raw = bytes(reader.take(length, f"name {index}"))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"name {index} is not UTF-8 text") from None
