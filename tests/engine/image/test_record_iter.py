"""engine.io.ImageRecordIter: MXNet 1.9.1's batches for the same .rec and parameters."""

from __future__ import annotations

import numpy as np
import pytest

from engine import recordio
from engine.io import ImageRecordIter
from tests.oracle import needs_mxnet, run_mxnet

MEAN = (125.3, 123.0, 113.9)
STD = (63.0, 62.1, 66.7)


def write_rec(folder, count=11, fmt=".png", shapes=None):
    rng = np.random.default_rng(4)
    path = str(folder / "imgs.rec")
    writer = recordio.MXIndexedRecordIO(path[:-4] + ".idx", path, "w")
    images = []
    for i in range(count):
        h, w = shapes[i % len(shapes)] if shapes else (12, 14)
        rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        images.append(rgb)
        writer.write_idx(i, recordio.pack_img((0, float(i), i, 0), rgb[:, :, ::-1],
                                              quality=95, img_fmt=fmt))
    writer.close()
    return path, images


def collect(it, passes=2):
    out = []
    for _ in range(passes):
        out.append([(b.data[0].asnumpy(), b.label[0].asnumpy(), b.pad) for b in it])
        it.reset()
    return out


MX_CODE = """
it = mx.io.ImageRecordIter(**{kwargs})
for p in range(2):
    n = 0
    for b in it:
        outputs['d%d_%d' % (p, n)] = b.data[0].asnumpy()  # MXNet reuses its buffers
        outputs['l%d_%d' % (p, n)] = b.label[0].asnumpy()
        result['pad%d_%d' % (p, n)] = b.pad
        n += 1
    result['n%d' % p] = n
    it.reset()
"""


def compare_with_mxnet(kwargs, tolerance):
    run = run_mxnet(MX_CODE.replace("{kwargs}", repr(kwargs)))
    ours = collect(ImageRecordIter(**kwargs))
    for p in range(2):
        assert len(ours[p]) == run.json[f"n{p}"], f"pass {p}"
        for n, (data, label, pad) in enumerate(ours[p]):
            if kwargs.get("round_batch", True):
                assert pad == run.json[f"pad{p}_{n}"]
            # without round_batch MXNet reports pad 0 over a tail of stale data; the engine
            # fills the tail from the start and reports the true pad
            np.testing.assert_array_equal(label, run[f"l{p}_{n}"])
            theirs = run[f"d{p}_{n}"]
            assert data.shape == theirs.shape and data.dtype == np.float32
            valid = slice(0, len(data) - pad)  # MXNet leaves stale data in the padding
            np.testing.assert_allclose(data[valid], theirs[valid], rtol=0, atol=tolerance)


@needs_mxnet
def test_center_crops_normalised_like_mxnet_with_round_batch_padding(tmp_path):
    path, _ = write_rec(tmp_path)
    kwargs = dict(path_imgrec=path, path_imgidx=path[:-4] + ".idx", data_shape=(3, 10, 8),
                  batch_size=4, mean_r=MEAN[0], mean_g=MEAN[1], mean_b=MEAN[2],
                  std_r=STD[0], std_g=STD[1], std_b=STD[2], preprocess_threads=2)
    compare_with_mxnet(kwargs, tolerance=0)  # PNG decodes exactly; the arithmetic is exact


@needs_mxnet
def test_resize_and_enlarging_small_images_within_one_level(tmp_path):
    path, _ = write_rec(tmp_path, count=6, fmt=".jpg", shapes=[(20, 30), (9, 7), (16, 16)])
    kwargs = dict(path_imgrec=path, data_shape=(3, 12, 12), batch_size=3, resize=14,
                  scale=1 / 255, round_batch=False, preprocess_threads=1)
    compare_with_mxnet(kwargs, tolerance=1 / 255 + 1e-6)


def test_random_crops_and_mirrors_are_crops_of_the_image(tmp_path):
    path, images = write_rec(tmp_path, count=8)
    it = ImageRecordIter(path_imgrec=path, data_shape=(3, 9, 9), batch_size=8, rand_crop=True,
                         rand_mirror=True, preprocess_threads=2)
    (data, label, pad), = collect(it, passes=1)[0]
    mirrored = 0
    for img, source in zip(data, images, strict=True):
        hwc = img.transpose(1, 2, 0)
        windows = [source[y:y + 9, x:x + 9] for y in range(4) for x in range(6)]
        plain = any(np.array_equal(hwc, w) for w in windows)
        flipped = any(np.array_equal(hwc, w[:, ::-1]) for w in windows)
        assert plain or flipped
        mirrored += flipped and not plain
    assert 0 < mirrored < 8
    it.close()


