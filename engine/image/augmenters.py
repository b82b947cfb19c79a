"""Image augmenters (``mx.image.*Aug`` and ``CreateAugmenter``): callables from an HWC image
NDArray to an augmented one, as ``ImageIter`` applies them.

Random choices draw from :mod:`engine.random`, so ``engine.random.seed`` repeats them. The
colour augmenters expect float data (``CreateAugmenter`` puts a ``CastAug`` before them), as
MXNet's do; their constants (luma weights, the ImageNet PCA basis, the YIQ matrices) are
MXNet's.

>>> import numpy as np
>>> from engine import nd
>>> augs = CreateAugmenter((3, 2, 2), mean=True)
>>> [type(a).__name__ for a in augs]
['CenterCropAug', 'CastAug', 'ColorNormalizeAug']
>>> out = nd.array(np.full((4, 4, 3), 124, np.uint8), dtype="uint8")
>>> for aug in augs:
...     out = aug(out)
>>> out.shape, out.dtype.__name__
((2, 2, 3), 'float32')
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy

from .. import random as _random
from ..ndarray.ndarray import NDArray
from . import (
    _get_interp_method,
    center_crop,
    color_normalize,
    imresize,
    random_crop,
    random_size_crop,
    resize_short,
)

_LUMA = (0.299, 0.587, 0.114)  # ITU-R 601 weights of R, G, B in the contrast/saturation gray
_GRAY = numpy.array([[0.21] * 3, [0.72] * 3, [0.07] * 3])  # RandomGrayAug's channel mix
_RGB_TO_YIQ = numpy.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321],
                           [0.211, -0.523, 0.311]])
_YIQ_TO_RGB = numpy.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647],
                           [1.0, -1.107, 1.705]])
# ImageNet's RGB principal components (AlexNet's "PCA noise")
_PCA_EIGVAL = numpy.array([55.46, 4.794, 1.148])
_PCA_EIGVEC = numpy.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                           [-0.5836, -0.6948, 0.4203]])
_IMAGENET_MEAN = (123.68, 116.28, 103.53)
_IMAGENET_STD = (58.395, 57.12, 57.375)


def _plain(value: Any) -> Any:
    """An argument as JSON can hold it (arrays become lists)."""
    if isinstance(value, NDArray):
        value = value.asnumpy()
    return value.tolist() if isinstance(value, numpy.ndarray) else value


def _uniform(low: float, high: float) -> float:
    return float(_random.generator().uniform(low, high))


def _happens(p: float) -> bool:
    return bool(_random.generator().random() < p)


class Augmenter:
    """Base augmenter: ``aug(src)`` returns the augmented image; ``dumps()`` describes it as
    JSON ``[class name in lower case, arguments]``."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = {key: _plain(value) for key, value in kwargs.items()}

    def dumps(self) -> Any:
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, src: NDArray) -> NDArray:
        raise NotImplementedError("an Augmenter subclass implements __call__")


class SequentialAug(Augmenter):
    """The augmenters ``ts`` one after the other."""

    def __init__(self, ts: list[Augmenter]) -> None:
        super().__init__()
        self.ts = ts

    def dumps(self) -> Any:
        return [type(self).__name__.lower(), [t.dumps() for t in self.ts]]

    def __call__(self, src: NDArray) -> NDArray:
        for aug in self.ts:
            src = aug(src)
        return src


class RandomOrderAug(SequentialAug):
    """The augmenters ``ts`` in a new random order on every call."""

    def __call__(self, src: NDArray) -> NDArray:
        order = _random.generator().permutation(len(self.ts))
        self.ts = [self.ts[i] for i in order]
        return super().__call__(src)


class _Sized(Augmenter):
    """An augmenter of one ``size`` and an interpolation method (resizes and crops)."""

    def __init__(self, size: Any, interp: int = 2) -> None:
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp


class ResizeAug(_Sized):
    """Resize so the shorter edge is ``size``."""

    def __call__(self, src: NDArray) -> NDArray:
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(_Sized):
    """Resize to ``size`` (width, height), whatever the aspect ratio."""

    def __call__(self, src: NDArray) -> NDArray:
        w, h = self.size
        method = _get_interp_method(self.interp, (src.shape[0], src.shape[1], h, w))
        return imresize(src, w, h, interp=method)


