"""Basic layers: ``Sequential``, ``HybridSequential``, ``Dense``, ``Dropout``, ``Flatten``,
``BatchNorm``, ``LayerNorm``, ``Embedding``, ``Lambda``, ``HybridLambda``.

>>> import engine as mx
>>> net = mx.gluon.nn.HybridSequential()
>>> net.add(mx.gluon.nn.Dense(8, activation="relu"), mx.gluon.nn.Dense(2))
>>> net.initialize(); net(mx.nd.ones((4, 5))).shape
(4, 2)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy

from ..block import Block, HybridBlock
from ..hybrid.hybrid_block import graph_name
from .activations import Activation
from .registry import register


class _SequentialMixin:
    _children: Any

    def add(self, *blocks: Block) -> None:
        """Append layers (run in the order added)."""
        for block in blocks:
            self.register_child(block)  # type: ignore[attr-defined]

    def __getitem__(self, key: int | slice) -> Any:
        layers = list(self._children.values())[key]
        if isinstance(key, slice):
            net = type(self)(prefix=self.prefix)  # type: ignore[attr-defined]
            with net.name_scope():
                net.add(*layers)
            return net
        return layers

    def __len__(self) -> int:
        return len(self._children)

    def __iter__(self) -> Any:
        return iter(self._children.values())


@register
class Sequential(_SequentialMixin, Block):
    """Stacks Blocks; ``forward`` feeds each one's output to the next."""

    def forward(self, x: Any, *args: Any) -> Any:
        for block in self._children.values():
            x = block(x, *args)
            args = ()
            if isinstance(x, (tuple, list)):
                x, args = x[0], tuple(x[1:])
        return (x, *args) if args else x

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """Hybridize the children; warns, as MXNet does, when HybridSequential would do."""
        if self._children and all(isinstance(c, HybridBlock) for c in self._children.values()):
            warnings.warn(
                f"All children of this Sequential layer '{self.prefix}' are HybridBlocks. "
                "Consider using HybridSequential for the best performance.", stacklevel=2)
        super().hybridize(active, **kwargs)


@register
class HybridSequential(_SequentialMixin, HybridBlock):
    """Stacks HybridBlocks (``hybridize()`` is accepted)."""

    def forward(self, x: Any, *args: Any) -> Any:
        return Sequential.forward(self, x, *args)  # type: ignore[arg-type]


@register
class Dense(HybridBlock):
    """Fully connected layer ``activation(x · weightᵀ + bias)``; ``weight`` is
    (units, in_units), with in_units inferred at the first forward when 0."""

    def __init__(self, units: int, activation: str | None = None, use_bias: bool = True,
                 flatten: bool = True, dtype: Any = "float32", weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_units: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if int(units) < 0:
            # MXNet accepts 0 units (an empty layer); only a negative count is meaningless
            raise ValueError(f"Dense units must be a non-negative integer, got {units!r}")
        self._flatten = flatten
        self._units = int(units)
        self._in_units = in_units
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(units, in_units),
                                          init=weight_initializer, dtype=dtype,
                                          allow_deferred_init=True)
            if use_bias:
                self.bias = self.params.get("bias", shape=(units,), init=bias_initializer,
                                            dtype=dtype, allow_deferred_init=True)
            else:
                self.bias = None
            self.act = Activation(activation, prefix=activation + "_") if activation else None

    def infer_shape(self, x: Any, *args: Any) -> None:
        # a (0, n) weight is never "known", so a 0-unit layer always arrives here first
        if self._units == 0:
            raise ValueError(f"{self.name}: a Dense layer with 0 units cannot run (MXNet's "
                             "FullyConnected needs num_hidden >= 1)")
        in_units = int(numpy.prod(x.shape[1:])) if self._flatten else x.shape[-1]
        self.weight.shape = (self._units, in_units)

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:  # noqa: N803
        try:
            out = F.FullyConnected(x, weight, bias, no_bias=bias is None,
                                   num_hidden=self._units, flatten=self._flatten,
                                   **graph_name(F))
        except ValueError as err:
            raise ValueError(f"{self.name} (Dense {self._layout()}): {err}") from err
        return self.act(out) if self.act is not None else out

    def _layout(self) -> str:
        shape = self.weight.shape or (self._units, 0)
        return f"{shape[1] if shape[1] else None} -> {shape[0]}"

    def __repr__(self) -> str:
        act = self.act._act_type if self.act is not None else "linear"
        return f"Dense({self._layout()}, {act})"


