"""Per-thread "current" scopes read as class attributes, as MXNet 1.9's are.

MXNet keeps the current name manager, attribute scope and default context in thread-local
storage and exposes them as class properties that can also be assigned:
``NameManager.current = NameManager()`` replaces the calling thread's manager only, and a
thread that never set one starts from a fresh default. Reading them warns, as MXNet's
deprecated accessors do; the engine's own code calls the module-level functions instead.

>>> import threading
>>> from engine.scopes import ThreadCurrent
>>> class Box(metaclass=ThreadCurrent):
...     current = ThreadCurrent.attribute("current", lambda: "default", warn=False)
>>> Box.current = "main"
>>> seen = []
>>> t = threading.Thread(target=lambda: seen.append(Box.current)); t.start(); t.join()
>>> Box.current, seen
('main', ['default'])
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any


class _PerThread:
    """A class attribute whose value is per thread, with a default made on first read."""

    def __init__(self, name: str, default: Callable[[], Any], warn: bool) -> None:
        self.name = name
        self.default = default
        self.warn = warn
        self.local = threading.local()

    def get(self) -> Any:
        value = getattr(self.local, "value", None)
        if value is None:
            value = self.local.value = self.default()
        return value

    def set(self, value: Any) -> None:
        self.local.value = value

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if self.warn:
            warnings.warn(f"{owner.__name__ if owner else ''}.{self.name} has been deprecated "
                          "(as in MXNet): use the `with` statement instead",
                          DeprecationWarning, stacklevel=2)
        return self.get()


class ThreadCurrent(type):
    """Metaclass letting ``Cls.attr = value`` set a :class:`_PerThread` attribute's value for
    the calling thread (a plain class attribute assignment would replace it for all)."""

    @staticmethod
    def attribute(name: str, default: Callable[[], Any], warn: bool = True) -> Any:
        return _PerThread(name, default, warn)

    def __setattr__(cls, key: str, value: Any) -> None:
        for klass in cls.__mro__:  # a subclass (Prefix) sets its base's (NameManager's)
            slot = klass.__dict__.get(key)
            if isinstance(slot, _PerThread):
                slot.set(value)
                return
        super().__setattr__(key, value)


def per_thread(cls: type, name: str) -> Any:
    """The :class:`_PerThread` slot behind ``cls.name`` (read without the warning)."""
    for klass in cls.__mro__:
        slot = klass.__dict__.get(name)
        if isinstance(slot, _PerThread):
            return slot
    raise AttributeError(f"{cls.__name__}.{name} is not a per-thread attribute")
