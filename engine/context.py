"""Devices: ``cpu()``, ``gpu(i)``, ``num_gpus()`` and the current default context.

A context decides which array module (numpy or cupy) holds an array's data; see
:mod:`engine.backend`.

>>> from engine import context
>>> context.cpu()
cpu(0)
"""

from __future__ import annotations

from types import ModuleType

from . import backend
from .scopes import ThreadCurrent, per_thread

_DEVICE_TYPES = ("cpu", "gpu", "cpu_pinned", "cpu_shared")


class Context(metaclass=ThreadCurrent):
    """A device: ``Context('cpu', 0)`` or ``Context('gpu', 1)``; also a ``with`` scope.

    ``Context.default_ctx`` is this thread's default context (assignable, per thread, as in
    MXNet; :func:`current_context` reads it).
    """

    __slots__ = ("device_type", "device_id", "_previous")
    devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}  # MXNet's codes
    devstr2type = {name: code for code, name in devtype2str.items()}
    default_ctx = ThreadCurrent.attribute("default_ctx", lambda: Context("cpu", 0))

    def __init__(self, device_type: str | Context, device_id: int = 0) -> None:
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in _DEVICE_TYPES:
            raise ValueError(
                f"unknown device type {device_type!r}; expected one of {_DEVICE_TYPES}"
            )
        if int(device_id) < 0:
            raise ValueError(f"device_id must be >= 0, got {device_id}")
        self.device_type = "cpu" if device_type.startswith("cpu") else device_type
        self.device_id = int(device_id)
        self._previous: list[Context] = []

    @property
    def device_typeid(self) -> int:
        return Context.devstr2type[self.device_type]

    @property
    def xp(self) -> ModuleType:
        """numpy for cpu contexts, cupy for gpu ones."""
        return backend.module_for(self.device_type)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Context)
            and self.device_type == other.device_type
            and self.device_id == other.device_id
        )

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    def __enter__(self) -> Context:
        self._previous.append(current_context())
        _DEFAULT.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _DEFAULT.set(self._previous.pop())

    def empty_cache(self) -> None:
        """Release cached device memory (a no-op on cpu)."""
        if self.device_type == "gpu" and backend.cupy is not None:
            backend.cupy.get_default_memory_pool().free_all_blocks()


_DEFAULT = per_thread(Context, "default_ctx")


def cpu(device_id: int = 0) -> Context:
    return Context("cpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    return Context("cpu", device_id)


def gpu(device_id: int = 0) -> Context:
    """A GPU context. Arrays can only be created on it when cupy sees a device."""
    return Context("gpu", device_id)


def num_gpus() -> int:
    return backend.gpu_count()


def current_context() -> Context:
    """The default context of this thread (``cpu(0)`` unless a ``with ctx:`` is active)."""
    return _DEFAULT.get()  # type: ignore[no-any-return]


def device_of(ctx: Context | str | None) -> Context:
    """Normalise a context argument (None means the current default)."""
    if ctx is None:
        return current_context()
    if isinstance(ctx, Context):
        return ctx
    if isinstance(ctx, str):
        name, _, idx = ctx.partition("(")
        return Context(name.strip(), int(idx.rstrip(")") or 0))
    raise TypeError(f"expected a Context, got {type(ctx).__name__}")