@register
class Dropout(HybridBlock):
    """Zeroes a fraction ``rate`` of the inputs in training mode (scaled by 1/(1-rate))."""

    def __init__(self, rate: float, axes: tuple[int, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not 0 <= rate < 1:
            raise ValueError(f"Dropout rate must be in [0, 1), got {rate}")
        self._rate = rate
        self._axes = tuple(axes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        if self._rate > 0:
            return F.Dropout(x, p=self._rate, axes=self._axes, **graph_name(F))
        return x

    def __repr__(self) -> str:
        return f"Dropout(p = {self._rate}, axes={self._axes})"


@register
class Flatten(HybridBlock):
    """Reshape (N, d1, d2, ...) to (N, d1·d2·...)."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.Flatten(x)

    def __repr__(self) -> str:
        return "Flatten"


def _norm_params(block: HybridBlock, in_channels: int, center: bool, scale: bool,
                 gamma_init: Any, beta_init: Any) -> None:
    block.gamma = block.params.get("gamma", grad_req="write" if scale else "null",
                                   shape=(in_channels,), init=gamma_init,
                                   allow_deferred_init=True, differentiable=scale)
    block.beta = block.params.get("beta", grad_req="write" if center else "null",
                                  shape=(in_channels,), init=beta_init,
                                  allow_deferred_init=True, differentiable=center)


@register
class BatchNorm(HybridBlock):
    """Batch normalization over ``axis`` (channels); running statistics are parameters
    with grad_req='null', updated in training mode with ``momentum``."""

    def __init__(self, axis: int = 1, momentum: float = 0.9, epsilon: float = 1e-5,
                 center: bool = True, scale: bool = True, use_global_stats: bool = False,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones",
                 running_mean_initializer: Any = "zeros",
                 running_variance_initializer: Any = "ones", in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._kwargs = {"axis": axis, "eps": epsilon, "momentum": momentum,
                        "fix_gamma": not scale, "use_global_stats": use_global_stats}
        self._axis = axis
        self.in_channels = in_channels
        with self.name_scope():
            _norm_params(self, in_channels, center, scale, gamma_initializer, beta_initializer)
            self.running_mean = self.params.get(
                "running_mean", grad_req="null", shape=(in_channels,),
                init=running_mean_initializer, allow_deferred_init=True, differentiable=False)
            self.running_var = self.params.get(
                "running_var", grad_req="null", shape=(in_channels,),
                init=running_variance_initializer, allow_deferred_init=True,
                differentiable=False)

    def infer_shape(self, x: Any, *args: Any) -> None:
        channels = x.shape[self._axis]
        for p in (self.gamma, self.beta, self.running_mean, self.running_var):
            p.shape = (channels,)

    def cast(self, dtype: Any) -> None:
        if numpy.dtype(dtype).name == "float16":
            dtype = "float32"  # statistics stay in float32, as MXNet keeps them
        super().cast(dtype)

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any, running_mean: Any,  # noqa: N803
                       running_var: Any) -> Any:
        return F.BatchNorm(x, gamma, beta, running_mean, running_var, **self._kwargs,
                           **graph_name(F))

    def __repr__(self) -> str:
        channels = self.gamma.shape[0] if self.gamma.shape else None
        args = ", ".join(f"{k}={v}" for k, v in self._kwargs.items())
        return f"BatchNorm({args}, in_channels={channels or None})"


@register
class LayerNorm(HybridBlock):
    """Normalizes each sample over ``axis`` (default the last), then scales and shifts."""

    def __init__(self, axis: int = -1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, beta_initializer: Any = "zeros",
                 gamma_initializer: Any = "ones", in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._axis = axis
        self._epsilon = epsilon
        with self.name_scope():
            _norm_params(self, in_channels, center, scale, gamma_initializer, beta_initializer)

    def infer_shape(self, x: Any, *args: Any) -> None:
        channels = x.shape[self._axis]
        self.gamma.shape = (channels,)
        self.beta.shape = (channels,)

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any) -> Any:  # noqa: N803
        return F.LayerNorm(x, gamma, beta, axis=self._axis, eps=self._epsilon)


@register
class Embedding(HybridBlock):
    """Maps integer indices to rows of a (input_dim, output_dim) weight."""

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32",
                 weight_initializer: Any = None, sparse_grad: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # sparse_grad=True is accepted: Rudder has no row_sparse storage, so the gradient
        # stays dense, with the same values MXNet's row_sparse gradient holds
        self._sparse_grad = sparse_grad
        self._dtype = numpy.dtype(dtype).name
        self._input_dim, self._output_dim = int(input_dim), int(output_dim)
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(input_dim, output_dim),
                                          init=weight_initializer, dtype=dtype,
                                          allow_deferred_init=True)

    def hybrid_forward(self, F: Any, x: Any, weight: Any) -> Any:  # noqa: N803
        return F.Embedding(x, weight, input_dim=self._input_dim, output_dim=self._output_dim,
                           **graph_name(F))

    def __repr__(self) -> str:
        return f"Embedding({self._input_dim} -> {self._output_dim}, {self._dtype})"


@register
class Lambda(Block):
    """Wraps a function (or the name of an ``engine.nd`` function) as a Block."""

    def __init__(self, function: Callable[..., Any] | str, prefix: str | None = None) -> None:
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            from ... import nd

            if not hasattr(nd, function):
                raise ValueError(f"Function name {function!r} is not found in engine.nd")
            function = getattr(nd, function)
        if not callable(function):
            raise ValueError(f"Unrecognized function in lambda: {function!r}")
        self._func = function

    def forward(self, *args: Any) -> Any:
        return self._func(*args)

    def __repr__(self) -> str:
        return f"Lambda({getattr(self._func, '__name__', self._func)})"


@register
class HybridLambda(HybridBlock):
    """Wraps ``function(F, x, *args)`` (or an ``engine.nd`` function name) as a HybridBlock."""

    def __init__(self, function: Callable[..., Any] | str, prefix: str | None = None) -> None:
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            name = function
            self._func: Callable[..., Any] = lambda F, *a: getattr(F, name)(*a)  # noqa: N803
            self._func_name = name
        elif callable(function):
            self._func = function
            self._func_name = getattr(function, "__name__", "lambda")
        else:
            raise ValueError(f"Unrecognized function in lambda: {function!r}")

    def hybrid_forward(self, F: Any, x: Any, *args: Any) -> Any:  # noqa: N803
        return self._func(F, x, *args)

    def __repr__(self) -> str:
        return f"HybridLambda({self._func_name})"
