"""engine.serialization: the one npz + JSON format every engine file goes through."""

import io
import pathlib
import pickle
import re

import numpy as np
import pytest

import engine
from engine.serialization import SerializationError, load_npz, npz_bytes, save_npz


def test_arrays_and_meta_round_trip_under_the_exact_name(tmp_path):
    target = tmp_path / "states.bin"
    save_npz(str(target), {"w": np.arange(3, dtype=np.float16)}, meta={"step": 7, "ok": [1]})
    assert [p.name for p in tmp_path.iterdir()] == ["states.bin"]  # no '.npz' appended
    arrays, meta = load_npz(target)
    assert arrays["w"].dtype == np.float16 and arrays["w"].tolist() == [0, 1, 2]
    assert meta == {"step": 7, "ok": [1]}
    assert load_npz(npz_bytes({"a": np.ones(1)}))[1] is None


def test_atomic_save_leaves_no_temporary_file_and_replaces_the_old_one(tmp_path):
    target = tmp_path / "net-0001.params"
    target.write_bytes(b"old")
    save_npz(target, {"arg:w": np.zeros(2)}, atomic=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net-0001.params"]
    assert load_npz(target)[0]["arg:w"].tolist() == [0, 0]


def test_object_arrays_are_refused_on_save_and_pickles_on_load(tmp_path):
    with pytest.raises(ValueError, match="pickle"):
        save_npz(io.BytesIO(), {"x": np.array([object()], dtype=object)})
    evil = io.BytesIO()
    np.savez(evil, x=np.array([object()], dtype=object))
    with pytest.raises(SerializationError, match="pickled"):
        load_npz(evil.getvalue())
    with pytest.raises(SerializationError):
        load_npz(pickle.dumps({"x": 1}))
    single = io.BytesIO()
    np.save(single, np.ones(2))
    with pytest.raises(SerializationError, match="single array"):
        load_npz(single.getvalue())
    with pytest.raises(FileNotFoundError):
        load_npz(tmp_path / "missing.npz")


def test_no_engine_module_but_serialization_opens_npz_archives():
    root = pathlib.Path(engine.__file__).parent
    pattern = re.compile(r"\b(numpy|np)\.(savez\w*|load)\(")
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "serialization.py" and pattern.search(p.read_text())]
    assert offenders == []
