"""gluon.data.vision datasets: standard files from a local root, image folders and records
read as MXNet 1.9.1 reads them."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from engine import image, recordio
from engine.gluon.data import DataLoader
from engine.gluon.data.vision import (
    CIFAR10,
    CIFAR100,
    MNIST,
    FashionMNIST,
    ImageFolderDataset,
    ImageListDataset,
    ImageRecordDataset,
    transforms,
)
from tests.oracle import needs_mxnet, run_mxnet


def write_idx(path, magic, array):
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", n) for n in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_mnist_reads_the_standard_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 7)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", 2051, images)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", 2049, labels)
    ds = MNIST(str(tmp_path), train=False)
    assert len(ds) == 7
    img, label = ds[3]
    assert img.shape == (28, 28, 1) and img.dtype == np.uint8
    np.testing.assert_array_equal(img.asnumpy()[:, :, 0], images[3])
    assert label == labels[3] and label.dtype == np.int32
    fashion = FashionMNIST(str(tmp_path), train=False,
                           transform=lambda d, lab: (d.astype("float32") / 255, lab))
    assert float(fashion[0][0].asnumpy().max()) <= 1.0


def test_missing_files_are_named(tmp_path):
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", 2049, np.zeros(3))
    with pytest.raises(FileNotFoundError, match=r"lacks train-images-idx3-ubyte\.gz \("):
        MNIST(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="data_batch_1.bin, data_batch_2.bin"):
        CIFAR10(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="lacks test.bin"):
        CIFAR100(str(tmp_path), train=False)


def test_a_wrong_idx_header_is_refused(tmp_path):
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", 2049, np.zeros((2, 28, 28)))
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", 2049, np.zeros(2))
    with pytest.raises(ValueError, match="not an IDX file with magic 2051"):
        MNIST(str(tmp_path), train=False)


def test_cifar_binary_batches_become_hwc_rgb(tmp_path):
    rng = np.random.default_rng(1)
    planes = rng.integers(0, 256, (4, 3, 32, 32), dtype=np.uint8)
    rows = np.concatenate([np.arange(4, dtype=np.uint8)[:, None], planes.reshape(4, -1)], 1)
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    (folder / "test_batch.bin").write_bytes(rows.tobytes())
    ds = CIFAR10(str(tmp_path), train=False)
    img, label = ds[2]
    np.testing.assert_array_equal(img.asnumpy(), planes[2].transpose(1, 2, 0))
    assert label == 2
    rows100 = np.concatenate([np.full((4, 1), 3, np.uint8), np.arange(4, dtype=np.uint8)[:, None]
                              + 50, planes.reshape(4, -1)], 1)
    (tmp_path / "train.bin").write_bytes(rows100.tobytes())
    assert CIFAR100(str(tmp_path))[1][1] == 3
    assert CIFAR100(str(tmp_path), fine_label=True)[1][1] == 51


def make_folder(root):
    rng = np.random.default_rng(2)
    pictures = {}
    for cls in ("zebra", "Apple", "cat"):
        (root / cls).mkdir(parents=True)
        for name in ("b.png", "a.PNG", "c.jpg"):
            pixels = rng.integers(0, 256, (6 + len(cls), 9, 3), dtype=np.uint8)
            fmt = ".jpg" if name.endswith("jpg") else ".png"
            (root / cls / name).write_bytes(image.imencode(pixels, fmt, 95))
            pictures[f"{cls}/{name}"] = pixels
    (root / "cat" / "notes.txt").write_text("not an image")
    (root / "README").write_text("a file, not a class")
    return pictures


@needs_mxnet
def test_image_folder_order_labels_and_pixels_match_mxnet(tmp_path):
    make_folder(tmp_path)
    with pytest.warns(UserWarning, match="Ignoring"):
        ds = ImageFolderDataset(str(tmp_path))
    run = run_mxnet(
        "import warnings\nwarnings.simplefilter('ignore')\n"
        f"ds = gluon.data.vision.ImageFolderDataset({str(tmp_path)!r})\n"
        "result['synsets'] = ds.synsets\n"
        "result['items'] = [[p, int(l)] for p, l in ds.items]\n"
        "for i in range(len(ds)):\n"
        "    outputs['img%d' % i] = ds[i][0]\n"
        f"gray = gluon.data.vision.ImageFolderDataset({str(tmp_path)!r}, flag=0)\n"
        "outputs['gray0'] = gray[0][0]\n"
    )
    assert ds.synsets == run.json["synsets"] == ["Apple", "cat", "zebra"]
    assert [[p, lab] for p, lab in ds.items] == run.json["items"]
    for i in range(len(ds)):
        ours, theirs = ds[i][0].asnumpy().astype(int), run[f"img{i}"].astype(int)
        tolerance = 1 if ds.items[i][0].endswith(".jpg") else 0
        assert np.abs(ours - theirs).max() <= tolerance, ds.items[i][0]
    with pytest.warns(UserWarning):
        gray = ImageFolderDataset(str(tmp_path), flag=0)[0][0].asnumpy()
    assert gray.shape == run["gray0"].shape
    assert np.abs(gray.astype(int) - run["gray0"].astype(int)).max() <= 1


def write_records(folder, n=6):
    rng = np.random.default_rng(3)
    rgb = [rng.integers(0, 256, (10 + i, 12, 3), dtype=np.uint8) for i in range(n)]
    writer = recordio.MXIndexedRecordIO(folder / "d.idx", folder / "d.rec", "w")
    for i, pixels in enumerate(rgb):
        label = float(i % 3) if i % 2 else [float(i), 0.5]
        fmt = ".png" if i < n // 2 else ".jpg"
        writer.write_idx(i, recordio.pack_img((0, label, i, 0), pixels[:, :, ::-1],
                                              quality=95, img_fmt=fmt))
    writer.close()
    return rgb


@needs_mxnet
def test_image_records_read_like_mxnets_image_record_dataset(tmp_path):
    rgb = write_records(tmp_path)
    run = run_mxnet(
        f"ds = gluon.data.vision.ImageRecordDataset({str(tmp_path / 'd.rec')!r})\n"
        "result['n'] = len(ds)\n"
        "for i in range(len(ds)):\n"
        "    img, label = ds[i]\n"
        "    outputs['img%d' % i] = img\n"
        "    outputs['label%d' % i] = np.atleast_1d(np.asarray(label, dtype='float32'))\n"
    )
    ds = ImageRecordDataset(str(tmp_path / "d.rec"))
    assert len(ds) == run.json["n"] == 6
    for i in range(len(ds)):
        img, label = ds[i]
        np.testing.assert_array_equal(np.atleast_1d(np.asarray(label, np.float32)),
                                      run[f"label{i}"])
        tolerance = 0 if i < 3 else 1
        assert np.abs(img.asnumpy().astype(int) - run[f"img{i}"].astype(int)).max() <= tolerance
        if i < 3:
            np.testing.assert_array_equal(img.asnumpy(), rgb[i])


def test_image_records_feed_a_dataloader_with_transforms(tmp_path):
    write_records(tmp_path)
    ds = ImageRecordDataset(str(tmp_path / "d.rec"),
                            transform=lambda d, lab: (d, np.float32(np.atleast_1d(lab)[0])))
    pipeline = transforms.Compose([transforms.Resize(8), transforms.ToTensor()])
    loader = DataLoader(ds.transform_first(pipeline), batch_size=4, num_workers=2)
    batches = list(loader)
    assert [b[0].shape for b in batches] == [(4, 3, 8, 8), (2, 3, 8, 8)]
    assert batches[0][1].asnumpy().tolist() == [0.0, 1.0, 2.0, 0.0]


def test_image_list_from_a_lst_file_and_from_a_list(tmp_path):
    pixels = np.full((5, 4, 3), 77, np.uint8)
    (tmp_path / "x.png").write_bytes(image.imencode(pixels, ".png"))
    (tmp_path / "data.lst").write_text("0\t2\t0.5\tx.png\n1\t1\t1.5\tx.png\n")
    ds = ImageListDataset(str(tmp_path), "data.lst")
    img, label = ds[1]
    np.testing.assert_array_equal(img.asnumpy(), pixels)
    assert label.asnumpy().tolist() == [1.0, 1.5]
    listed = ImageListDataset(str(tmp_path), [[3, "x.png"], [1.0, 2.0, "x.png"]])
    assert [listed[i][1].asnumpy().tolist() for i in range(2)] == [[3.0], [1.0, 2.0]]
    (tmp_path / "bad.lst").write_text("0\tx.png\n")
    with pytest.raises(ValueError, match="bad.lst:1: expected"):
        ImageListDataset(str(tmp_path), "bad.lst")


def test_undecodable_bytes_are_a_clear_error():
    with pytest.raises(image.ImageDecodeError, match="cannot decode image"):
        image.imdecode(b"definitely not an image")
