"""2-bit gradient compression with error feedback (MXNet's ``{'type': '2bit'}``).

Each pushing device keeps a residual per key. Per element: ``res += g``; if
``res >= θ`` send ``θ`` and ``res -= θ``; if ``res <= −θ`` send ``−θ`` and ``res += θ``;
otherwise send 0. The receiver sums what the devices sent. MXNet packs 16 such values into
one float32 for transport; in one process nothing travels, so the quantized values are used
directly (the numbers are identical).

>>> import numpy as np
>>> c = TwoBitCompression(threshold=0.5)
>>> c.compress("w", 0, np.array([0.4, 0.6, -0.7], dtype=np.float32)).tolist()
[0.0, 0.5, -0.5]
"""

from __future__ import annotations

import math
from typing import Any


class TwoBitCompression:
    """Quantize to {−θ, 0, θ} with a per-(key, device) residual."""

    type = "2bit"

    def __init__(self, threshold: float = 0.5) -> None:
        threshold = float(threshold)
        if not math.isfinite(threshold) or threshold <= 0:
            raise ValueError(f"threshold must be a finite number > 0 for 2bit compression, "
                             f"got {threshold}")
        self.threshold = threshold
        self.residuals: dict[tuple[Any, int], Any] = {}

    def compress(self, key: Any, device: int, grad: Any) -> Any:
        """The quantized gradient this device sends (its residual is updated in place)."""
        from ..backend import array_module

        xp = array_module(grad)
        res = self.residuals.get((key, device))
        if res is None or res.shape != grad.shape:
            res = self.residuals[(key, device)] = xp.zeros_like(grad)
        res += grad
        theta = self.threshold
        sent = (res >= theta).astype(grad.dtype)
        sent -= (res <= -theta).astype(grad.dtype)
        sent *= theta
        res -= sent
        return sent


def make_compression(params: dict) -> TwoBitCompression:
    """A compressor from MXNet-style ``compression_params``."""
    if not isinstance(params, dict) or "type" not in params:
        raise ValueError("compression_params must be a dict with a 'type' entry, e.g. "
                         "{'type': '2bit', 'threshold': 0.5}")
    kind = str(params["type"]).lower()
    if kind != "2bit":
        raise ValueError(f"Unsupported type of gradient compression {params['type']!r}; "
                         f"supported: '2bit'")
    unknown = set(params) - {"type", "threshold"}
    if unknown:
        raise ValueError(f"unknown compression parameter(s) {sorted(unknown)}")
    return TwoBitCompression(params.get("threshold", 0.5))
