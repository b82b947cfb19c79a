"""Plain-data (JSON) state of an optimizer: hyperparameters, counts, schedule, live lr.

The per-parameter arrays are saved separately (see :mod:`engine.optimizer.updater` and
:mod:`engine.gluon.trainer_states`); nothing here is ever pickled.
"""

from __future__ import annotations

from typing import Any


class StateDictMixin:
    """``state_dict`` / ``check_state_dict`` / ``load_state_dict`` for :class:`Optimizer`."""

    lr_scheduler: Any
    num_update: int
    _all_index_update_counts: dict[int, dict[int, int]]
    _index_update_count: dict[int, int]
    _lr_scale: float
    _lr_override: float | None
    live_lr_state: dict[str, Any]

    _NOT_HYPER = frozenset({
        "lr_scheduler", "param_dict", "idx2name", "sym_info", "num_update",
        "_all_index_update_counts", "_index_update_count", "_lr_scale", "_lr_override",
        "lr_mult", "wd_mult", "_scratch_buffers",
    })

    def hyperparameters(self) -> dict[str, Any]:
        """Plain-data attributes (lr, wd, betas, ...) for JSON checkpoints."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(self).items()
                if k not in self._NOT_HYPER and _json_plain(v)}

    def state_dict(self) -> dict[str, Any]:
        """Everything but the per-parameter arrays, as JSON-able data."""
        sched = self.lr_scheduler
        return {
            "optimizer": type(self).__name__.lower(),
            "hyper": self.hyperparameters(),
            "num_update": self.num_update,
            "counts": {str(dev): {str(i): n for i, n in c.items()}
                       for dev, c in self._all_index_update_counts.items()},
            "live_lr": self.live_lr_state,
            "scheduler": None if sched is None else {
                "class": type(sched).__name__,
                "state": sched.state_dict() if hasattr(sched, "state_dict") else None,
            },
        }

    def check_state_dict(self, state: dict[str, Any]) -> None:
        """Raise ValueError if ``state`` was not saved from an optimizer like this one."""
        name = type(self).__name__.lower()
        if state.get("optimizer") != name:
            raise ValueError(f"saved optimizer is {state.get('optimizer')!r}, "
                             f"this trainer uses {name!r}")
        saved_sched = state.get("scheduler")
        have = self.lr_scheduler
        if (saved_sched is None) != (have is None) or (
                have is not None and saved_sched["class"] != type(have).__name__):
            raise ValueError("saved lr_scheduler does not match this optimizer's "
                             f"({None if saved_sched is None else saved_sched['class']} vs "
                             f"{None if have is None else type(have).__name__})")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (call ``check_state_dict`` first)."""
        self.check_state_dict(state)
        for key, value in state["hyper"].items():
            if key in vars(self):  # only declared attributes (older files may hold more)
                setattr(self, key, value)
        self.num_update = int(state["num_update"])
        self._all_index_update_counts = {
            int(dev): {int(i): int(n) for i, n in c.items()} for dev, c in state["counts"].items()
        }
        self._all_index_update_counts.setdefault(0, {})
        self._index_update_count = self._all_index_update_counts[0]
        self._lr_scale = float(state["live_lr"]["scale"])
        override = state["live_lr"]["override"]
        self._lr_override = None if override is None else float(override)
        sched = state["scheduler"]
        if sched is not None and sched["state"] is not None:
            self.lr_scheduler.load_state_dict(sched["state"])



def _json_plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_json_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_plain(v) for k, v in value.items())
    return False