class RandomCropAug(_Sized):
    """A random ``size`` (width, height) crop."""

    def __call__(self, src: NDArray) -> NDArray:
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """A crop of random area (``area``: minimum fraction, or a (min, max) range) and aspect
    ratio (``ratio`` range), resized to ``size`` (width, height)."""

    def __init__(self, size: tuple[int, int], area: Any, ratio: tuple[float, float],
                 interp: int = 2, **kwargs: Any) -> None:
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        if "min_area" in kwargs:  # MXNet's earlier name for ``area``
            area = kwargs.pop("min_area")
        if kwargs:
            raise TypeError(f"RandomSizedCropAug got unexpected arguments {sorted(kwargs)}")
        self.size, self.area, self.ratio, self.interp = size, area, ratio, interp

    def __call__(self, src: NDArray) -> NDArray:
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class CenterCropAug(_Sized):
    """The central ``size`` (width, height) crop."""

    def __call__(self, src: NDArray) -> NDArray:
        return center_crop(src, self.size, self.interp)[0]


class _Jitter(Augmenter):
    """A colour jitter of one strength, named ``knob`` (MXNet's argument and attribute)."""

    knob = ""

    def __init__(self, strength: float) -> None:
        super().__init__(**{self.knob: strength})
        setattr(self, self.knob, strength)
        self.strength = strength

    def _offset(self) -> float:
        return _uniform(-self.strength, self.strength)


class BrightnessJitterAug(_Jitter):
    """Scale the pixels by a random factor in ``1 ± brightness``."""

    knob = "brightness"

    def __call__(self, src: NDArray) -> NDArray:
        src *= 1.0 + self._offset()
        return src


class ContrastJitterAug(_Jitter):
    """Blend with the image's mean luma by a random factor in ``1 ± contrast``."""

    knob = "contrast"

    def __call__(self, src: NDArray) -> NDArray:
        alpha = 1.0 + self._offset()
        luma = (src.asnumpy() * numpy.array(_LUMA, numpy.float32)).sum(axis=2).mean()
        src *= alpha
        src += float(luma * (1.0 - alpha))
        return src


class SaturationJitterAug(_Jitter):
    """Blend each pixel with its luma by a random factor in ``1 ± saturation``."""

    knob = "saturation"

    def __call__(self, src: NDArray) -> NDArray:
        alpha = 1.0 + self._offset()
        raw = src.asnumpy()
        luma = (raw * numpy.array(_LUMA, raw.dtype)).sum(axis=2, keepdims=True)
        src[:] = raw * alpha + luma * (1.0 - alpha)
        return src


class HueJitterAug(_Jitter):
    """Rotate the hue by a random angle in ``± hue`` half-turns (a linear map in YIQ)."""

    knob = "hue"

    def __call__(self, src: NDArray) -> NDArray:
        angle = self._offset() * math.pi
        cos, sin = math.cos(angle), math.sin(angle)
        rotate = numpy.array([[1.0, 0.0, 0.0], [0.0, cos, -sin], [0.0, sin, cos]])
        transform = (_YIQ_TO_RGB @ rotate @ _RGB_TO_YIQ).T
        raw = src.asnumpy()
        return NDArray(src.xp.asarray(raw @ transform.astype(raw.dtype)), src.context)


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter (those > 0), in random order."""

    def __init__(self, brightness: float, contrast: float, saturation: float) -> None:
        parts: list[Augmenter] = []
        if brightness > 0:
            parts.append(BrightnessJitterAug(brightness))
        if contrast > 0:
            parts.append(ContrastJitterAug(contrast))
        if saturation > 0:
            parts.append(SaturationJitterAug(saturation))
        super().__init__(parts)


class LightingAug(Augmenter):
    """AlexNet's PCA noise: add ``eigvec @ (alpha * eigval)``, alpha ~ N(0, alphastd)."""

    def __init__(self, alphastd: float, eigval: Any, eigvec: Any) -> None:
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd = alphastd
        self.eigval, self.eigvec = numpy.asarray(eigval), numpy.asarray(eigvec)

    def __call__(self, src: NDArray) -> NDArray:
        alpha = _random.generator().normal(0.0, self.alphastd, size=(3,))
        src += NDArray(src.xp.asarray((self.eigvec * alpha) @ self.eigval, src.dtype),
                       src.context)
        return src


