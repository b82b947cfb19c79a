"""The symbol-side helpers of ``mx.test_utils`` (re-exported there): ``check_consistency``,
``effective_dtype`` and ``discard_stderr``.

>>> import engine as mx
>>> x = mx.sym.var('x')
>>> ctx = {'ctx': mx.cpu(), 'x': (2, 3)}
>>> outs = mx.test_utils.check_consistency(x * 2, [ctx, ctx])
>>> sorted(outs)[1]
'x'
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy


def effective_dtype(dat: Any) -> numpy.dtype:
    """The dtype whose tolerance a comparison of ``dat`` should use: its own (MXNet lowers
    float32 to float16 only for TF32 GPU math, which the engine does not use)."""
    return numpy.dtype(dat.dtype)


@contextlib.contextmanager
def discard_stderr() -> Iterator[None]:
    """Silence the process's standard error (file descriptor 2) inside the block."""
    try:
        fileno = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (e.g. captured)
        yield
        return
    saved = os.dup(fileno)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fileno)
            yield
    finally:
        os.dup2(saved, fileno)
        os.close(saved)


def _least_precise(a: Any, b: Any) -> Any:
    return a if b is None or numpy.dtype(a).itemsize < numpy.dtype(b).itemsize else b


def check_consistency(sym: Any, ctx_list: list[dict[str, Any]], scale: float = 1.0,
                      grad_req: Any = "write", arg_params: Any = None, aux_params: Any = None,
                      rtol: Any = None, atol: Any = None, raise_on_err: bool = True,
                      ground_truth: Any = None, equal_nan: bool = False,
                      use_uniform: bool = False, rand_type: Any = numpy.float64) -> Any:
    """Bind ``sym`` (one symbol, or one per entry) once per ``ctx_list`` entry (``ctx``,
    input shapes, optional ``type_dict``), run it on the same random inputs, and check that
    every run's outputs and (unless ``grad_req='null'``) gradients agree with the most
    precise run's. Returns that run's outputs and gradients by name."""
    from .symbol import Symbol
    from .test_utils import assert_almost_equal

    assert len(ctx_list) > 1
    symbols = [sym] * len(ctx_list) if isinstance(sym, Symbol) else list(sym)
    assert len(symbols) == len(ctx_list)
    output_names = symbols[0].list_outputs()
    arg_names = symbols[0].list_arguments()
    executors = []
    for s, spec in zip(symbols, ctx_list, strict=True):
        assert s.list_arguments() == arg_names and s.list_outputs() == output_names
        executors.append(s.simple_bind(grad_req=grad_req, **spec))
    arg_params = dict(arg_params or {})
    aux_params = dict(aux_params or {})
    for name, arr in sorted(executors[0].arg_dict.items()):  # a fixed order: reproducible
        if name not in arg_params:
            if use_uniform:
                arg_params[name] = numpy.random.uniform(-0.92 * scale, 0.92 * scale,
                                                        size=arr.shape).astype(rand_type)
            else:
                arg_params[name] = numpy.random.normal(size=arr.shape,
                                                       scale=scale).astype(rand_type)
    for name in executors[0].aux_dict:
        aux_params.setdefault(name, 0)
    for exe in executors:
        for name, arr in exe.arg_dict.items():
            arr[:] = arg_params[name]
        for name, arr in exe.aux_dict.items():
            arr[:] = aux_params[name]
        if grad_req == "add":
            for arr in exe.grad_arrays:
                if arr is not None:
                    arr[:] = 0
    dtypes = [numpy.dtype(exe.outputs[0].dtype) for exe in executors]
    truth_index = int(numpy.argmax([d.itemsize for d in dtypes]))
    truth = ground_truth
    if truth is None:  # the arrays themselves: the runs below fill them
        truth = dict(executors[truth_index].output_dict)
        if grad_req != "null":
            truth.update(executors[truth_index].grad_dict)

    def compare(i: int, names: list[str], arrays: list[Any], phase: str) -> None:
        for name, arr in zip(names, arrays, strict=False):
            expected = truth.get(name)
            if expected is None:
                assert arr is None, f"{phase}: {name} has no reference"
                continue
            try:
                assert_almost_equal(arr, expected, rtol=rtol, atol=atol, equal_nan=equal_nan)
            except AssertionError:
                if raise_on_err:
                    raise
                print(f"{phase} error: context {i} vs {truth_index} at {name}")

    for exe in executors:
        exe.forward(is_train=False)
    for i, exe in enumerate(executors):
        if i != truth_index:
            compare(i, output_names, exe.outputs, "predict")
    if grad_req != "null":
        for exe in executors:
            exe.forward(is_train=True)
        least = [out.dtype for out in executors[0].outputs]
        for exe in executors:
            least = [_least_precise(out.dtype, dt) for out, dt in zip(exe.outputs, least,
                                                                      strict=True)]
        head_grads = [out.asnumpy().astype(dt) for out, dt in zip(executors[0].outputs, least,
                                                                  strict=True)]
        from .ndarray import array

        for exe in executors:
            exe.backward([array(g, ctx=out.context, dtype=out.dtype)
                          for g, out in zip(head_grads, exe.outputs, strict=True)])
        for i, exe in enumerate(executors):
            if i != truth_index:
                compare(i, output_names + arg_names, exe.outputs + exe.grad_arrays, "train")
    return truth
