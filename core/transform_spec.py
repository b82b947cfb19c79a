"""The ``transforms`` of a data source: a typed union of the engine's image transforms
(``gluon.data.vision.transforms``) by class name, with MXNet's parameter names, types
and ranges checked at submit. The worker builds them (workers.data); the api never
imports the engine.

    data:
      train: {dataset: <id>, transforms: [{type: RandomResizedCrop, size: 28},
                                          {type: RandomFlipLeftRight}, {type: ToTensor}]}
      val:   {dataset: <id>, transforms: [{type: CenterCrop, size: 28}, {type: ToTensor}]}
      normalize: auto        # Normalize with the mean/std computed at validation
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_TRANSFORMS = 16
Size = Annotated[int, Field(ge=1, le=4096)] | Annotated[
    list[Annotated[int, Field(ge=1, le=4096)]], Field(min_length=2, max_length=2)
]
Channels = Annotated[list[Annotated[float, Field(allow_inf_nan=False)]],
                     Field(min_length=1, max_length=4)]
Interpolation = Annotated[int, Field(ge=0, le=4, description="OpenCV's codes, as MXNet")]
Amount = Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)]


class _Transform(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ToTensor(_Transform):
    """HWC uint8 in [0, 255] -> CHW float32 in [0, 1]."""

    type: Literal["ToTensor"]


class Normalize(_Transform):
    type: Literal["Normalize"]
    mean: Annotated[float, Field(allow_inf_nan=False)] | Channels = 0.0
    std: Annotated[float, Field(gt=0, allow_inf_nan=False)] | Channels = 1.0

    @model_validator(mode="after")
    def _positive_std(self) -> Normalize:
        if isinstance(self.std, list) and any(s <= 0 for s in self.std):
            raise ValueError("std: every value must be > 0")
        return self


class Resize(_Transform):
    type: Literal["Resize"]
    size: Size
    keep_ratio: bool = False
    interpolation: Interpolation = 1


class CenterCrop(_Transform):
    type: Literal["CenterCrop"]
    size: Size
    interpolation: Interpolation = 1


class RandomResizedCrop(_Transform):
    type: Literal["RandomResizedCrop"]
    size: Size
    scale: Annotated[list[Annotated[float, Field(gt=0, le=1)]],
                     Field(min_length=2, max_length=2)] = [0.08, 1.0]
    ratio: Annotated[list[Annotated[float, Field(gt=0, le=100)]],
                     Field(min_length=2, max_length=2)] = [3.0 / 4.0, 4.0 / 3.0]
    interpolation: Interpolation = 1

    @model_validator(mode="after")
    def _ordered(self) -> RandomResizedCrop:
        for name in ("scale", "ratio"):
            low, high = getattr(self, name)
            if low > high:
                raise ValueError(f"{name}: the first value must not exceed the second")
        return self


class RandomFlipLeftRight(_Transform):
    type: Literal["RandomFlipLeftRight"]


class RandomFlipTopBottom(_Transform):
    type: Literal["RandomFlipTopBottom"]


class RandomBrightness(_Transform):
    type: Literal["RandomBrightness"]
    brightness: Amount


class RandomContrast(_Transform):
    type: Literal["RandomContrast"]
    contrast: Amount


class RandomSaturation(_Transform):
    type: Literal["RandomSaturation"]
    saturation: Amount


class RandomHue(_Transform):
    type: Literal["RandomHue"]
    hue: Amount


class Cast(_Transform):
    type: Literal["Cast"]
    dtype: Literal["float16", "float32", "float64"] = "float32"


Transform = Annotated[
    ToTensor | Normalize | Resize | CenterCrop | RandomResizedCrop | RandomFlipLeftRight
    | RandomFlipTopBottom | RandomBrightness | RandomContrast | RandomSaturation | RandomHue
    | Cast,
    Field(discriminator="type"),
]
Transforms = Annotated[list[Transform], Field(max_length=MAX_TRANSFORMS)]


def image_shape(height: int, width: int, channels: int,
                transforms: list[Transform] | None) -> tuple[int, int, int]:
    """``(C, H, W)``: what an (H, W, C) image reaches the network as, after ``transforms``
    and the ToTensor the worker adds when they have none (workers.data_sources). Each
    transform's size rule is the engine's (tests/core/test_transform_shapes.py runs them);
    ValueError for a Normalize whose mean/std fit neither 1 nor C channels.

    >>> image_shape(32, 48, 3, [Resize(type="Resize", size=16, keep_ratio=True)])
    (3, 16, 24)
    """
    for step in transforms or []:
        if isinstance(step, Resize) and isinstance(step.size, int) and step.keep_ratio:
            # the short side becomes ``size``, the long side keeps the ratio (rounded down)
            if height > width:
                width, height = step.size, height * step.size // width
            else:
                width, height = width * step.size // height, step.size
        elif isinstance(step, Resize | CenterCrop | RandomResizedCrop):
            # MXNet's sizes are an int (square) or (width, height)
            width, height = (step.size, step.size) if isinstance(step.size, int) else step.size
        elif isinstance(step, Normalize):
            for name in ("mean", "std"):
                value = getattr(step, name)
                count = len(value) if isinstance(value, list) else 1
                if count not in (1, channels):
                    raise ValueError(f"Normalize {name} has {count} values; the images have "
                                     f"{channels} channel(s)")
    return (channels, height, width)
