"""Image transforms (``mxnet.gluon.data.vision.transforms``) with MXNet 1.9.1's numbers.

Each transform is a Block taking an HWC image (ToTensor and Normalize: CHW) as an NDArray
or a numpy array and returning the same kind. Deterministic steps give MXNet's exact
values (see :mod:`.image_ops`); random ones draw from ``engine.random``, so
``engine.random.seed`` makes them repeatable (MXNet's own draws cannot be reproduced).

>>> import numpy as np
>>> from engine.gluon.data.vision import transforms
>>> t = transforms.Compose([transforms.Resize(4), transforms.ToTensor(),
...                         transforms.Normalize(0.5, 0.25)])
>>> t(np.full((8, 6, 3), 255, np.uint8)).shape
(3, 4, 4)
>>> type(transforms.create("randomflipleftright")).__name__
'RandomFlipLeftRight'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from .... import image
from .... import random as _random
from ....context import cpu
from ....image.resize import resize as _resize
from ....ndarray.ndarray import NDArray
from ....registry import Registry
from ...block import Block
from ...nn import Sequential
from . import image_ops

_CPU = cpu()  # one context object for all the arrays made here (not one per image)


TRANSFORMS = Registry("transform")
register = TRANSFORMS.register  # the one decorator spelling (tests/engine/test_registry.py)
"""The transforms a job spec may name (every one that takes plain parameters)."""


def create(name: str, **kwargs: Any) -> Block:
    """A transform from its class name, case-insensitive: ``create("resize", size=32)``."""
    return TRANSFORMS.create(name, **kwargs)


def _as_numpy(x: Any) -> numpy.ndarray:
    return x.asnumpy() if isinstance(x, NDArray) else numpy.asarray(x)


def _like(result: numpy.ndarray, x: Any) -> Any:
    return NDArray(result, _CPU) if isinstance(x, NDArray) else result


class _ArrayTransform(Block):
    """A transform defined by ``apply`` on a numpy array."""

    def forward(self, x: Any) -> Any:
        return _like(self.apply(_as_numpy(x)), x)

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        raise NotImplementedError


class Compose(Sequential):
    """Apply ``transforms`` in order."""

    def __init__(self, transforms: Sequence[Block]) -> None:
        super().__init__()
        for transform in transforms:
            self.add(transform)

    def forward(self, x: Any, *args: Any) -> Any:
        steps = list(self._children.values())
        if args or not all(_plain(step) for step in steps):
            return super().forward(x, *args)
        # array transforms only: one conversion in and out instead of one per step (per
        # sample, that Block plumbing cost as much as the steps themselves on small images)
        array = _as_numpy(x)
        for step in steps:
            array = step.apply(array)
        return _like(array, x)


def _plain(step: Block) -> bool:
    """An array transform as defined here, without hooks (their forward is ``apply``)."""
    return (isinstance(step, _ArrayTransform) and type(step).forward is _ArrayTransform.forward
            and not step._forward_hooks and not step._forward_pre_hooks)


@register
class Cast(_ArrayTransform):
    """Cast to ``dtype``."""

    def __init__(self, dtype: Any = "float32") -> None:
        super().__init__()
        self._dtype = numpy.dtype(dtype)

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        return x.astype(self._dtype)


@register
class ToTensor(_ArrayTransform):
    """HWC (or NHWC) in [0, 255] → CHW (NCHW) float32 in [0, 1)."""

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        return image_ops.to_tensor(x)


@register
class Normalize(_ArrayTransform):
    """``(x - mean) / std`` per channel of a CHW (or NCHW) tensor."""

    def __init__(self, mean: float | Sequence[float] = 0.0,
                 std: float | Sequence[float] = 1.0) -> None:
        super().__init__()
        self._mean = tuple(mean) if isinstance(mean, Sequence) else (float(mean),)
        self._std = tuple(std) if isinstance(std, Sequence) else (float(std),)

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        return image_ops.normalize(x, self._mean, self._std)


def _size_pair(size: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(size, (int, numpy.integer)):
        return int(size), int(size)
    w, h = size
    return int(w), int(h)


@register
class Resize(_ArrayTransform):
    """Resize to ``size`` (an int: square, or the short side with ``keep_ratio``; a pair:
    (width, height))."""

    def __init__(self, size: int | Sequence[int], keep_ratio: bool = False,
                 interpolation: int = 1) -> None:
        super().__init__()
        self._size = size
        self._keep = keep_ratio
        self._interpolation = interpolation

    def _target(self, h: int, w: int) -> tuple[int, int]:
        if not isinstance(self._size, (int, numpy.integer)):
            return _size_pair(self._size)
        size = int(self._size)
        if size <= 0:
            raise ValueError(f"Input size should be greater than 0, but got {size}")
        if not self._keep:
            return size, size
        if h > w:
            return size, h * size // w
        return w * size // h, size

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        if x.ndim == 4:
            return numpy.stack([self.apply(item) for item in x])
        w, h = self._target(x.shape[0], x.shape[1])
        return _resize(x, w, h, self._interpolation)


@register
class CenterCrop(_ArrayTransform):
    """Crop the center ``size`` (int, or (width, height)); upsample if the image is smaller."""

    def __init__(self, size: int | Sequence[int], interpolation: int = 1) -> None:
        super().__init__()
        self._size = _size_pair(size)
        self._interpolation = interpolation

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        return image.center_crop(x, self._size, self._interpolation)[0].asnumpy()


@register
class CropResize(_ArrayTransform):
    """Crop the box at (``x``, ``y``) of ``width`` x ``height``; with ``size`` (an int: square,
    or (width, height)), resize the crop to it (``interpolation`` None means bilinear; MXNet
    1.9.1 itself fails on None when resizing)."""

    def __init__(self, x: int, y: int, width: int, height: int,
                 size: int | Sequence[int] | None = None,
                 interpolation: int | None = None) -> None:
        super().__init__()
        self._box = (int(x), int(y), int(width), int(height))
        self._size = None if size is None else _size_pair(size)
        self._interpolation = 1 if interpolation is None else interpolation

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        left, top, width, height = self._box
        rows, cols = (x.shape[0], x.shape[1]) if x.ndim == 3 else (x.shape[1], x.shape[2])
        if left < 0 or top < 0 or left + width > cols or top + height > rows:
            raise ValueError(f"crop box (x={left}, y={top}, width={width}, height={height}) "
                             f"exceeds the {cols}x{rows} image")
        out = x[top:top + height, left:left + width] if x.ndim == 3 else \
            x[:, top:top + height, left:left + width]
        if self._size is None:
            return numpy.ascontiguousarray(out)
        if out.ndim == 4:
            return numpy.stack([_resize(item, *self._size, self._interpolation) for item in out])
        return _resize(out, *self._size, self._interpolation)


@register
class RandomResizedCrop(_ArrayTransform):
    """Crop a random area (``scale`` of the image) with a random aspect ratio (``ratio``)
    and resize it to ``size``."""

    def __init__(self, size: int | Sequence[int], scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
                 interpolation: int = 1) -> None:
        super().__init__()
        self._args = (_size_pair(size), scale, ratio, interpolation)

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        return image.random_size_crop(x, *self._args)[0].asnumpy()


class _Flip(_ArrayTransform):
    axis = 1

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        if _random.generator().random() < 0.5:
            return x
        axis = self.axis + (1 if x.ndim == 4 else 0)
        return numpy.ascontiguousarray(numpy.flip(x, axis))


@register
class RandomFlipLeftRight(_Flip):
    """Mirror the image left-right with probability 1/2."""

    axis = 1


@register
class RandomFlipTopBottom(_Flip):
    """Flip the image upside down with probability 1/2."""

    axis = 0


class _RandomFactor(_ArrayTransform):
    """Draw a factor in [max(0, 1 - amount), 1 + amount] and apply ``kernel``."""

    def __init__(self, amount: float) -> None:
        super().__init__()
        self._args = (max(0.0, 1.0 - amount), 1.0 + amount)

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        factor = float(numpy.float32(_random.generator().uniform(*self._args)))
        return self.kernel(x, factor)

    @staticmethod
    def kernel(x: numpy.ndarray, factor: float) -> numpy.ndarray:
        raise NotImplementedError


@register
class RandomBrightness(_RandomFactor):
    """Scale brightness by a random factor in [max(0, 1 - brightness), 1 + brightness]."""

    kernel = staticmethod(image_ops.brightness)


@register
class RandomContrast(_RandomFactor):
    """Scale contrast by a random factor in [max(0, 1 - contrast), 1 + contrast]."""

    kernel = staticmethod(image_ops.contrast)


@register
class RandomSaturation(_RandomFactor):
    """Scale saturation by a random factor in [max(0, 1 - saturation), 1 + saturation]."""

    kernel = staticmethod(image_ops.saturation)


@register
class RandomHue(_RandomFactor):
    """Rotate the hue by a random number of turns in [max(0, 1 - hue), 1 + hue] (MXNet's
    range: a whole turn plus up to ``hue`` either way)."""

    kernel = staticmethod(image_ops.hue)


@register
class RandomColorJitter(_ArrayTransform):
    """Brightness, contrast, saturation and hue jitter, in a random order; each factor is
    ``1 + U(-amount, amount)`` (hue: ``U(-hue, hue)`` turns); an amount of 0 skips it."""

    def __init__(self, brightness: float = 0, contrast: float = 0, saturation: float = 0,
                 hue: float = 0) -> None:
        super().__init__()
        self._amounts = (brightness, contrast, saturation, hue)

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        rng = _random.generator()
        kernels = (image_ops.brightness, image_ops.contrast, image_ops.saturation,
                   image_ops.hue)
        for step in rng.permutation(4):
            amount = self._amounts[step]
            if amount > 0:
                factor = float(numpy.float32(rng.uniform(-amount, amount)))
                x = kernels[step](x, factor if step == 3 else 1.0 + factor)
        return x


@register
class RandomLighting(_ArrayTransform):
    """AlexNet-style PCA lighting noise, weights drawn from N(0, ``alpha``)."""

    def __init__(self, alpha: float) -> None:
        super().__init__()
        self._alpha = alpha

    def apply(self, x: numpy.ndarray) -> numpy.ndarray:
        weights = _random.generator().normal(0.0, self._alpha, 3).astype(numpy.float32)
        return image_ops.lighting(x, tuple(weights.tolist()))


class RandomApply(Sequential):
    """Apply ``transforms`` with probability ``p``."""

    def __init__(self, transforms: Block, p: float = 0.5) -> None:
        super().__init__()
        self.transforms = transforms
        self.p = p

    def forward(self, x: Any, *args: Any) -> Any:
        if self.p < _random.generator().random():
            return x
        return self.transforms(x)


__all__ = [
    "Cast", "CenterCrop", "Compose", "CropResize", "Normalize", "RandomApply", "RandomBrightness",
    "RandomColorJitter", "RandomContrast", "RandomFlipLeftRight", "RandomFlipTopBottom",
    "RandomHue", "RandomLighting", "RandomResizedCrop", "RandomSaturation", "Resize",
    "TRANSFORMS", "ToTensor", "create",
]
