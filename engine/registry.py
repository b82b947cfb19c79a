"""Name registries for optimizers, initializers, schedulers, metrics, layers and losses.

``@REG.register`` adds a class under its lower-cased name (or an explicit alias);
registering a name twice is an error, and ``create(name, **kw)`` is case-insensitive.

>>> reg = Registry("widget")
>>> @reg.register
... class Knob:
...     def __init__(self, size=1): self.size = size
>>> reg.create("KNOB", size=3).size
3
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Registry:
    """A case-insensitive name → class table for one kind of component."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._classes: dict[str, Any] = {}

    def register(self, klass: T | None = None, *, name: str | None = None,
                 aliases: tuple[str, ...] = ()) -> Any:
        """Register ``klass`` (usable bare, or as ``register(name=..., aliases=...)``)."""

        def add(cls: T) -> T:
            for key in (name or cls.__name__, *aliases):  # type: ignore[attr-defined]
                low = key.lower()
                if low in self._classes and self._classes[low] is not cls:
                    raise ValueError(
                        f"{self.kind} {key!r} is already registered "
                        f"(by {self._classes[low].__module__}.{self._classes[low].__name__})"
                    )
                self._classes[low] = cls
            return cls

        if klass is None:
            return add
        return add(klass)

    def alias(self, *names: str) -> Callable[[T], T]:
        return self.register(name=names[0], aliases=names[1:])

    def get(self, name: str) -> Any:
        try:
            return self._classes[name.lower()]
        except (KeyError, AttributeError):
            raise ValueError(
                f"unknown {self.kind} {name!r}; registered: {', '.join(self.names())}"
            ) from None

    def create(self, name: Any, **kwargs: Any) -> Any:
        """An instance from a registered name (an instance passes through unchanged)."""
        if not isinstance(name, str):
            if kwargs:
                raise ValueError(f"cannot pass arguments with a {self.kind} instance")
            return name
        return self.get(name)(**kwargs)

    def names(self) -> list[str]:
        return sorted(self._classes)

    def classes(self) -> list[Any]:
        """Each registered class once (aliases collapsed)."""
        seen: dict[int, Any] = {}
        for cls in self._classes.values():
            seen.setdefault(id(cls), cls)
        return list(seen.values())

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._classes
