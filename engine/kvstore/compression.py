"""2-bit gradient compression with error feedback (MXNet's ``{'type': '2bit'}``).

Each pushing device keeps a residual per key. Per element: ``res += g``; if
``res >= θ`` send ``θ`` and ``res -= θ``; if ``res <= −θ`` send ``−θ`` and ``res += θ``;
otherwise send 0. The receiver sums what the devices sent. In one process nothing travels,
so the quantized values are used directly. Between ranks (the dist stores) each value
travels as 2 bits, as in MXNet (16 values per 4 bytes): :meth:`TwoBitCompression.encode`
packs a gradient into two bit planes (sent +θ, sent −θ) and :func:`decode_sum` adds every
rank's planes back up.

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


    def encode(self, key: Any, grad: Any) -> Any:
        """The 2-bit wire form of what this rank sends for ``grad`` (see :func:`encode`),
        with this key's residual."""
        from ..backend import array_module

        flat = grad.reshape(-1)
        res = self.residuals.get((key, 0))
        if res is None or res.shape != flat.shape:
            res = self.residuals[(key, 0)] = array_module(grad).zeros_like(flat)
        return encode(res, flat, self.threshold)


def encode(residual: Any, grad: Any, threshold: float) -> Any:
    """Quantize ``residual += grad`` (updated in place) to the 2-bit wire form.

    Two ``packbits`` planes, ``ceil(n/8)`` bytes each: the elements sent as +θ, then
    those sent as −θ (zero is neither), so n values take n/4 bytes.
    """
    from ..backend import array_module

    xp = array_module(grad)
    residual += grad
    up = residual >= threshold
    down = residual <= -threshold
    residual -= up.astype(residual.dtype) * threshold
    residual += down.astype(residual.dtype) * threshold
    return xp.concatenate([xp.packbits(up), xp.packbits(down)])


def wire_bytes(size: int) -> int:
    """Bytes one rank sends for ``size`` values in :meth:`TwoBitCompression.encode` form."""
    return 2 * ((size + 7) // 8)


def decode_sum(packed: Any, size: int, threshold: float, out: Any) -> Any:
    """``out[:] = θ · Σ_r (sent_up_r − sent_down_r)`` over the rows of ``packed`` (one per rank).

    The counts are summed as integers, then scaled once: every rank gets the same float.
    """
    from ..backend import array_module

    xp = array_module(packed)
    half = wire_bytes(size) // 2
    counts = xp.zeros(size, dtype=xp.int16)
    for row in packed:
        counts += xp.unpackbits(row[:half])[:size]
        counts -= xp.unpackbits(row[half:])[:size]
    xp.multiply(counts, xp.asarray(threshold, dtype=out.dtype), out=out.reshape(-1),
                casting="unsafe")
    return out


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
