"""``npx.utils``: saving and loading arrays in MXNet's ``.params`` format (``npx.save`` /
``npx.load`` are these)."""

from __future__ import annotations

from ..ndarray.creation import load, save

__all__ = ["load", "save"]