class ColorNormalizeAug(Augmenter):
    """``(src - mean) / std`` per channel (either may be None)."""

    def __init__(self, mean: Any, std: Any) -> None:
        super().__init__(mean=mean, std=std)
        self.mean = _as_array(mean)
        self.std = _as_array(std)

    def __call__(self, src: NDArray) -> NDArray:
        return color_normalize(src, self.mean, self.std)


def _as_array(value: Any) -> NDArray | None:
    if value is None or isinstance(value, NDArray):
        return value
    from .. import nd

    return nd.array(value)


class _Sometimes(Augmenter):
    """An augmenter applied with probability ``p`` (``_apply`` does the work)."""

    def __init__(self, p: float) -> None:
        super().__init__(p=p)
        self.p = p

    def __call__(self, src: NDArray) -> NDArray:
        return self._apply(src) if _happens(self.p) else src

    def _apply(self, src: NDArray) -> NDArray:
        raise NotImplementedError


class RandomGrayAug(_Sometimes):
    """With probability ``p``, every channel becomes the image's gray (3 channels kept)."""

    def _apply(self, src: NDArray) -> NDArray:
        raw = src.asnumpy()
        return NDArray(src.xp.asarray(raw @ _GRAY.astype(raw.dtype)), src.context)


class HorizontalFlipAug(_Sometimes):
    """With probability ``p``, mirror the image left to right."""

    def _apply(self, src: NDArray) -> NDArray:
        return NDArray(src.raw[:, ::-1].copy(), src.context)


class CastAug(Augmenter):
    """Convert the pixels to ``typ`` (float32 by default)."""

    def __init__(self, typ: str = "float32") -> None:
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src: NDArray) -> NDArray:
        return src.astype(self.typ)


def CreateAugmenter(data_shape: tuple[int, int, int], resize: int = 0,  # noqa: N802
                    rand_crop: bool = False, rand_resize: bool = False,
                    rand_mirror: bool = False, mean: Any = None, std: Any = None,
                    brightness: float = 0, contrast: float = 0, saturation: float = 0,
                    hue: float = 0, pca_noise: float = 0, rand_gray: float = 0,
                    inter_method: int = 2) -> list[Augmenter]:
    """MXNet's standard augmenter list for images of ``data_shape`` (C, H, W): resize,
    crop (centre, random, or random-sized with ``rand_resize``), mirror, cast to float32,
    colour jitter, hue, PCA noise, gray, and normalisation (``mean``/``std`` True for
    ImageNet's values)."""
    augs: list[Augmenter] = []
    if resize > 0:
        augs.append(ResizeAug(resize, inter_method))
    crop = (data_shape[2], data_shape[1])
    if rand_resize:
        if not rand_crop:
            raise ValueError("CreateAugmenter: rand_resize needs rand_crop")
        augs.append(RandomSizedCropAug(crop, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        augs.append(RandomCropAug(crop, inter_method))
    else:
        augs.append(CenterCropAug(crop, inter_method))
    if rand_mirror:
        augs.append(HorizontalFlipAug(0.5))
    augs.append(CastAug())
    if brightness or contrast or saturation:
        augs.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        augs.append(HueJitterAug(hue))
    if pca_noise > 0:
        augs.append(LightingAug(pca_noise, _PCA_EIGVAL, _PCA_EIGVEC))
    if rand_gray > 0:
        augs.append(RandomGrayAug(rand_gray))
    mean = _channel_values(mean, _IMAGENET_MEAN, "mean")
    std = _channel_values(std, _IMAGENET_STD, "std")
    if mean is not None or std is not None:
        augs.append(ColorNormalizeAug(mean, std))
    return augs


def _channel_values(value: Any, default: tuple[float, ...], what: str) -> Any:
    if value is True:
        return _as_array(default)
    if value is not None and (not isinstance(value, (numpy.ndarray, NDArray))
                              or value.shape[0] not in (1, 3)):
        raise ValueError(f"CreateAugmenter: {what} must be True or an array of 1 or 3 values")
    return value


__all__ = [
    "Augmenter", "BrightnessJitterAug", "CastAug", "CenterCropAug", "ColorJitterAug",
    "ColorNormalizeAug", "ContrastJitterAug", "CreateAugmenter", "ForceResizeAug",
    "HorizontalFlipAug", "HueJitterAug", "LightingAug", "RandomCropAug", "RandomGrayAug",
    "RandomOrderAug", "RandomSizedCropAug", "ResizeAug", "SaturationJitterAug", "SequentialAug",
]
