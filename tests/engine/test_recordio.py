"""engine.recordio: the same bytes as MXNet 1.9.1, both ways, and strict reading."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from engine import recordio
from engine.gluon.data import RecordFileDataset
from engine.recordio import IRHeader, RecordIOError
from tests.oracle import needs_mxnet, run_mxnet

MAGIC = struct.pack("<I", 0xCED7230A)

# Payloads that exercise every writer path: empty, unpadded lengths, the magic number at
# an aligned offset (split into parts), at an unaligned one (kept whole), twice in a row,
# at the very start and at the very end.
PAYLOADS = [
    b"",
    b"a",
    b"abcd",
    b"hello world",
    b"abcd" + MAGIC + b"efg",
    b"ab" + MAGIC + b"cd",
    MAGIC + MAGIC + b"x",
    b"1234" + MAGIC,
    MAGIC,
    bytes(range(256)) * 3,
]


def write_engine(folder, payloads):
    rec, idx = folder / "engine.rec", folder / "engine.idx"
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    for i, payload in enumerate(payloads):
        writer.write_idx(i, payload)
    writer.close()
    return rec, idx


def as_arrays(payloads):
    return {f"p{i}": np.frombuffer(p, np.uint8) for i, p in enumerate(payloads)}


def test_round_trip_with_split_records(tmp_path):
    rec, idx = write_engine(tmp_path, PAYLOADS)
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    assert [reader.read_idx(i) for i in reversed(range(len(PAYLOADS)))] == PAYLOADS[::-1]
    sequential = recordio.MXRecordIO(rec, "r")
    assert [sequential.read() for _ in PAYLOADS] == PAYLOADS
    assert sequential.read() is None


def test_the_dataset_reads_every_record_as_the_indexed_reader_does(tmp_path):
    # RecordFileDataset reads a whole record in one go; split ones take the careful path
    rec, idx = write_engine(tmp_path, PAYLOADS)
    dataset = RecordFileDataset(str(rec))
    order = list(reversed(range(len(PAYLOADS))))
    assert [dataset[i] for i in order] == [PAYLOADS[i] for i in order]


def test_the_dataset_reports_corrupt_and_truncated_records(tmp_path):
    rec, idx = write_engine(tmp_path, [b"first", b"second record", b"x" * 40])
    raw = bytearray(rec.read_bytes())
    raw[16:20] = b"ZZZZ"  # the second record's magic
    rec.write_bytes(bytes(raw[:-10]))  # and the third loses its end
    dataset = RecordFileDataset(str(rec))
    assert dataset[0] == b"first"
    with pytest.raises(RecordIOError, match="offset 16: bad magic"):
        dataset[1]
    with pytest.raises(RecordIOError, match="truncated record at offset 40"):
        dataset[2]


def test_a_payload_with_an_aligned_magic_is_split_in_the_file(tmp_path):
    writer = recordio.MXRecordIO(tmp_path / "a.rec", "w")
    writer.write(b"abcd" + MAGIC + b"ef")
    writer.close()
    raw = (tmp_path / "a.rec").read_bytes()
    first = struct.unpack("<I", raw[4:8])[0]
    assert first >> 29 == 1 and first & (2**29 - 1) == 4  # "abcd", then a continuation
    assert len(raw) % 4 == 0


@needs_mxnet
def test_files_are_byte_identical_to_mxnets(tmp_path):
    rec, idx = write_engine(tmp_path, PAYLOADS)
    run = run_mxnet(
        f"w = mx.recordio.MXIndexedRecordIO({str(tmp_path / 'mx.idx')!r}, "
        f"{str(tmp_path / 'mx.rec')!r}, 'w')\n"
        f"for i in range({len(PAYLOADS)}):\n"
        "    w.write_idx(i, inputs['p%d' % i].tobytes())\n"
        "w.close()\n",
        as_arrays(PAYLOADS),
    )
    assert run is not None
    assert rec.read_bytes() == (tmp_path / "mx.rec").read_bytes()
    assert idx.read_text() == (tmp_path / "mx.idx").read_text()


@needs_mxnet
def test_mxnet_reads_what_the_engine_wrote_and_the_engine_reads_mxnets(tmp_path):
    rec, idx = write_engine(tmp_path, PAYLOADS)
    order = [3, 0, 9, 4, 6]
    run = run_mxnet(
        f"r = mx.recordio.MXIndexedRecordIO({str(idx)!r}, {str(rec)!r}, 'r')\n"
        f"for i in {order}:\n"
        "    outputs['r%d' % i] = np.frombuffer(r.read_idx(i), np.uint8)\n"
        "header = mx.recordio.IRHeader(0, [1.5, 2.5, 3.0], 7, 9)\n"
        f"w = mx.recordio.MXIndexedRecordIO({str(tmp_path / 'mx.idx')!r}, "
        f"{str(tmp_path / 'mx.rec')!r}, 'w')\n"
        "w.write_idx(0, mx.recordio.pack(header, inputs['p4'].tobytes()))\n"
        "w.write_idx(1, mx.recordio.pack(mx.recordio.IRHeader(0, 4.0, 1, 0), b'xyz'))\n"
        "w.close()\n",
        as_arrays(PAYLOADS),
    )
    for i in order:
        assert run[f"r{i}"].tobytes() == PAYLOADS[i]
    reader = recordio.MXIndexedRecordIO(tmp_path / "mx.idx", tmp_path / "mx.rec", "r")
    header, payload = recordio.unpack(reader.read_idx(0))
    assert header.flag == 3 and (header.id, header.id2) == (7, 9)
    np.testing.assert_array_equal(header.label, np.array([1.5, 2.5, 3.0], np.float32))
    assert payload == PAYLOADS[4]
    header, payload = recordio.unpack(reader.read_idx(1))
    assert (header.flag, header.label, payload) == (0, 4.0, b"xyz")


@needs_mxnet
def test_pack_matches_mxnets_bytes():
    headers = [IRHeader(0, 3.0, 11, 0), IRHeader(0, [1.0, 2.0], 5, 6)]
    run = run_mxnet(
        "outputs['a'] = np.frombuffer(mx.recordio.pack(mx.recordio.IRHeader(0, 3.0, 11, 0), "
        "b'img'), np.uint8)\n"
        "outputs['b'] = np.frombuffer(mx.recordio.pack(mx.recordio.IRHeader(0, [1.0, 2.0], "
        "5, 6), b'img'), np.uint8)\n"
    )
    assert recordio.pack(headers[0], b"img") == run["a"].tobytes()
    assert recordio.pack(headers[1], b"img") == run["b"].tobytes()


def test_bgr_images_round_trip_through_png(tmp_path):
    rng = np.random.default_rng(0)
    bgr = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    header, img = recordio.unpack_img(recordio.pack_img(IRHeader(0, 1.0, 0, 0), bgr,
                                                        img_fmt=".png"))
    np.testing.assert_array_equal(img, bgr)
    gray = rng.integers(0, 256, (4, 4), dtype=np.uint8)
    _, img = recordio.unpack_img(recordio.pack_img((0, 2.0, 1, 0), gray, img_fmt=".png"))
    np.testing.assert_array_equal(img, gray)


@needs_mxnet
def test_mxnet_decodes_engine_packed_images_to_the_same_pixels(tmp_path):
    rng = np.random.default_rng(1)
    smooth = np.clip(np.add.outer(np.arange(24), np.arange(32))[:, :, None] * [3, 5, 7]
                     + rng.integers(0, 20, (24, 32, 3)), 0, 255).astype(np.uint8)
    records = {
        "png": recordio.pack_img((0, 1.0, 0, 0), smooth, img_fmt=".png"),
        "jpg": recordio.pack_img((0, 1.0, 0, 0), smooth, quality=90),
    }
    run = run_mxnet(
        "for name in ('png', 'jpg'):\n"
        "    header, payload = mx.recordio.unpack(inputs[name].tobytes())\n"
        "    outputs[name] = mx.image.imdecode(payload, to_rgb=0)\n"  # BGR, like cv2
        "    outputs[name + '_gray'] = mx.image.imdecode(payload, flag=0)\n",
        {k: np.frombuffer(v, np.uint8) for k, v in records.items()},
    )
    _, png = recordio.unpack_img(records["png"])
    np.testing.assert_array_equal(png, run["png"])
    np.testing.assert_array_equal(png, smooth)
    _, jpg = recordio.unpack_img(records["jpg"])
    assert np.abs(jpg.astype(int) - run["jpg"].astype(int)).max() <= 1
    _, gray = recordio.unpack_img(records["jpg"], iscolor=0)
    assert np.abs(gray.astype(int) - run["jpg_gray"][:, :, 0].astype(int)).max() <= 1


def test_a_corrupt_record_is_reported_with_its_offset(tmp_path):
    rec, idx = write_engine(tmp_path, [b"first", b"second record"])
    raw = bytearray(rec.read_bytes())
    raw[16:20] = b"ZZZZ"  # the second record's magic (the first is 8 + 8 bytes: "first" padded)
    rec.write_bytes(bytes(raw))
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    assert reader.read_idx(0) == b"first"
    with pytest.raises(RecordIOError, match="offset 16: bad magic"):
        reader.read_idx(1)


def test_a_truncated_file_and_an_index_past_the_end_are_refused(tmp_path):
    rec, idx = write_engine(tmp_path, [b"x" * 40, b"y" * 40])
    rec.write_bytes(rec.read_bytes()[:-10])
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    with pytest.raises(RecordIOError, match="truncated record at offset 48"):
        reader.read_idx(1)
    idx.write_text("0\t0\n1\t4096\n")
    with pytest.raises(RecordIOError, match="offset 4096 of key 1 points past the end"):
        recordio.MXIndexedRecordIO(idx, rec, "r")
    idx.write_text("0\tzero\n")
    with pytest.raises(RecordIOError, match="engine.idx:1: expected 'key<TAB>offset'"):
        recordio.MXIndexedRecordIO(idx, rec, "r")


def test_unpack_refuses_short_records():
    with pytest.raises(RecordIOError, match="shorter than its 24-byte header"):
        recordio.unpack(b"abc")
    with pytest.raises(RecordIOError, match="announces 5 labels"):
        recordio.unpack(struct.pack("<IfQQ", 5, 0.0, 0, 0) + b"\0" * 8)
