"""``mx.name``: automatic names for symbols built without ``name=``.

Each operator type is numbered in creation order (``fullyconnected0``, ``fullyconnected1``);
a ``with NameManager():`` block starts fresh counters and :class:`Prefix` prepends a prefix
to every name made inside it, given or automatic, as MXNet 1.9 does.

>>> import engine as mx
>>> with mx.name.Prefix('enc_'):
...     mx.sym.FullyConnected(mx.sym.var('x'), num_hidden=2).list_arguments()
['x', 'enc_fullyconnected0_weight', 'enc_fullyconnected0_bias']
"""

from __future__ import annotations

import threading


class _State(threading.local):
    def __init__(self) -> None:
        self.current: NameManager | None = None


_state = _State()


class NameManager:
    """Numbers unnamed operators per type; a context manager scoping fresh counters.

    >>> with NameManager():
    ...     NameManager.current().get(None, 'dot'), NameManager.current().get(None, 'dot')
    ('dot0', 'dot1')
    """

    def __init__(self) -> None:
        self._counter: dict[str, int] = {}
        self._previous: NameManager | None = None

    def get(self, name: str | None, hint: str) -> str:
        """``name`` when given, else ``hint`` followed by its next number."""
        if name:
            return name
        count = self._counter.get(hint, 0)
        self._counter[hint] = count + 1
        return f"{hint}{count}"

    @staticmethod
    def current() -> NameManager:
        """The manager naming symbols in this thread (one default per thread)."""
        if _state.current is None:
            _state.current = NameManager()
        return _state.current

    def __enter__(self) -> NameManager:
        self._previous = NameManager.current()
        _state.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        _state.current = self._previous


class Prefix(NameManager):
    """A :class:`NameManager` that puts ``prefix`` in front of every name it returns.

    >>> with Prefix('mynet_'):
    ...     NameManager.current().get('fc', 'fullyconnected')
    'mynet_fc'
    """

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)


current = NameManager.current

__all__ = ["NameManager", "Prefix", "current"]
