"""``mx.AttrScope``: attributes attached to every symbol created inside a ``with`` block.

Keys are kept as given; the ones MXNet hides (``ctx_group``, ``lr_mult``, ``wd_mult``, ...)
reach a symbol in their double-underscore form (``__ctx_group__``), so ``lr_mult``/
``wd_mult`` set this way are read by Module's optimizer. Nested scopes merge, the inner
value winning.

>>> import engine as mx
>>> with mx.AttrScope(lr_mult='0.1'):
...     w = mx.sym.var('w')
>>> w.attr('__lr_mult__')
'0.1'
"""

from __future__ import annotations

from typing import Any

from .scopes import ThreadCurrent, per_thread

# Attributes MXNet stores in their ``__key__`` form (and lists under both names).
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage",
               "profiler_scope")


def dunder(key: str) -> str:
    """MXNet's stored form of an attribute key: ``lr_mult`` -> ``__lr_mult__``."""
    return key if key.startswith("__") and key.endswith("__") else f"__{key}__"


class AttrScope(metaclass=ThreadCurrent):
    """Attributes (string values) for the symbols created in its ``with`` block.

    ``AttrScope.current`` is this thread's scope (assignable, per thread, as in MXNet).
    """

    current = ThreadCurrent.attribute("current", lambda: AttrScope())

    def __init__(self, **kwargs: Any) -> None:
        for value in kwargs.values():
            if not isinstance(value, str):
                raise ValueError("Attributes need to be string")
        self._attr = dict(kwargs)  # as given; a symbol stores the hidden keys as __key__
        self._previous: AttrScope | None = None

    def get(self, attr: dict[str, str] | None) -> dict[str, str]:
        """The scope's attributes updated with ``attr`` (the explicit ones win), the
        hidden keys (``lr_mult``, ``ctx_group``, ...) in their stored ``__key__`` form."""
        if not self._attr:
            return dict(attr or {})
        merged = {dunder(k) if k in HIDDEN_KEYS else k: v for k, v in self._attr.items()}
        merged.update(attr or {})
        return merged

    def __enter__(self) -> AttrScope:
        self._previous = _CURRENT.get()
        merged = dict(self._previous._attr)
        merged.update(self._attr)
        self._attr = merged
        _CURRENT.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _CURRENT.set(self._previous)


_CURRENT = per_thread(AttrScope, "current")


def current() -> AttrScope:
    """The attribute scope of this thread."""
    return _CURRENT.get()  # type: ignore[no-any-return]


__all__ = ["HIDDEN_KEYS", "AttrScope", "current", "dunder"]
