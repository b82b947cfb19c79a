"""Image decoding, resizing and cropping (``mxnet.image``), on Pillow and numpy.

Functions take and return HWC uint8 NDArrays (numpy arrays are accepted too), RGB unless
said otherwise. Interpolation codes follow MXNet/OpenCV: 0 nearest, 1 bilinear,
2 bicubic, 3 area, 4 Lanczos, 9 auto (bicubic to enlarge, area to shrink), 10 random.

>>> import numpy as np
>>> from engine import image
>>> png = image.imencode(np.full((4, 6, 3), 200, np.uint8), ".png")
>>> img = image.imdecode(png)
>>> img.shape, image.imresize(img, 3, 2).shape
((4, 6, 3), (2, 3, 3))
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy

from .. import random as _random
from ..base import MXNetError, MXNetValueError
from ..context import cpu
from ..ndarray.ndarray import NDArray
from .codec import ImageDecodeError, decode, decode_bgr, encode, encode_bgr
from .resize import resize as _resize

_CPU = cpu()  # one context object for all the arrays made here (not one per image)


def _numpy(src: Any) -> numpy.ndarray:
    return src.asnumpy() if isinstance(src, NDArray) else numpy.asarray(src)


def _wrap(array: numpy.ndarray) -> NDArray:
    return NDArray(array, _CPU)  # decoded images live on the cpu, as in MXNet


def imdecode(buf: Any, flag: int = 1, to_rgb: int = 1, out: Any = None) -> NDArray:
    """Decode image bytes to an HWC uint8 NDArray: 3 channels (``flag=1``) or 1 (``flag=0``);
    RGB unless ``to_rgb=0`` (then BGR, as OpenCV)."""
    data = buf.asnumpy().tobytes() if isinstance(buf, NDArray) else bytes(buf)
    array = decode(data, 1 if flag else 0)
    if not to_rgb and array.shape[2] == 3:
        array = numpy.ascontiguousarray(array[:, :, ::-1])
    return _wrap(array)


def imread(filename: str | os.PathLike[str], flag: int = 1, to_rgb: int = 1,
           out: Any = None) -> NDArray:
    """Read and decode an image file (see :func:`imdecode`)."""
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except FileNotFoundError as err:
        raise ImageNotFoundError(f"imread: no image file {os.fspath(filename)!r}") from err
    return imdecode(data, flag, to_rgb)


def imencode(img: Any, img_fmt: str = ".jpg", quality: int = 95) -> bytes:
    """Encode an HWC uint8 RGB image as JPEG (``quality`` 1-100) or PNG bytes."""
    return encode(_numpy(img), img_fmt, quality)


class ImageNotFoundError(MXNetError, FileNotFoundError):
    """``imread`` of a file that does not exist (MXNet raises MXNetError)."""


# OpenCV's codes that MXNet's imresize passes through: 5 is OpenCV's bit-exact bilinear
_RESIZE_CODES = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 1}


def imresize(src: Any, w: int, h: int, interp: int = 1, out: Any = None) -> NDArray:
    """Resize to width ``w`` and height ``h`` with interpolation ``interp`` (0 to 5; the
    augmenters' 9 and 10 are resolved before they call this, as in MXNet)."""
    if interp not in _RESIZE_CODES:
        raise MXNetValueError(f"imresize: unknown interpolation method {interp}")
    return _wrap(_resize(_numpy(src), w, h, _RESIZE_CODES[interp]))


def scale_down(src_size: tuple[int, int], size: tuple[int, int]) -> tuple[int, int]:
    """Shrink crop ``size`` (w, h) to fit ``src_size`` (w, h), keeping its aspect ratio."""
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def _get_interp_method(interp: int, sizes: tuple[int, int, int, int] | tuple[()] = ()) -> int:
    if interp == 9:
        if not sizes:
            return 2
        oh, ow, nh, nw = sizes
        if nh > oh and nw > ow:
            return 2
        if nh < oh and nw < ow:
            return 3
        return 1
    if interp == 10:
        return int(_random.generator().integers(0, 5))
    if interp not in _RESIZE_CODES:
        raise MXNetValueError(f"Unknown interp method {interp}")
    return _RESIZE_CODES[interp]


def resize_short(src: Any, size: int, interp: int = 2) -> NDArray:
    """Resize so the shorter edge is ``size``, keeping the aspect ratio."""
    h, w = _numpy(src).shape[:2]
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    return imresize(src, new_w, new_h, _get_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src: Any, x0: int, y0: int, w: int, h: int,
               size: tuple[int, int] | None = None, interp: int = 2) -> NDArray:
    """Crop the box (x0, y0, w, h) and, with ``size`` (w, h), resize it."""
    out = _numpy(src)[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        method = _get_interp_method(interp, (h, w, size[1], size[0]))
        out = _resize(out, size[0], size[1], method)
    return _wrap(numpy.ascontiguousarray(out))


def random_crop(src: Any, size: tuple[int, int], interp: int = 2) -> tuple[NDArray, tuple]:
    """A random ``size`` (w, h) crop (upsampled if the image is smaller), and its box."""
    h, w = _numpy(src).shape[:2]
    new_w, new_h = scale_down((w, h), size)
    rng = _random.generator()
    x0 = int(rng.integers(0, w - new_w + 1))
    y0 = int(rng.integers(0, h - new_h + 1))
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def center_crop(src: Any, size: tuple[int, int], interp: int = 2) -> tuple[NDArray, tuple]:
    """The central ``size`` (w, h) crop (upsampled if the image is smaller), and its box."""
    h, w = _numpy(src).shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0 = int((w - new_w) / 2)
    y0 = int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def random_size_crop(src: Any, size: tuple[int, int], area: Any, ratio: tuple[float, float],
                     interp: int = 2) -> tuple[NDArray, tuple]:
    """A crop of random area (fraction ``area``) and aspect ratio (``ratio``, sampled in log
    space) resized to ``size``; after 10 failed draws, the center crop."""
    h, w = _numpy(src).shape[:2]
    if isinstance(area, (int, float)):
        area = (area, 1.0)
    rng = _random.generator()
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = rng.uniform(area[0], area[1]) * h * w
        new_ratio = math.exp(rng.uniform(*log_ratio))
        new_w = int(round(math.sqrt(target_area * new_ratio)))
        new_h = int(round(math.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = int(rng.integers(0, w - new_w + 1))
            y0 = int(rng.integers(0, h - new_h + 1))
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)


def color_normalize(src: Any, mean: Any, std: Any = None) -> Any:
    """``(src - mean) / std``."""
    if mean is not None:
        src = src - mean
    if std is not None:
        src = src / std
    return src


# isort: split
from . import image  # noqa: E402 - mx.image.image, MXNet's module of the same API
from .augmenters import (  # noqa: E402 - they use the functions above
    Augmenter,
    BrightnessJitterAug,
    CastAug,
    CenterCropAug,
    ColorJitterAug,
    ColorNormalizeAug,
    ContrastJitterAug,
    CreateAugmenter,
    ForceResizeAug,
    HorizontalFlipAug,
    HueJitterAug,
    LightingAug,
    RandomCropAug,
    RandomGrayAug,
    RandomOrderAug,
    RandomSizedCropAug,
    ResizeAug,
    SaturationJitterAug,
    SequentialAug,
)
from .image_iter import ImageIter  # noqa: E402

__all__ = [
    "Augmenter", "BrightnessJitterAug", "CastAug", "CenterCropAug", "ColorJitterAug",
    "ColorNormalizeAug", "ContrastJitterAug", "CreateAugmenter", "ForceResizeAug",
    "HorizontalFlipAug", "HueJitterAug", "ImageIter", "LightingAug", "RandomCropAug",
    "RandomGrayAug", "RandomOrderAug", "RandomSizedCropAug", "ResizeAug",
    "SaturationJitterAug", "SequentialAug", "image",
    "ImageDecodeError", "ImageNotFoundError", "center_crop", "color_normalize", "decode",
    "decode_bgr", "encode", "encode_bgr", "fixed_crop", "imdecode", "imencode", "imread",
    "imresize", "random_crop", "random_size_crop", "resize_short", "scale_down",
]
