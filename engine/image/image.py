"""``mx.image.image``: MXNet keeps its image API in a module of this name; it is
:mod:`engine.image`'s, re-exported (``mx.img.image.imread(...)`` works).
"""

from __future__ import annotations

from . import (
    ImageDecodeError,
    center_crop,
    color_normalize,
    fixed_crop,
    imdecode,
    imencode,
    imread,
    imresize,
    random_crop,
    random_size_crop,
    resize_short,
    scale_down,
)
from .augmenters import *  # noqa: F403 - the augmenters, as MXNet's module has them
from .augmenters import __all__ as _augmenters
from .image_iter import ImageIter

__all__ = [
    "ImageDecodeError", "ImageIter", "center_crop", "color_normalize", "fixed_crop",
    "imdecode", "imencode", "imread", "imresize", "random_crop", "random_size_crop",
    "resize_short", "scale_down", *_augmenters,
]
