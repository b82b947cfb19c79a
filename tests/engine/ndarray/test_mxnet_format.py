"""MXNet's binary NDArray-list format: byte-exact with MXNet 1.9.1 both ways, and a strict
reader for untrusted files (every malformed header is a ValueError naming the problem)."""

import io
import pickle
import struct

import numpy as np
import pytest

from engine.ndarray.mxnet_format import read_arrays, read_params, write_params
from tests.oracle import needs_mxnet, run_mxnet

LIMIT = 1 << 20


def _header(count):
    return struct.pack("<QQQ", 0x112, 0, count)


def _array(shape, flag=0, magic=0xF993FAC9, stype=0, data=None):
    body = struct.pack("<Iii", magic, stype, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    body += struct.pack("<iii", 1, 0, flag)
    return body + (data if data is not None else b"\0" * (4 * int(np.prod(shape))))


def test_every_dtype_shape_and_name_round_trips():
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f64": np.array([1.5], dtype=np.float64),
        "f16": np.array([[0.5, -2]], dtype=np.float16),
        "u8": np.array([255], dtype=np.uint8),
        "i32": np.array([-7], dtype=np.int32),
        "i64": np.array([1 << 40], dtype=np.int64),
        "scalar": np.array(3.0, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "ünï": np.ones((1, 1, 1, 1, 1), dtype=np.int8),
    }
    back = read_params(write_params(arrays), max_bytes=LIMIT)
    assert list(back) == list(arrays)
    for name, value in arrays.items():
        assert back[name].dtype == value.dtype and back[name].shape == value.shape
        np.testing.assert_array_equal(back[name], value)
    values, names = read_arrays(write_params([arrays["f32"], arrays["i64"]]))
    assert names == [] and [v.shape for v in values] == [(2, 3), (1,)]


def test_the_reader_refuses_what_is_not_this_format():
    with pytest.raises(ValueError, match="pickle"):
        read_params(pickle.dumps({"w": np.ones(2)}), max_bytes=LIMIT)
    npz = io.BytesIO()
    np.savez(npz, w=np.ones(2))
    with pytest.raises(ValueError, match="npz"):
        read_params(npz.getvalue(), max_bytes=LIMIT)
    with pytest.raises(ValueError, match="list magic"):
        read_params(b"garbage that is long enough", max_bytes=LIMIT)
    with pytest.raises(ValueError, match="limit"):
        read_params(write_params({"w": np.ones(100, np.float32)}), max_bytes=100)
    with pytest.raises(ValueError, match="unnamed list"):
        read_params(write_params([np.ones(1, np.float32)]), max_bytes=LIMIT)
    twice = _header(2) + _array((1,)) + _array((1,)) + struct.pack("<Q", 2)
    twice += (struct.pack("<Q", 1) + b"w") * 2
    with pytest.raises(ValueError, match="'w' twice"):
        read_params(twice, max_bytes=LIMIT)


@pytest.mark.parametrize("blob, reason", [
    (_header(1 << 60), "declares"),  # a count that would allocate before reading
    (_header(1) + _array((1 << 40, 1 << 20), data=b""), "needs"),  # dims beyond the file
    (_header(1) + _array((-1, 2), data=b""), "negative dimension"),
    (_header(1) + struct.pack("<Iii", 0xF993FAC9, 0, 1000) + b"\0" * 64, "ndim 1000"),
    (_header(1) + _array((1,), flag=12), "type flag 12"),
    (_header(1) + _array((1,), stype=1), "row_sparse"),
    (_header(1) + _array((1,), magic=0xF993FAC8), "magic"),
    (_header(1) + _array((1,)) + struct.pack("<QQ", 1, 1 << 50), "bytes long"),
    (_header(1) + _array((1,)) + struct.pack("<Q", 3), "1 arrays but 3 names"),
    (_header(1) + _array((1,)) + struct.pack("<QQ", 1, 1) + b"\xff", "UTF-8"),
    (_header(0) + struct.pack("<Q", 0) + b"x", "unexpected bytes"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_malformed_headers_are_named(blob, reason):
    with pytest.raises(ValueError, match=reason):
        read_arrays(blob)


def test_every_truncation_and_every_flipped_byte_is_a_value_error_or_a_valid_read():
    blob = write_params({"conv_weight": np.ones((2, 3), np.float32), "b": np.ones(2, np.int64)})
    for end in range(len(blob)):
        with pytest.raises(ValueError):
            read_params(blob[:end], max_bytes=LIMIT)
    rng = np.random.default_rng(0)
    for position in range(len(blob)):
        damaged = bytearray(blob)
        damaged[position] ^= int(rng.integers(1, 256))
        try:
            read_params(bytes(damaged), max_bytes=LIMIT)
        except ValueError:
            pass


@needs_mxnet
def test_files_travel_both_ways_with_mxnet(tmp_path):
    ours = tmp_path / "ours.params"
    theirs = tmp_path / "theirs.params"
    weights = {"w": np.arange(12, dtype=np.float32).reshape(3, 4),
               "h": np.array([1, 2], dtype=np.float16), "i": np.array([9], dtype=np.int64)}
    ours.write_bytes(write_params(weights))
    run = run_mxnet(f"""
loaded = nd.load({str(ours)!r})
for k, v in loaded.items():
    outputs[k] = v
result['dtypes'] = {{k: str(v.dtype) for k, v in loaded.items()}}
nd.save({str(theirs)!r}, {{'a': nd.array([[1, 2]], dtype='float64'), 'b': nd.ones((2, 1, 3))}})
""")
    assert run.json["dtypes"] == {"w": "<class 'numpy.float32'>",
                                  "h": "<class 'numpy.float16'>", "i": "<class 'numpy.int64'>"}
    for name, value in weights.items():
        np.testing.assert_array_equal(run[name], value)
    back = read_params(theirs.read_bytes(), max_bytes=LIMIT)
    assert back["a"].dtype == np.float64 and back["a"].tolist() == [[1, 2]]
    assert back["b"].shape == (2, 1, 3)
    # what we write is byte for byte what MXNet writes for the same arrays
    assert write_params(back) == theirs.read_bytes()


@needs_mxnet
def test_numpy_mode_files_of_mxnet_load_with_scalars_and_empty_arrays(tmp_path):
    path = tmp_path / "np.params"
    run_mxnet(f"""
mx.npx.set_np()
mx.npx.save({str(path)!r}, {{'s': mx.np.ones(()) * 2, 'm': mx.np.arange(6).reshape(2, 3),
                            'e': mx.np.zeros((0, 2))}})
""")
    blob = path.read_bytes()
    assert struct.unpack_from("<I", blob, 24)[0] == 0xF993FACA  # V3: numpy shape semantics
    back = read_params(blob, max_bytes=LIMIT)
    assert back["s"].shape == () and float(back["s"]) == 2.0
    assert back["m"].tolist() == [[0, 1, 2], [3, 4, 5]] and back["e"].shape == (0, 2)


def test_nd_save_writes_mxnets_format_and_nd_load_still_reads_older_npz_files(tmp_path):
    from engine import nd
    from engine.serialization import save_npz

    path = tmp_path / "w.params"
    nd.save(str(path), {"w": nd.ones((2, 2)), "i": nd.array([3], dtype="int32")})
    assert path.read_bytes()[:8] == struct.pack("<Q", 0x112)
    loaded = nd.load(str(path))
    assert loaded["w"].shape == (2, 2) and loaded["i"].dtype == np.int32
    buffer = io.BytesIO()
    nd.save(buffer, [nd.zeros((3,))])
    assert [a.shape for a in nd.load(buffer.getvalue())] == [(3,)]
    old = tmp_path / "old.params"  # what nd.save wrote before it wrote MXNet's format
    save_npz(str(old), {"000000": np.ones(2), "000001": np.zeros(1),
                        "__rudder_kind__": np.array("list")})
    assert [a.shape for a in nd.load(str(old))] == [(2,), (1,)]
    (tmp_path / "bad.params").write_bytes(_header(1) + b"\0" * 3)
    with pytest.raises(ValueError, match="corrupt MXNet params file"):
        nd.load(str(tmp_path / "bad.params"))
