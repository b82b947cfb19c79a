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

from .scopes import ThreadCurrent, per_thread


class NameManager(metaclass=ThreadCurrent):
    """Numbers unnamed operators per type; a context manager scoping fresh counters.

    ``NameManager.current`` is this thread's manager (assignable, per thread, as in MXNet).

    >>> with NameManager():
    ...     current().get(None, 'dot'), current().get(None, 'dot')
    ('dot0', 'dot1')
    """

    current = ThreadCurrent.attribute("current", lambda: NameManager())

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

    def __enter__(self) -> NameManager:
        self._previous = _CURRENT.get()
        _CURRENT.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _CURRENT.set(self._previous)


_CURRENT = per_thread(NameManager, "current")


def current() -> NameManager:
    """The manager naming symbols in this thread (one default per thread)."""
    return _CURRENT.get()  # type: ignore[no-any-return]


class Prefix(NameManager):
    """A :class:`NameManager` that puts ``prefix`` in front of every name it returns.

    >>> with Prefix('mynet_'):
    ...     current().get('fc', 'fullyconnected')
    'mynet_fc'
    """

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)


__all__ = ["NameManager", "Prefix", "current"]
