"""Cells built from other cells: ``SequentialRNNCell``, ``HybridSequentialRNNCell``,
``DropoutCell``, ``ModifierCell``, ``ZoneoutCell``, ``ResidualCell`` and
``BidirectionalCell`` (MXNet 1.9.1's names, prefixes and unroll rules).

>>> import engine as mx
>>> from engine.gluon import rnn
>>> stack = rnn.SequentialRNNCell()
>>> stack.add(rnn.LSTMCell(4, input_size=2)); stack.add(rnn.GRUCell(3, input_size=4))
>>> stack.initialize()
>>> out, states = stack.unroll(3, mx.nd.ones((5, 3, 2)), merge_outputs=True)
>>> out.shape, len(states)
((5, 3, 3), 3)
"""

from __future__ import annotations

from typing import Any

from ... import ndarray as nd
from .rnn_cell import HybridRecurrentCell, RecurrentCell, _context_of, begin_state_func
from .sequence import mask_invalid, ops_for, reverse_valid, split_steps, symbolic


class _StackMixin:
    """Children run in order, each on the previous one's outputs; states are concatenated."""

    _children: Any

    def add(self, cell: RecurrentCell) -> None:
        """Append a cell to the stack."""
        self.register_child(cell)  # type: ignore[attr-defined]

    def state_info(self, batch_size: int = 0) -> list[Any]:
        return sum((c.state_info(batch_size) for c in self._children.values()), [])

    def begin_state(self, **kwargs: Any) -> list[Any]:
        if self._modified:  # type: ignore[attr-defined]
            raise AssertionError("After applying modifier cells (e.g. ZoneoutCell) the base "
                                 "cell cannot be called directly. Call the modifier cell "
                                 "instead.")
        return sum((c.begin_state(**kwargs) for c in self._children.values()), [])

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, Any]:
        self.reset()  # type: ignore[attr-defined]
        _, _, batch_size = split_steps(length, inputs, layout, None)
        if begin_state is None:
            with _context_of(inputs):
                begin_state = self.begin_state(batch_size=batch_size,
                                               func=begin_state_func(inputs))
        cells = list(self._children.values())
        position, next_states = 0, []
        for i, cell in enumerate(cells):
            count = len(cell.state_info())
            states = begin_state[position:position + count]
            position += count
            inputs, states = cell.unroll(
                length, inputs=inputs, begin_state=states, layout=layout,
                merge_outputs=None if i < len(cells) - 1 else merge_outputs,
                valid_length=valid_length)
            next_states.extend(states)
        return inputs, next_states

    def _step(self, inputs: Any, states: Any) -> Any:
        self._counter += 1  # type: ignore[attr-defined]
        position, next_states = 0, []
        for cell in self._children.values():
            if isinstance(cell, BidirectionalCell):
                raise AssertionError("BidirectionalCell cannot be stepped; use unroll")
            count = len(cell.state_info())
            inputs, new = cell(inputs, states[position:position + count])
            position += count
            next_states.append(new)
        return inputs, sum(next_states, [])

    def __getitem__(self, i: int) -> Any:
        return list(self._children.values())[i]

    def __len__(self) -> int:
        return len(self._children)


class SequentialRNNCell(_StackMixin, RecurrentCell):
    """Stacks recurrent cells; ``begin_state`` and the state list cover all of them."""

    def forward(self, inputs: Any, states: Any) -> Any:
        return self._step(inputs, states)


class HybridSequentialRNNCell(_StackMixin, HybridRecurrentCell):
    """``SequentialRNNCell`` for hybridizable cells."""

    def forward(self, inputs: Any, states: Any) -> Any:  # type: ignore[override]
        return self._step(inputs, states)


class DropoutCell(HybridRecurrentCell):
    """Applies dropout to the inputs and passes them on; it has no state."""

    def __init__(self, rate: float, axes: tuple[int, ...] = (), prefix: str | None = None,
                 params: Any = None) -> None:
        super().__init__(prefix, params)
        if not isinstance(rate, (int, float)):
            raise AssertionError("rate must be a number")
        self._rate = rate
        self._axes = tuple(axes)

    def _alias(self) -> str:
        return "dropout"

    def __repr__(self) -> str:
        return f"DropoutCell(rate={self._rate}, axes={self._axes})"

    def state_info(self, batch_size: int = 0) -> list[Any]:
        return []

    def hybrid_forward(self, F: Any, inputs: Any, states: Any) -> Any:  # noqa: N803
        if self._rate > 0:
            name = {"name": f"t{self._counter}_fwd"} if symbolic(inputs) else {}
            inputs = F.Dropout(inputs, p=self._rate, axes=self._axes, **name)
        return inputs, states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, Any]:
        self.reset()
        merged, _, _ = split_steps(length, inputs, layout, merge_outputs)
        if not isinstance(merged, list):  # one dropout over the whole sequence
            return self.hybrid_forward(ops_for(merged), merged,
                                       begin_state if begin_state else [])
        return super().unroll(length, inputs, begin_state, layout, merge_outputs, valid_length)


