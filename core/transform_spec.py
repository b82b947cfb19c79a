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
