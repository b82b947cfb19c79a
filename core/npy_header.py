"""Read ``.npy`` arrays without letting their header decide what gets allocated.

``np.load`` trusts the header: a ``data.npy`` claiming shape ``(10**12,)`` makes it try
to allocate terabytes (MemoryError), and a header such as ``{'descr': os.system}`` makes
its parser raise SyntaxError. Here the header is parsed with strict limits first (plain
literals only, a simple numeric dtype, a bounded shape) and the claimed size must equal
the bytes that are actually there before numpy sees anything; the array is then a view
of those bytes (``np.frombuffer``), so nothing is ever unpickled or over-allocated.
Usable by the api, the workers and the engine's loaders alike (numpy only).
"""

from __future__ import annotations

import ast
import math
import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"\x93NUMPY"
# numpy writes headers of ~100 bytes; its own safe limit is 10,000.
MAX_HEADER_BYTES = 10_000
MAX_DIMENSIONS = 32
# Booleans, signed/unsigned integers and floats; never objects, strings or records.
NUMERIC_KINDS = "biuf"
_REQUIRED_KEYS = {"descr", "fortran_order", "shape"}


class NpyHeaderError(ValueError):
    """The bytes are not a plain numeric ``.npy`` array this module accepts."""


@dataclass(frozen=True)
class NpyHeader:
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int  # where the array's bytes start in the file

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def parse_npy_header(prefix: bytes) -> NpyHeader:
    """Parse the header at the start of ``prefix`` (the file's first bytes; the first
    ``MAX_HEADER_BYTES + 12`` always suffice)."""
    if not prefix.startswith(MAGIC) or len(prefix) < 10:
        raise NpyHeaderError("not a .npy array (bad magic)")
    major = prefix[6]
    if major == 1:
        (length,), start = struct.unpack("<H", prefix[8:10]), 10
    elif major in (2, 3):
        if len(prefix) < 12:
            raise NpyHeaderError("truncated .npy header")
        (length,), start = struct.unpack("<I", prefix[8:12]), 12
    else:
        raise NpyHeaderError(f"unsupported .npy format version {major}")
    if length > MAX_HEADER_BYTES:
        raise NpyHeaderError(f".npy header of {length} bytes exceeds {MAX_HEADER_BYTES}")
    raw_header = prefix[start:start + length]
    if len(raw_header) != length:
        raise NpyHeaderError("truncated .npy header")
    try:
        text = raw_header.decode("utf-8" if major == 3 else "latin1")
        # literal_eval builds literals only: a name such as os.system is refused, not run.
        header = ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError, UnicodeDecodeError) as exc:
        raise NpyHeaderError(".npy header is not a plain literal dictionary") from exc
    if not isinstance(header, dict) or set(header) != _REQUIRED_KEYS:
        raise NpyHeaderError(f".npy header must have exactly the keys {sorted(_REQUIRED_KEYS)}")
    return NpyHeader(
        dtype=_dtype(header["descr"]),
        shape=_shape(header["shape"]),
        fortran_order=_fortran_order(header["fortran_order"]),
        data_offset=start + length,
    )


def _dtype(descr: object) -> np.dtype:
    if not isinstance(descr, str) or len(descr) > 16:
        raise NpyHeaderError("only plain numeric arrays are accepted (descr must be a "
                             "simple type string such as '<f4')")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError) as exc:
        raise NpyHeaderError(f"unknown .npy dtype {descr!r}") from exc
    if dtype.kind not in NUMERIC_KINDS or dtype.hasobject or dtype.fields is not None:
        raise NpyHeaderError(f"only numeric arrays are accepted, got dtype {dtype}")
    return dtype


def _shape(shape: object) -> tuple[int, ...]:
    if not isinstance(shape, tuple) or len(shape) > MAX_DIMENSIONS or not all(
        type(n) is int and n >= 0 for n in shape
    ):
        raise NpyHeaderError(
            f"the .npy shape must be a tuple of at most {MAX_DIMENSIONS} non-negative ints"
        )
    return shape


def _fortran_order(value: object) -> bool:
    if not isinstance(value, bool):
        raise NpyHeaderError("fortran_order must be True or False")
    return value


def load_npy(raw: bytes | memoryview, *, max_bytes: int) -> np.ndarray:
    """The array in ``raw`` (a whole ``.npy`` file), checked before any allocation:
    its claimed size must be at most ``max_bytes`` and exactly what ``raw`` holds."""
    header = parse_npy_header(bytes(raw[:MAX_HEADER_BYTES + 12]))
    if header.nbytes > max_bytes:
        raise NpyHeaderError(
            f"the .npy header claims shape {header.shape} ({header.nbytes} bytes), more "
            f"than the limit of {max_bytes} bytes"
        )
    available = len(raw) - header.data_offset
    if available != header.nbytes:
        raise NpyHeaderError(
            f"the .npy header claims shape {header.shape} ({header.nbytes} bytes) but "
            f"the file holds {available} bytes of data"
        )
    flat = np.frombuffer(raw, dtype=header.dtype, count=math.prod(header.shape),
                         offset=header.data_offset)
    if header.fortran_order:
        return flat.reshape(header.shape, order="F")
    return flat.reshape(header.shape, order="C")
