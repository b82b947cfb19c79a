"""Module checkpoints in MXNet's layout: ``prefix-symbol.json``, ``prefix-%04d.params``
and ``prefix-%04d.states`` (the optimizer's state), written and read back.
"""

from __future__ import annotations

import os
from typing import Any

from ..model import load_checkpoint, params_filename, save_params


class CheckpointMixin:
    """``save_checkpoint``/``load`` and the optimizer-state files of a Module."""

    _symbol: Any
    _kvstore: Any
    _update_on_kvstore: bool
    _updater: Any
    logger: Any
    optimizer_initialized: bool
    get_params: Any  # Module.get_params

    def save_checkpoint(self, prefix: str, epoch: int, save_optimizer_states: bool = False,
                        remove_amp_cast: bool = True) -> None:
        """Write ``prefix-symbol.json``, ``prefix-%04d.params`` (and ``.states``)."""
        self._symbol.save(f"{prefix}-symbol.json")
        param_name = params_filename(prefix, epoch)
        arg, aux = self.get_params()
        save_params(param_name, arg, aux)
        self.logger.info('Saved checkpoint to "%s"', param_name)
        if save_optimizer_states:
            state_name = f"{prefix}-{epoch:04d}.states"
            self.save_optimizer_states(state_name)
            self.logger.info('Saved optimizer state to "%s"', state_name)

    @classmethod
    def load(cls, prefix: str, epoch: int, load_optimizer_states: bool = False,
             **kwargs: Any) -> Any:
        """A module from a checkpoint; ``bind`` then gets the saved parameters."""
        sym, args, auxs = load_checkpoint(prefix, epoch)
        mod = cls(symbol=sym, **kwargs)
        mod._arg_params, mod._aux_params = args, auxs
        mod.params_initialized = True
        if load_optimizer_states:
            states = f"{prefix}-{epoch:04d}.states"
            if not os.path.exists(states):
                raise FileNotFoundError(f"optimizer states {states} do not exist")
            mod._preload_opt_states = states
        return mod

    def save_optimizer_states(self, fname: str) -> None:
        if not self.optimizer_initialized:
            raise RuntimeError("no optimizer to save: call init_optimizer first")
        if self._kvstore is not None and self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname, dump_optimizer=True)
            return
        blob = self._updater.get_states(dump_optimizer=True)
        tmp = f"{fname}.tmp-{os.getpid()}"
        with open(tmp, "wb") as handle:
            handle.write(blob)
        os.replace(tmp, fname)

    def load_optimizer_states(self, fname: str) -> None:
        if not self.optimizer_initialized:
            raise RuntimeError("call init_optimizer before load_optimizer_states")
        if self._kvstore is not None and self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
            return
        with open(fname, "rb") as handle:
            blob = handle.read()
        try:
            self._updater.set_states(blob)
        except ValueError as exc:
            raise ValueError(f"{fname}: {exc}") from None
