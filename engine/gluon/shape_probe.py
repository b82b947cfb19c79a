"""Deferred shape inference for user HybridBlocks that do not override ``infer_shape``.

MXNet infers unknown parameter dims (shape entries of 0) symbolically. Rudder runs
imperatively, so on the first call it runs ``hybrid_forward`` once in inference mode with
an ``F`` whose shape-defining operators (FullyConnected, Convolution, BatchNorm,
LayerNorm, Embedding, LeakyReLU/prelu) complete the shapes of the not-yet-initialized
parameters they receive, initialize them, and then compute normally. Any other use of an
uninitialized parameter raises an error that says how to give its shape.

>>> import engine as mx
>>> class Affine(mx.gluon.HybridBlock):
...     def __init__(self):
...         super().__init__()
...         self.w = self.params.get("w", shape=(3, 0), allow_deferred_init=True)
...     def hybrid_forward(self, F, x, w):
...         return F.FullyConnected(x, w, num_hidden=3, no_bias=True)
>>> block = Affine(); block.initialize(); block(mx.nd.ones((2, 5))).shape
(2, 3)
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import autograd
from .parameter import Parameter


class _Pending:
    """Stands in for a deferred parameter's data during the probe."""

    def __init__(self, param: Parameter, ctx: Any) -> None:
        self.param = param
        self.ctx = ctx

    def resolve(self, shape: tuple[int, ...]) -> Any:
        self.param.shape = shape
        self.param._finish_deferred_init()
        return self.param.data(self.ctx)

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(
            f"Parameter '{self.param.name}' has unknown dims {self.param.shape} and its shape "
            "cannot be inferred from how it is used; give its full shape, or override "
            "infer_shape(self, x, *args) in the Block to set param.shape"
        )

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        return self.__getattr__("op")

    __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = __rsub__ = __truediv__ = _fail
    __rtruediv__ = __matmul__ = __neg__ = __getitem__ = _fail


def _resolve(value: Any, shape: tuple[int, ...]) -> Any:
    return value.resolve(shape) if isinstance(value, _Pending) else value


class _ProbeF:
    """``engine.nd`` whose shape-defining operators complete pending parameters."""

    def __init__(self, nd: Any) -> None:
        self._nd = nd

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._nd, name)
        if not callable(target):
            return target

        def checked(*args: Any, **kwargs: Any) -> Any:
            for value in (*args, *kwargs.values()):
                if isinstance(value, _Pending):
                    value._fail()
            return target(*args, **kwargs)

        return checked

    def FullyConnected(self, data: Any, weight: Any, bias: Any = None,  # noqa: N802
                       num_hidden: int | None = None, no_bias: bool = False,
                       flatten: bool = True, **kw: Any) -> Any:
        units = num_hidden if num_hidden else _known_rows(weight)
        in_units = int(numpy.prod(data.shape[1:])) if flatten else data.shape[-1]
        weight = _resolve(weight, (units, in_units))
        bias = _resolve(bias, (units,))
        return self._nd.FullyConnected(data, weight, bias, num_hidden=num_hidden,
                                       no_bias=no_bias, flatten=flatten, **kw)

    def Convolution(self, data: Any, weight: Any, bias: Any = None, kernel: Any = None,  # noqa: N802
                    num_filter: int | None = None, num_group: int = 1, **kw: Any) -> Any:
        filters = num_filter if num_filter else _known_rows(weight)
        kernel_t = (kernel,) if isinstance(kernel, int) else tuple(kernel)
        weight = _resolve(weight, (filters, data.shape[1] // num_group, *kernel_t))
        bias = _resolve(bias, (filters,))
        return self._nd.Convolution(data, weight, bias, kernel=kernel, num_filter=num_filter,
                                    num_group=num_group, **kw)

    def BatchNorm(self, data: Any, gamma: Any, beta: Any, moving_mean: Any,  # noqa: N802
                  moving_var: Any, axis: int = 1, **kw: Any) -> Any:
        shape = (data.shape[axis],)
        args = [_resolve(a, shape) for a in (gamma, beta, moving_mean, moving_var)]
        return self._nd.BatchNorm(data, *args, axis=axis, **kw)

    def LayerNorm(self, data: Any, gamma: Any, beta: Any, axis: int = -1,  # noqa: N802
                  **kw: Any) -> Any:
        shape = (data.shape[axis],)
        return self._nd.LayerNorm(data, _resolve(gamma, shape), _resolve(beta, shape),
                                  axis=axis, **kw)

    def Embedding(self, data: Any, weight: Any, input_dim: int | None = None,  # noqa: N802
                  output_dim: int | None = None, **kw: Any) -> Any:
        if isinstance(weight, _Pending):
            if not input_dim or not output_dim:
                weight._fail()
            weight = weight.resolve((int(input_dim), int(output_dim)))  # type: ignore[arg-type]
        return self._nd.Embedding(data, weight, input_dim=input_dim, output_dim=output_dim, **kw)

    def LeakyReLU(self, data: Any, gamma: Any = None, **kw: Any) -> Any:  # noqa: N802
        if isinstance(gamma, _Pending):
            gamma = gamma.resolve((data.shape[1] if data.ndim > 1 else 1,))
        return self._nd.LeakyReLU(data, gamma=gamma, **kw)


def _known_rows(weight: Any) -> int:
    shape = weight.param.shape if isinstance(weight, _Pending) else weight.shape
    if not shape or not shape[0]:
        raise RuntimeError(
            "cannot infer the output size of a parameter with unknown first dim: pass "
            "num_hidden/num_filter to the operator or give the parameter's shape"
        )
    return int(shape[0])


def probe_shapes(block: Any, x: Any, *args: Any) -> None:
    """Run ``block.hybrid_forward`` once (inference mode, not recorded) to complete and
    initialize its deferred parameters."""
    from .. import nd

    ctx = getattr(x, "context", None)
    params: dict[str, Any] = {}
    for name, param in block._reg_params.items():
        params[name] = _Pending(param, ctx) if param._deferred_init else param.data(ctx)
    with autograd.pause(train_mode=False):
        block.hybrid_forward(_ProbeF(nd), x, *args, **params)
    pending = [p.name for p in block._reg_params.values() if p._deferred_init]
    if pending:
        raise RuntimeError(
            f"{type(block).__name__}: parameter(s) {pending} were not used by a "
            "shape-defining operator, so their shape is unknown; give their full shapes or "
            "override infer_shape(self, x, *args)"
        )