def test_multi_labels_shuffle_and_parts(tmp_path):
    path = str(tmp_path / "m.rec")
    writer = recordio.MXIndexedRecordIO(path[:-4] + ".idx", path, "w")
    for i in range(10):
        writer.write_idx(i, recordio.pack_img((0, [i, -i], i, 0), np.zeros((4, 4, 3), np.uint8),
                                              img_fmt=".png"))
    writer.close()
    it = ImageRecordIter(path_imgrec=path, data_shape=(3, 4, 4), batch_size=5, label_width=2,
                         shuffle=True, preprocess_threads=0)
    labels = np.concatenate([b.label[0].asnumpy() for b in it])
    assert labels.shape == (10, 2) and sorted(labels[:, 0]) == list(range(10))
    part = ImageRecordIter(path_imgrec=path, data_shape=(3, 4, 4), batch_size=5, label_width=2,
                           num_parts=2, part_index=1, preprocess_threads=0)
    assert [b.label[0].asnumpy()[:, 0].tolist() for b in part] == [[5, 6, 7, 8, 9]]
    with pytest.raises(ValueError, match="2-dimensional label but label_width is set to 1"):
        next(ImageRecordIter(path_imgrec=path, data_shape=(3, 4, 4), batch_size=5,
                             preprocess_threads=0))


def test_unsupported_parameters_are_refused_by_name(tmp_path):
    path, _ = write_rec(tmp_path, count=4)
    with pytest.raises(ValueError, match="max_rotate_angle=10 is not supported"):
        ImageRecordIter(path_imgrec=path, data_shape=(3, 8, 8), batch_size=2,
                        max_rotate_angle=10)
    with pytest.raises(TypeError, match="unexpected argument 'colour'"):
        ImageRecordIter(path_imgrec=path, data_shape=(3, 8, 8), batch_size=2, colour=1)
    with pytest.raises(ValueError, match="data_shape must be"):
        ImageRecordIter(path_imgrec=path, data_shape=(8, 8), batch_size=2)
    it = ImageRecordIter(path_imgrec=path, data_shape=(3, 30, 8), batch_size=2,
                         preprocess_threads=0)
    assert next(it).data[0].shape == (2, 3, 30, 8)  # enlarged to fit, as MXNet does


@needs_mxnet
def test_grayscale_batches_within_one_level(tmp_path):
    path, _ = write_rec(tmp_path, count=4, fmt=".jpg")
    kwargs = dict(path_imgrec=path, data_shape=(1, 10, 10), batch_size=4, mean_r=100.0,
                  std_r=50.0, preprocess_threads=1)
    compare_with_mxnet(kwargs, tolerance=1 / 50 + 1e-6)


def test_module_fit_learns_from_image_records(tmp_path):
    import engine as mx

    path = str(tmp_path / "two.rec")
    writer = recordio.MXIndexedRecordIO(path[:-4] + ".idx", path, "w")
    for i in range(64):  # class 1 is bright, class 0 dark
        pixels = np.full((10, 10, 3), 200 * (i % 2), np.uint8)
        writer.write_idx(i, recordio.pack_img((0, float(i % 2), i, 0), pixels, img_fmt=".png"))
    writer.close()
    it = ImageRecordIter(path_imgrec=path, data_shape=(3, 8, 8), batch_size=16, rand_crop=True,
                         rand_mirror=True, scale=1 / 255, preprocess_threads=2)
    net = mx.sym.FullyConnected(mx.sym.flatten(mx.sym.Variable("data")), num_hidden=2)
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(net, name="softmax"), context=mx.cpu())
    mod.fit(it, num_epoch=3, optimizer="sgd", optimizer_params={"learning_rate": 0.5})
    it.reset()
    assert mod.score(it, "acc")[0][1] == 1.0
    it.close()


@needs_mxnet
def test_uint8_iterator_gives_mxnets_raw_pixels(tmp_path):
    path, _ = write_rec(tmp_path, count=6)
    kwargs = dict(path_imgrec=path, data_shape=(3, 9, 11), batch_size=3, preprocess_threads=1)
    run = run_mxnet(
        f"it = mx.io.ImageRecordUInt8Iter(**{kwargs!r})\n"
        "outputs['d'] = np.concatenate([b.data[0].asnumpy() for b in it])\n")
    from engine.io import ImageRecordUInt8Iter

    ours = np.concatenate([b.data[0].asnumpy() for b in ImageRecordUInt8Iter(**kwargs)])
    assert ours.dtype == np.uint8 == run["d"].dtype
    np.testing.assert_array_equal(ours, run["d"])
