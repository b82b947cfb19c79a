"""Checkpoint files in MXNet's layout: ``prefix-symbol.json`` and ``prefix-%04d.params``.

The params file is in MXNet's binary NDArray format (never pickled; MXNet 1.9's
``mx.model.load_checkpoint`` reads it) with keys ``arg:<name>`` for parameters and
``aux:<name>`` for auxiliary states (BatchNorm's moving statistics), as MXNet names them;
``engine.nd.load`` reads it too, and loading also accepts the npz checkpoints of earlier
Rudder versions. Files are written to a temporary name and renamed, so a crash never leaves
a half-written checkpoint under the real name.

>>> import tempfile, os, engine as mx
>>> prefix = os.path.join(tempfile.mkdtemp(), 'net')
>>> save_checkpoint(prefix, 3, None, {'w': mx.nd.ones((2,))}, {})
>>> arg, aux = load_params(prefix, 3)
>>> arg['w'].asnumpy().tolist(), aux
([1.0, 1.0], {})
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy

from .context import Context, cpu
from .ndarray import NDArray, array
from .ndarray.mxnet_format import write_params
from .serialization import SerializationError, load_array_file

_KIND_KEY = "__rudder_kind__"  # the marker earlier npz checkpoints carry


class CheckpointError(ValueError):
    """A checkpoint file is missing pieces, corrupt, or not a Rudder/MXNet checkpoint."""


def params_filename(prefix: str, epoch: int) -> str:
    return f"{prefix}-{epoch:04d}.params"


def read_params_file(fname: str) -> dict[str, numpy.ndarray]:
    """Every named array of a params file (MXNet's format or npz); anything unreadable
    raises :class:`CheckpointError`."""
    try:
        arrays = load_array_file(fname)
    except SerializationError as exc:
        raise CheckpointError(f"cannot read checkpoint {fname!r}: {exc}") from exc
    if isinstance(arrays, list):
        raise CheckpointError(f"cannot read checkpoint {fname!r}: its arrays have no names")
    return arrays


def save_params(fname: str, arg_params: Mapping[str, NDArray],
                aux_params: Mapping[str, NDArray]) -> None:
    """Save parameters as ``arg:``/``aux:`` keys in MXNet's format at ``fname``."""
    arrays = {f"arg:{k}": _host(v) for k, v in arg_params.items()}
    arrays.update({f"aux:{k}": _host(v) for k, v in aux_params.items()})
    written = f"{fname}.tmp-{os.getpid()}"
    try:
        with open(written, "wb") as handle:
            handle.write(write_params(arrays))
        os.replace(written, fname)
    finally:
        if os.path.exists(written):
            os.remove(written)


def load_params_file(
    fname: str, ctx: Context | None = None
) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
    """``(arg_params, aux_params)`` from a params file written by :func:`save_params`."""
    arg: dict[str, NDArray] = {}
    aux: dict[str, NDArray] = {}
    for key, value in read_params_file(fname).items():
        if key == _KIND_KEY:
            continue
        kind, _, name = key.partition(":")
        if kind == "arg" and name:
            arg[name] = array(value, ctx=ctx or cpu(), dtype=value.dtype)
        elif kind == "aux" and name:
            aux[name] = array(value, ctx=ctx or cpu(), dtype=value.dtype)
        else:
            raise CheckpointError(
                f"{fname}: key {key!r} is neither 'arg:<name>' nor 'aux:<name>'"
            )
    return arg, aux


def save_checkpoint(prefix: str, epoch: int, symbol: Any, arg_params: Mapping[str, NDArray],
                    aux_params: Mapping[str, NDArray], remove_amp_cast: bool = True) -> None:
    """Write ``prefix-symbol.json`` (when ``symbol`` is given) and ``prefix-%04d.params``."""
    if symbol is not None:
        symbol.save(f"{prefix}-symbol.json")
    param_name = params_filename(prefix, epoch)
    save_params(param_name, arg_params, aux_params)
    logging.info('Saved checkpoint to "%s"', param_name)


def load_params(prefix: str, epoch: int) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
    """``(arg_params, aux_params)`` of checkpoint ``prefix``-``epoch``."""
    return load_params_file(params_filename(prefix, epoch))


def load_checkpoint(prefix: str, epoch: int) -> tuple[Any, dict[str, NDArray],
                                                      dict[str, NDArray]]:
    """``(symbol, arg_params, aux_params)`` saved by :func:`save_checkpoint`."""
    from . import symbol as sym

    symbol = sym.load(f"{prefix}-symbol.json")
    arg, aux = load_params(prefix, epoch)
    return symbol, arg, aux


def _host(value: Any) -> numpy.ndarray:
    if isinstance(value, NDArray):
        return value.asnumpy()
    return numpy.asarray(value)
