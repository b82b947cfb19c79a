from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np
import pytest

from core.datasets import DatasetError, validate_csv, validate_npz, validate_upload

LIMITS = {"max_rows": 1000, "max_features": 100}


def _npz(**arrays: object) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def test_valid_npz() -> None:
    data = np.zeros((10, 2, 3), dtype=np.float32)
    result = validate_npz(_npz(data=data, label=np.arange(10) % 4), **LIMITS)
    assert (result.num_rows, result.feature_shape, result.dtype) == (10, [2, 3], "float32")
    assert result.num_classes == 4


def test_pickled_object_arrays_are_never_loaded() -> None:
    class Boom:
        def __reduce__(self) -> tuple[object, ...]:
            raise AssertionError("unpickled!")

    raw = io.BytesIO()
    np.savez(raw, data=np.array([1, 2], dtype=object), label=np.zeros(2))
    with pytest.raises(DatasetError, match="pickled"):
        validate_npz(raw.getvalue(), **LIMITS)
    with pytest.raises(DatasetError):
        validate_npz(pickle.dumps(np.zeros(3)), **LIMITS)


def test_zip_bombs_are_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data.npy", b"\0" * 50_000_000)
    with pytest.raises(DatasetError, match="inflates"):
        validate_npz(buffer.getvalue(), **LIMITS)


@pytest.mark.parametrize(
    ("arrays", "words"),
    [
        ({"data": np.zeros((2000, 1)), "label": np.zeros(2000)}, "rows"),
        ({"data": np.zeros((2, 101)), "label": np.zeros(2)}, "features"),
        ({"data": np.zeros((2, 2)), "label": np.zeros((2, 2, 2))}, "label"),
        ({"data": np.zeros((2, 2), dtype=np.complex64), "label": np.zeros(2)}, "numeric"),
        ({"data": np.zeros((2, 2)), "label": np.zeros(2), "extra": np.zeros(1)}, "exactly"),
    ],
)
def test_limits_and_shapes(arrays: dict[str, np.ndarray], words: str) -> None:
    with pytest.raises(DatasetError, match=words):
        validate_npz(_npz(**arrays), **LIMITS)


def test_csv_with_label_column_anywhere() -> None:
    result = validate_csv(b"label,x,y\n1,0.5,2\n0,1,1\n", **LIMITS)
    with np.load(io.BytesIO(result.npz_bytes), allow_pickle=False) as stored:
        np.testing.assert_array_equal(stored["label"], [1, 0])
        np.testing.assert_allclose(stored["data"], [[0.5, 2], [1, 1]])
    assert result.format == "csv"


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"", "empty"),
        (b"x,label\n", "no rows"),
        (b"x,label\n1,2,3\n", "columns"),
        (b"x,label\nnan,1\n", "NaN"),
        (b"\xff\xfe", "UTF-8"),
    ],
)
def test_bad_csv(raw: bytes, words: str) -> None:
    with pytest.raises(DatasetError, match=words):
        validate_csv(raw, **LIMITS)


def test_file_type_comes_from_the_name() -> None:
    with pytest.raises(DatasetError, match="unsupported"):
        validate_upload("x.pkl", b"", **LIMITS)


def _npz_with_data_header(header: str, payload: bytes = b"\0" * 8) -> bytes:
    """An .npz whose data.npy carries ``header`` verbatim (what np.save never writes)."""
    padded = header.encode("latin1")
    padded += b" " * (-(len(padded) + 11) % 64) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded + payload
    label = io.BytesIO()
    np.save(label, np.zeros(1))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("data.npy", npy)
        archive.writestr("label.npy", label.getvalue())
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("header", "words"),
    [
        # np.load would try to allocate 8 TB and raise MemoryError.
        ("{'descr': '<f8', 'fortran_order': False, 'shape': (10**12,), }", "literal"),
        ("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", "claims"),
        # np.load's header parser raises SyntaxError on a name; nothing may run.
        ("{'descr': os.system, 'fortran_order': False, 'shape': (1,), }", "literal"),
        ("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "pickled"),
        ("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", "numeric"),
        ("{'descr': '<f8', 'fortran_order': 0, 'shape': (1,), }", "fortran_order"),
        ("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }", "non-negative"),
        ("{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }", "holds 8 bytes"),
    ],
)
def test_hostile_npy_headers_are_refused_before_numpy_allocates(header: str, words: str) -> None:
    with pytest.raises(DatasetError, match=words):
        validate_npz(_npz_with_data_header(header), **LIMITS)


def test_a_well_formed_hand_written_header_still_loads() -> None:
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }"
    result = validate_npz(_npz_with_data_header(header), **LIMITS)
    assert (result.num_rows, result.feature_shape) == (1, [1])


@pytest.mark.parametrize("value", ["1e400", "-1e400", "nan", "inf"])
def test_a_non_finite_csv_label_is_refused_not_cast(value: str) -> None:
    with pytest.raises(DatasetError, match="not a finite number") as caught:
        validate_csv(f"x,label\n1,0\n2,{value}\n".encode(), **LIMITS)
    assert caught.value.field == "label" and "line 3" in caught.value.message


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_csv_lines_are_numbered_across_read_blocks(
    monkeypatch: pytest.MonkeyPatch, newline: str
) -> None:
    """The converter reads text in blocks; a row split between two blocks, the line
    endings csv knows and blank lines keep their line numbers (named in refusals)."""
    import core.dataset_csv

    monkeypatch.setattr(core.dataset_csv, "BLOCK_CHARS", 7)  # every row crosses a block
    rows = [f"{i}.5,{i % 3}" for i in range(40)]
    good = newline.join(["x,label", *rows[:20], "", *rows[20:]]) + newline
    result = validate_csv(good.encode(), **LIMITS | {"max_rows": 100})
    with np.load(io.BytesIO(result.npz_bytes), allow_pickle=False) as stored:
        np.testing.assert_allclose(stored["data"][:, 0], [i + 0.5 for i in range(40)])
        np.testing.assert_array_equal(stored["label"], [i % 3 for i in range(40)])
    bad = newline.join(["x,label", *rows[:20], "", *rows[20:30], "oops,1", *rows[30:]])
    with pytest.raises(DatasetError, match=r"line 33, column 'x': 'oops' is not a number"):
        validate_csv(bad.encode(), **LIMITS | {"max_rows": 100})


def test_a_line_past_its_limit_is_refused_before_it_is_read_whole() -> None:
    raw = b"x,label\n1,0\n" + b"1" * 300_000 + b"\n"
    with pytest.raises(DatasetError, match="line 3 is longer than 131200 characters"):
        validate_csv(raw, **LIMITS)