class ModifierCell(HybridRecurrentCell):
    """Wraps a base cell and changes its behaviour; the base cell can then only be used
    through the modifier."""

    def __init__(self, base_cell: RecurrentCell) -> None:
        if base_cell._modified:
            raise AssertionError(f"Cell {base_cell.name} is already modified. One cell cannot "
                                 "be modified twice")
        base_cell._modified = True
        super().__init__(prefix=base_cell.prefix + self._alias(), params=None)
        self.base_cell = base_cell

    @property
    def params(self) -> Any:
        return self.base_cell.params

    def state_info(self, batch_size: int = 0) -> list[Any]:
        return self.base_cell.state_info(batch_size)

    def begin_state(self, func: Any = nd.zeros, **kwargs: Any) -> list[Any]:
        if self._modified:
            raise AssertionError("After applying modifier cells (e.g. DropoutCell) the base "
                                 "cell cannot be called directly. Call the modifier cell "
                                 "instead.")
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(func=func, **kwargs)
        finally:
            self.base_cell._modified = True

    def forward(self, inputs: Any, states: Any) -> Any:
        self._counter += 1
        return self.hybrid_forward(ops_for(inputs), inputs, states)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_cell!r})"


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al.): in training, each output/state unit keeps its previous value
    with probability ``zoneout_outputs``/``zoneout_states``."""

    def __init__(self, base_cell: RecurrentCell, zoneout_outputs: float = 0.0,
                 zoneout_states: float = 0.0) -> None:
        if isinstance(base_cell, BidirectionalCell):
            raise AssertionError("BidirectionalCell doesn't support zoneout since it doesn't "
                                 "support step. Please add ZoneoutCell to the cells underneath "
                                 "instead.")
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self._prev_output: Any = None

    def _alias(self) -> str:
        return "zoneout"

    def __repr__(self) -> str:
        return (f"ZoneoutCell(p_out={self.zoneout_outputs}, p_state={self.zoneout_states}, "
                f"{self.base_cell!r})")

    def reset(self) -> None:
        super().reset()
        self._prev_output = None

    def hybrid_forward(self, F: Any, inputs: Any, states: Any) -> Any:  # noqa: N803
        next_output, next_states = self.base_cell(inputs, states)

        def keep_new(p: float, like: Any) -> Any:
            return F.Dropout(F.ones_like(like), p=p)  # all ones outside training

        prev_output = self._prev_output
        if prev_output is None:
            prev_output = F.zeros_like(next_output)
        output = next_output
        if self.zoneout_outputs != 0:
            output = F.where(keep_new(self.zoneout_outputs, next_output), next_output,
                             prev_output)
        if self.zoneout_states != 0:
            next_states = [F.where(keep_new(self.zoneout_states, new), new, old)
                           for new, old in zip(next_states, states, strict=True)]
        self._prev_output = output
        return output, next_states


class ResidualCell(ModifierCell):
    """Adds the cell's input to its output (He et al.'s residual connection)."""

    def _alias(self) -> str:
        return "residual"

    def hybrid_forward(self, F: Any, inputs: Any, states: Any) -> Any:  # noqa: N803
        output, states = self.base_cell(inputs, states)
        if symbolic(inputs):
            return F.elemwise_add(output, inputs, name=f"t{self._counter}_fwd"), states
        return output + inputs, states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, Any]:
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs, begin_state, layout,
                                                    merge_outputs, valid_length)
        finally:
            self.base_cell._modified = True
        merge = not isinstance(outputs, list) if merge_outputs is None else merge_outputs
        inputs, axis, _ = split_steps(length, inputs, layout, merge)
        if valid_length is not None:
            _no_valid_length_on_symbols(inputs)
            stacked = inputs if merge else nd.stack(*inputs, axis=axis)
            masked = mask_invalid(stacked, valid_length, axis)
            inputs = masked if merge else split_steps(length, masked, layout, False)[0]
        if symbolic(inputs):  # MXNet's operator (and name) on graphs: elemwise_add
            from ... import symbol

            if merge:
                return symbol.elemwise_add(outputs, inputs), states
            return [symbol.elemwise_add(o, i) for o, i in zip(outputs, inputs, strict=True)], \
                states
        if merge:
            return outputs + inputs, states
        return [o + i for o, i in zip(outputs, inputs, strict=True)], states


def _no_valid_length_on_symbols(inputs: Any) -> None:
    if symbolic(inputs):
        raise NotImplementedError("unroll with valid_length on Symbols is not supported; "
                                  "unroll NDArrays")


def _reverse_steps(steps: list[Any], valid_length: Any) -> list[Any]:
    if valid_length is None:
        return list(reversed(steps))
    _no_valid_length_on_symbols(steps)
    flipped = reverse_valid(nd.stack(*steps, axis=0), valid_length)
    return [flipped[i] for i in range(len(steps))]


class BidirectionalCell(HybridRecurrentCell):
    """Runs ``l_cell`` forward and ``r_cell`` backward in time and concatenates their outputs
    on the feature axis; it can only be unrolled, not stepped."""

    def __init__(self, l_cell: RecurrentCell, r_cell: RecurrentCell,
                 output_prefix: str = "bi_") -> None:
        super().__init__(prefix="", params=None)
        self.register_child(l_cell, "l_cell")
        self.register_child(r_cell, "r_cell")
        self._output_prefix = output_prefix

    def forward(self, inputs: Any, states: Any) -> Any:  # type: ignore[override]
        raise NotImplementedError("Bidirectional cannot be stepped. Please use unroll")

    def __repr__(self) -> str:
        l_cell, r_cell = self._children.values()
        return f"BidirectionalCell(forward={l_cell!r}, backward={r_cell!r})"

    def state_info(self, batch_size: int = 0) -> list[Any]:
        return sum((c.state_info(batch_size) for c in self._children.values()), [])

    def begin_state(self, **kwargs: Any) -> list[Any]:
        if self._modified:
            raise AssertionError("After applying modifier cells (e.g. DropoutCell) the base "
                                 "cell cannot be called directly. Call the modifier cell "
                                 "instead.")
        return sum((c.begin_state(**kwargs) for c in self._children.values()), [])

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, Any]:
        self.reset()
        steps, axis, batch_size = split_steps(length, inputs, layout, False)
        reversed_steps = _reverse_steps(steps, valid_length)
        if begin_state is None:
            with _context_of(steps):
                begin_state = self.begin_state(batch_size=batch_size,
                                               func=begin_state_func(steps))
        l_cell, r_cell = self._children.values()
        F = ops_for(steps)  # noqa: N806 - MXNet's name for nd or symbol
        n_left = len(l_cell.state_info(batch_size))
        l_outputs, l_states = l_cell.unroll(length, steps, begin_state[:n_left], layout,
                                            merge_outputs, valid_length)
        r_outputs, r_states = r_cell.unroll(length, reversed_steps, begin_state[n_left:],
                                            layout, False, valid_length)
        r_outputs = _reverse_steps(list(r_outputs), valid_length)
        if merge_outputs is None:
            merge_outputs = not isinstance(l_outputs, list)
            l_outputs = split_steps(None, l_outputs, layout, merge_outputs)[0]
            r_outputs = split_steps(None, r_outputs, layout, merge_outputs)[0]
        graph = symbolic(steps)
        if merge_outputs:
            if isinstance(r_outputs, list):
                r_outputs = F.stack(*r_outputs, axis=axis)
            name = {"name": f"{self._output_prefix}out"} if graph else {}
            outputs: Any = F.concat(l_outputs, r_outputs, dim=2, **name)
        else:
            outputs = [F.concat(lo, ro, dim=1,
                                **({"name": f"{self._output_prefix}t{i}"} if graph else {}))
                       for i, (lo, ro) in enumerate(zip(l_outputs, r_outputs, strict=True))]
        if valid_length is not None:
            stacked = outputs if merge_outputs else nd.stack(*outputs, axis=axis)
            outputs = mask_invalid(stacked, valid_length, axis)
            if not merge_outputs:
                outputs = split_steps(length, outputs, layout, False)[0]
        return outputs, l_states + r_states
