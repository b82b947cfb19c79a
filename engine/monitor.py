"""``mx.mon.Monitor``: statistics of every operator output (and the arguments) of the
graphs a Module or Executor runs, every ``interval`` batches.

``tic()`` before a batch, ``toc()`` after it returns ``(batch, name, stat)`` for each
output and argument whose name matches ``pattern``; the default statistic is MXNet's,
``norm(x) / sqrt(x.size)``. ``toc_print()`` logs them as MXNet does.

>>> import engine as mx
>>> x = mx.sym.var('x')
>>> ex = (x * 2).simple_bind(mx.cpu(), x=(4,))
>>> mon = mx.mon.Monitor(1)
>>> mon.install(ex)
>>> ex.arg_dict['x'][:] = 1
>>> mon.tic(); _ = ex.forward(); [name for _, name, _ in mon.toc()]  # doctest: +ELLIPSIS
['_mulscalar..._output', 'x']
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any

from .ndarray import NDArray


def _mean_norm(x: NDArray) -> NDArray:
    from .ndarray import norm

    return norm(x) / math.sqrt(x.size)


class Monitor:
    """Collects ``stat_func`` of the arrays named like ``pattern`` every ``interval``
    batches, from the executors it was installed on."""

    def __init__(self, interval: int, stat_func: Callable[[NDArray], Any] | None = None,
                 pattern: str = ".*", sort: bool = False, monitor_all: bool = False) -> None:
        self.interval = interval
        self.stat_func = stat_func or _mean_norm
        self.activated = False
        self.queue: list[tuple[int, str, Any]] = []
        self.step = 0
        self.exes: list[Any] = []
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all

    def stat_helper(self, name: str, array: NDArray) -> None:
        """The executor callback: queue the statistic of ``array`` while active."""
        if not self.activated or not self.re_prog.match(name):
            return
        from . import autograd

        with autograd.pause():
            self.queue.append((self.step, name, self.stat_func(array)))

    def install(self, exe: Any) -> None:
        """Monitor an executor (anything with ``set_monitor_callback`` and ``arg_dict``)."""
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)

    def tic(self) -> None:
        """Start collecting if this batch is one of every ``interval``."""
        if self.step % self.interval == 0:
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self) -> list[tuple[int, str, str]]:
        """Stop collecting; ``(batch, name, stat text)`` for the outputs, then arguments."""
        if not self.activated:
            return []
        from . import autograd

        with autograd.pause():
            for exe in self.exes:
                for name, array in exe.arg_dict.items():
                    if self.re_prog.match(name):
                        self.queue.append((self.step, name, self.stat_func(array)))
        self.activated = False
        if self.sort:
            self.queue.sort(key=lambda item: item[1])
        result = []
        for step, name, values in self.queue:
            values = values if isinstance(values, list) else [values]
            text = ""
            for value in values:
                if not isinstance(value, NDArray):
                    raise TypeError("Monitor stat_func must return NDArrays")
                text += (str(value.asscalar()) if value.size == 1 else str(value.asnumpy()))
                text += "\t"
            result.append((step, name, text))
        self.queue = []
        return result

    def toc_print(self) -> None:
        """Log :meth:`toc`'s statistics (``Batch: <n> <name> <stat>``)."""
        for step, name, text in self.toc():
            logging.info("Batch: %7d %-30s %s", step, name, text)


__all__ = ["Monitor"]
