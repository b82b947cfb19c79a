"""core.transform_spec.image_shape (what submit reckons an image reaches the network as)
against the engine's transforms as the worker builds them (workers.data_sources)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import TypeAdapter

import engine as mx
from core.transform_spec import Transforms, image_shape
from workers.data_sources import build_transforms

CASES: list[tuple[tuple[int, int, int], list[dict[str, Any]]]] = [
    ((32, 32, 3), []),
    ((32, 32, 3), [{"type": "ToTensor"}]),
    ((30, 40, 3), [{"type": "Resize", "size": 16}]),
    ((30, 40, 3), [{"type": "Resize", "size": [20, 10]}]),
    ((30, 40, 3), [{"type": "Resize", "size": 16, "keep_ratio": True}]),
    ((40, 30, 3), [{"type": "Resize", "size": 16, "keep_ratio": True}]),
    ((30, 40, 3), [{"type": "CenterCrop", "size": 24}]),
    ((30, 40, 3), [{"type": "CenterCrop", "size": [50, 12]}]),  # upsampled where smaller
    ((30, 40, 3), [{"type": "RandomResizedCrop", "size": [12, 14]},
                   {"type": "RandomFlipLeftRight"}, {"type": "ToTensor"},
                   {"type": "Normalize", "mean": [0.5, 0.5, 0.5], "std": 0.2}]),
    ((30, 40, 3), [{"type": "Resize", "size": 20, "keep_ratio": True},
                   {"type": "CenterCrop", "size": 18}, {"type": "Cast", "dtype": "float16"}]),
    ((28, 28, 1), [{"type": "RandomBrightness", "brightness": 0.3}, {"type": "ToTensor"}]),
]
ADAPTER = TypeAdapter(Transforms)


@pytest.mark.parametrize(("hwc", "transforms"), CASES)
def test_the_reckoned_shape_is_the_shape_the_transforms_give(hwc, transforms):
    specs = ADAPTER.validate_python(transforms)
    image = np.random.default_rng(0).integers(0, 256, size=hwc, dtype=np.uint8)
    out = build_transforms(specs, None)(mx.nd.array(image, dtype=np.uint8))
    assert image_shape(hwc[0], hwc[1], hwc[2], specs) == tuple(out.shape)


def test_a_normalize_for_other_channels_is_refused_by_both():
    specs = ADAPTER.validate_python([{"type": "ToTensor"},
                                     {"type": "Normalize", "mean": [0.5, 0.5, 0.5]}])
    image = np.zeros((8, 8, 1), np.uint8)
    with pytest.raises(ValueError):
        build_transforms(specs, None)(mx.nd.array(image, dtype=np.uint8))
    with pytest.raises(ValueError, match="3 values; the images have 1 channel"):
        image_shape(8, 8, 1, specs)
