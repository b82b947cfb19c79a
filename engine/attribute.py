"""``mx.AttrScope``: attributes attached to every symbol created inside a ``with`` block.

Keys are stored in MXNet's double-underscore form (``ctx_group`` -> ``__ctx_group__``);
``lr_mult``/``wd_mult`` set this way are read by Module's optimizer. Nested scopes merge,
the inner value winning.

>>> import engine as mx
>>> with mx.AttrScope(lr_mult='0.1'):
...     w = mx.sym.var('w')
>>> w.attr('__lr_mult__')
'0.1'
"""

from __future__ import annotations

import threading
from typing import Any


def dunder(key: str) -> str:
    """MXNet's stored form of an attribute key: ``lr_mult`` -> ``__lr_mult__``."""
    return key if key.startswith("__") and key.endswith("__") else f"__{key}__"


class _State(threading.local):
    def __init__(self) -> None:
        self.current: AttrScope | None = None


_state = _State()


class AttrScope:
    """Attributes (string values) for the symbols created in its ``with`` block."""

    def __init__(self, **kwargs: Any) -> None:
        for value in kwargs.values():
            if not isinstance(value, str):
                raise ValueError("Attributes need to be string")
        self._attr = {dunder(k): v for k, v in kwargs.items()}
        self._previous: AttrScope | None = None

    def get(self, attr: dict[str, str] | None) -> dict[str, str]:
        """The scope's attributes updated with ``attr`` (the explicit ones win)."""
        if not self._attr:
            return dict(attr or {})
        merged = dict(self._attr)
        merged.update(attr or {})
        return merged

    @staticmethod
    def current() -> AttrScope:
        if _state.current is None:
            _state.current = AttrScope()
        return _state.current

    def __enter__(self) -> AttrScope:
        self._previous = AttrScope.current()
        merged = dict(self._previous._attr)
        merged.update(self._attr)
        self._attr = merged
        _state.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        _state.current = self._previous


__all__ = ["AttrScope", "dunder"]
