"""The Trainer's side of a dist kvstore: one replica per rank, gradients summed in buckets.

MXNet sends each gradient to parameter servers and pulls weights back. Here every rank
holds the weights and the optimizer; the Trainer

- broadcasts rank 0's initial weights when it first steps (MXNet's ``kv.init`` + pull),
- sums the gradients over the ranks in place, through the flat buffers the fused optimizer
  uses, bucket by bucket as backward finishes them (:mod:`engine.distributed.reducer`),
- updates every replica identically (the same optimizer on the same sums).

The flat layout follows the order backward finished the parameters in the first step, as
rank 0 saw it (broadcast, so every rank has the same buckets). ``RUDDER_DIST_OVERLAP=0``
sums only in ``step()`` (no reduction during backward); parameters with ``grad_req='add'``
(accumulation over several backward passes) always do.
"""

from __future__ import annotations

import os
from typing import Any

import numpy

from .. import grad_hooks
from ..optimizer.flat import FlatGroup


class DistGradSync:
    """Gradient reduction over the ranks of ``kvstore`` for ``trainer``'s parameters."""

    def __init__(self, trainer: Any, kvstore: Any) -> None:
        self.trainer = trainer
        self.kvstore = kvstore
        self.world = kvstore.world
        self.overlap = os.environ.get("RUDDER_DIST_OVERLAP", "1") not in ("0", "false", "no")
        self.reducer: Any = None
        self.groups: list[list[FlatGroup]] = []
        self._key: tuple[int, ...] = ()
        self._order: list[int] = []
        self._seen: list[int] = []  # parameter indices in the order backward finished them
        self._index_of: dict[int, int] = {}
        self._accumulating = False
        grad_hooks.add_listener(self)

    # ------------------------------------------------------ gradient notifications
    def backward_started(self, variables: dict[int, Any]) -> None:
        # read per backward: accumulating gradients must not travel before step()
        self._accumulating = any(p.grad_req == "add" for _, p in self.trainer._trainable())
        if self.reducer is not None and self.overlap and not self._accumulating:
            self.reducer.backward_started(variables)

    def grad_ready(self, variable: Any) -> None:
        if self.reducer is None:  # first step: learn the order backward finishes them in
            index = self._index_of.get(id(variable))
            if index is None:
                self._index_of = {id(p._ctx_data[0]): i for i, p in self.trainer._trainable()
                                  if p._ctx_data}
                index = self._index_of.get(id(variable))
            if index is not None and index not in self._seen:
                self._seen.append(index)
        elif self.overlap and not self._accumulating:
            self.reducer.grad_ready(variable)

    # ------------------------------------------------------------------ weights
    def broadcast_params(self, params: list[Any]) -> None:
        """Every context of ``params`` gets rank 0's first-context value."""
        from ..kvstore.dist import broadcast_arrays

        firsts = [p.list_data()[0] for p in params]
        broadcast_arrays([a.raw for a in firsts], self.world)
        for p, first in zip(params, firsts, strict=True):
            for other in p.list_data()[1:]:
                first.copyto(other)

    def copy_weights_from_first_context(self) -> None:
        """After an update of context 0 alone (update_on_kvstore): the other replicas."""
        first = self.groups[0] if self.groups else []
        for per_context in self.groups[1:]:
            for src, dst in zip(first, per_context, strict=True):
                dst.weight[...] = src.weight if _xp(src.weight) is _xp(dst.weight) else \
                    _xp(dst.weight).asarray(src.weight)

    # ---------------------------------------------------------------- gradients
    def allreduce(self, entries: list[tuple[int, Any]]) -> None:
        """Sum the gradients of ``entries`` (index, Parameter) over the ranks, in place."""
        self._accumulating = any(p.grad_req == "add" for _, p in entries)
        self._ensure_layout(entries)
        self.reducer.finish()

    def flat_groups(self) -> list[tuple[int, FlatGroup]]:
        return [(c, g) for c, per_context in enumerate(self.groups) for g in per_context]

    def _ensure_layout(self, entries: list[tuple[int, Any]]) -> None:
        key = tuple(i for i, _ in entries)
        params = self.trainer._params
        if self.reducer is not None and key == self._key and all(
                g.intact(params, c) for c, g in self.flat_groups()):
            return
        if self.reducer is None or key != self._key:
            self._order = self._agree_order(entries)
        self.groups = _build_groups(self.trainer._contexts, entries, self._order)
        residuals = self.reducer.residuals() if self.reducer is not None and \
            self.reducer.compression is not None else None
        self.reducer = _make_reducer(self, residuals)
        self._key = key

    def _agree_order(self, entries: list[tuple[int, Any]]) -> list[int]:
        """Rank 0's order (what backward finished first comes first), the same on all."""
        trainable = [i for i, _ in entries]
        known = set(trainable)
        previous = [i for i in (self._order or self._seen) if i in known]
        rest = [i for i in reversed(trainable) if i not in set(previous)]
        order = numpy.asarray(previous + rest, dtype=numpy.int64)
        self.world.cpu.broadcast(order).wait()
        return [int(i) for i in order]

    def close(self) -> None:
        grad_hooks.remove_listener(self)


def _make_reducer(sync: DistGradSync, residuals: Any) -> Any:
    from ..distributed.reducer import GradientReducer

    return GradientReducer(sync.world, sync.groups, sync._order, sync.kvstore.compression,
                           residuals=residuals)


def _build_groups(contexts: list[Any], entries: list[tuple[int, Any]],
                  order: list[int]) -> list[list[FlatGroup]]:
    """Per context, one FlatGroup per dtype with the parameters in ``order``."""
    by_index = dict(entries)
    groups = []
    for c, ctx in enumerate(contexts):
        by_dtype: dict[str, list[tuple[int, Any, Any]]] = {}
        for i in order:
            p = by_index[i]
            data, grad = p._ctx_data[c], p._ctx_grad[c]
            by_dtype.setdefault(data.raw.dtype.str, []).append((i, data, grad))
        groups.append([FlatGroup(ctx, members) for members in by_dtype.values()])
    return groups


def _xp(raw: Any) -> Any:
    from ..backend import array_module

    return array_module(raw)
