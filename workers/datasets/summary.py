"""What a format check returns, and the error it raises."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

# A decompression bomb (a tiny PNG claiming 100k x 100k pixels) is refused before decoding.
MAX_IMAGE_PIXELS = 64 * 1024 * 1024
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


class InvalidDataset(ValueError):
    """The upload cannot be used; the message is the reason shown to the user."""


@dataclass
class Summary:
    num_rows: int
    feature_shape: list[int]
    dtype: str
    num_classes: int | None
    stats: dict[str, Any] = field(default_factory=dict)


def decode_image(payload: bytes, what: str) -> np.ndarray:
    """Decode an image to HxWx3 uint8 with Pillow, refusing bombs and garbage."""
    try:
        with Image.open(io.BytesIO(payload)) as image:
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                raise InvalidDataset(
                    f"{what}: {width}x{height} pixels exceeds the limit of {MAX_IMAGE_PIXELS}"
                )
            # Three channels, like MXNet's default (flag=1) for records and folders.
            return np.asarray(image.convert("RGB"))
    except InvalidDataset:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise InvalidDataset(f"{what} is not a decodable image ({exc})") from exc
