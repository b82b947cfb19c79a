"""Weight initializers (``mxnet.initializer``, also reachable as ``engine.init``).

An initializer is called as ``init(desc, arr)`` and fills ``arr`` in place. Gluon passes an
:class:`InitDesc` whose ``attrs['__init__']`` names the parameter's own initializer, which
then fills the whole array through ``_init_weight`` (MXNet's name-suffix rules are bypassed:
that is why Gluon layers say ``bias_initializer='zeros'``). Called with a plain name, the
legacy suffix rules apply: ``*weight`` → ``_init_weight``, ``*bias``/``*beta`` → 0,
``*gamma`` → 1, ``moving_mean`` → 0, ``moving_var`` → 1 ...

All randomness comes from :func:`engine.random.generator`, so ``engine.random.seed(n)``
makes initialization reproducible.

>>> import engine as mx
>>> w = mx.nd.zeros((2, 3))
>>> mx.init.Constant(0.5)(mx.init.InitDesc("fc_weight"), w)
>>> w.asnumpy().tolist()
[[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]
>>> mx.init.Constant(1).dumps()
'["constant", {"value": 1}]'
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import numpy

from . import random as _random
from .ndarray.ndarray import NDArray
from .registry import Registry

_REGISTRY = Registry("initializer")
# the one decorator: ``@register`` or ``@register(aliases=(...))``
register = _REGISTRY.register


class InitDesc(str):
    """A parameter name that also carries attributes (``attrs['__init__']``) and ``global_init``.

    >>> d = InitDesc("fc1_weight", {"__init__": "zeros"})
    >>> (d, d.attrs["__init__"])
    ('fc1_weight', 'zeros')
    """

    attrs: dict[str, Any]
    global_init: Any

    def __new__(cls, name: str, attrs: dict[str, Any] | None = None,
                global_init: Any = None) -> InitDesc:
        obj = super().__new__(cls, name)
        obj.attrs = dict(attrs or {})
        obj.global_init = global_init
        return obj


class Initializer:
    """Base class: subclasses override ``_init_weight(self, name, arr)`` (and optionally
    ``_init_bias``, ``_init_gamma``, ``_init_beta``).

    >>> class Twos(Initializer):
    ...     def _init_weight(self, name, arr):
    ...         arr[:] = 2
    >>> w = NDArray(numpy.zeros(2, dtype="float32")); Twos()(InitDesc("w_weight"), w)
    >>> w.asnumpy().tolist()
    [2.0, 2.0]
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._verbose = False
        self._print_func: Any = None

    # ---------------------------------------------------------------- registry
    @staticmethod
    def register(klass: type) -> type:
        """Class decorator: make ``klass`` creatable by its lower-cased name."""
        return _REGISTRY.register(klass)  # type: ignore[no-any-return]

    def set_verbose(self, verbose: bool = False, print_func: Any = None) -> Initializer:
        """Log a statistic of each initialized array (``print_func(arr)`` → str)."""
        self._verbose = verbose
        self._print_func = print_func or (
            lambda x: str(float(numpy.linalg.norm(x.asnumpy()) / numpy.sqrt(max(x.size, 1))))
        )
        return self

    set_verbosity = set_verbose  # MXNet 1.9's name for it

    def dumps(self) -> str:
        """``'["name", {kwargs}]'``, the JSON form MXNet attaches to symbol variables."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __eq__(self, other: object) -> bool:
        """Initializers are equal when they are the same kind with the same arguments, so
        parameters shared between blocks with equal custom inits agree (as in MXNet)."""
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and _same_kwargs(self._kwargs, other._kwargs)

    __hash__ = None  # type: ignore[assignment]  # equal by value and mutable, as MXNet's

    # ---------------------------------------------------------------- dispatch
    def __call__(self, desc: Any, arr: NDArray) -> None:
        if not isinstance(desc, InitDesc):
            self._legacy_init(str(desc), arr)
            return
        if desc.global_init is None:
            desc.global_init = self
        init = desc.attrs.get("__init__", "")
        if init:
            # a parameter's own initializer fills the whole array, whatever its name
            create(init)._init_weight(desc, arr)
            self._verbose_print(desc, init, arr)
            return
        name = str(desc)
        if name.endswith("weight"):
            self._init_weight(desc, arr)
        elif name.endswith("bias"):
            self._init_bias(desc, arr)
        elif name.endswith("gamma"):
            self._init_gamma(desc, arr)
        elif name.endswith("beta"):
            self._init_beta(desc, arr)
        elif name.endswith("min"):
            self._init_zero(desc, arr)
        elif name.endswith("max"):
            self._init_one(desc, arr)
        elif name.endswith(("moving_mean", "moving_inv_var", "moving_avg", "running_mean")):
            self._init_zero(desc, arr)
        elif name.endswith(("moving_var", "running_var")):
            self._init_one(desc, arr)
        else:
            self._init_default(desc, arr)
        self._verbose_print(desc, name, arr)

    def _legacy_init(self, name: str, arr: NDArray) -> None:
        """MXNet's string-name dispatch (``init('fc_weight', arr)``)."""
        if name.startswith("upsampling"):
            self._init_bilinear(name, arr)
        elif name.startswith("stn_loc") and name.endswith("weight"):
            self._init_zero(name, arr)
        elif name.startswith("stn_loc") and name.endswith("bias"):
            self._init_loc_bias(name, arr)
        else:
            self(InitDesc(name), arr)

    def _init_bilinear(self, name: Any, arr: NDArray) -> None:
        """Bilinear-upsampling kernel weights (for ``upsampling*`` parameters)."""
        Bilinear()._init_weight(name, arr)

    def _init_loc_bias(self, _: Any, arr: NDArray) -> None:
        """The identity affine transform (a spatial transformer's localisation bias)."""
        if arr.shape != (6,):
            raise ValueError(f"a localisation bias has shape (6,), got {arr.shape}")
        arr[:] = numpy.array([1.0, 0, 0, 0, 1.0, 0])

    def _verbose_print(self, desc: Any, init: Any, arr: NDArray) -> None:
        if self._verbose and self._print_func:
            logging.info("Initialized %s as %s: %s", desc, init, self._print_func(arr))

    # ---------------------------------------------------------------- fillers
    def _init_zero(self, _: Any, arr: NDArray) -> None:
        arr[:] = 0.0

    def _init_one(self, _: Any, arr: NDArray) -> None:
        arr[:] = 1.0

    def _init_bias(self, _: Any, arr: NDArray) -> None:
        arr[:] = 0.0

    def _init_gamma(self, _: Any, arr: NDArray) -> None:
        arr[:] = 1.0

    def _init_beta(self, _: Any, arr: NDArray) -> None:
        arr[:] = 0.0

    def _init_weight(self, name: Any, arr: NDArray) -> None:
        raise NotImplementedError(f"{type(self).__name__} must override _init_weight")

    def _init_default(self, name: Any, _: NDArray) -> None:
        raise ValueError(
            f"Unknown initialization pattern for {name}. Default initialization is now limited "
            'to "weight", "bias", "gamma" (1.0), and "beta" (0.0). Please give the parameter '
            "an explicit initializer (init=engine.init.*)"
        )

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__}({args})"


def _fill(arr: NDArray, values: numpy.ndarray) -> None:
    """Write host-generated values into ``arr`` in place (any backend, arr's dtype)."""
    arr.raw[...] = arr.xp.asarray(values.reshape(arr.shape)).astype(arr.raw.dtype)


def _host_rng() -> Any:
    # Values are drawn on the host and copied, as MXNet initializes on cpu then copies to
    # each context: the same seed gives the same weights on numpy and cupy.
    return _random.generator(numpy)


def create(init: Any, **kwargs: Any) -> Initializer:
    """An initializer from an instance, a registered name, or a ``dumps()`` JSON string.

    >>> create("xavier", magnitude=2)._kwargs["magnitude"]
    2
    """
    if isinstance(init, Initializer):
        return init
    if isinstance(init, str) and init.startswith("["):
        name, kw = json.loads(init)
        return _REGISTRY.create(name, **kw)  # type: ignore[no-any-return]
    if isinstance(init, type) and issubclass(init, Initializer):
        return init(**kwargs)
    if not isinstance(init, str):
        raise TypeError(f"expected an Initializer or its name, got {type(init).__name__}")
    return _REGISTRY.create(init, **kwargs)  # type: ignore[no-any-return]


def names() -> list[str]:
    """Every registered initializer name."""
    return _REGISTRY.names()


def _same_kwargs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for key, left in a.items():
        right = b[key]
        if isinstance(left, (NDArray, numpy.ndarray)) or isinstance(
                right, (NDArray, numpy.ndarray)):
            if not numpy.array_equal(numpy.asarray(left), numpy.asarray(right)):
                return False
        elif left != right:
            return False
    return True


# ---------------------------------------------------------------------- simple fills
@register(aliases=("zeros",))
class Zero(Initializer):
    """Fills with 0."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: Any, arr: NDArray) -> None:
        arr[:] = 0


@register(aliases=("ones",))
class One(Initializer):
    """Fills with 1."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: Any, arr: NDArray) -> None:
        arr[:] = 1


@register
class Constant(Initializer):
    """Fills with ``value`` (a scalar, or an array broadcastable to the parameter)."""

    def __init__(self, value: Any) -> None:
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _: Any, arr: NDArray) -> None:
        value = self.value.asnumpy() if isinstance(self.value, NDArray) else self.value
        arr[:] = value

    def dumps(self) -> str:
        value = self._kwargs["value"]
        if isinstance(value, NDArray):
            value = value.asnumpy()
        if isinstance(value, numpy.ndarray):
            value = value.tolist()
        # as MXNet, the arguments keep the JSON form, so json.dumps([name, _kwargs]) agrees
        self._kwargs["value"] = value
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])


@register
class Uniform(Initializer):
    """U(-scale, scale)."""

    def __init__(self, scale: float = 0.07) -> None:
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _: Any, arr: NDArray) -> None:
        _fill(arr, _host_rng().uniform(-self.scale, self.scale, size=arr.shape))


@register
class Normal(Initializer):
    """N(0, sigma²)."""

    def __init__(self, sigma: float = 0.01) -> None:
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _: Any, arr: NDArray) -> None:
        _fill(arr, _host_rng().normal(0.0, self.sigma, size=arr.shape))


@register
class Orthogonal(Initializer):
    """A (scaled) orthogonal matrix from the SVD of a random (nout, nin) matrix.

    With ``nout <= nin`` the rows are orthonormal, so ``W·Wᵀ = scale²·I``.
    """

    def __init__(self, scale: float = 1.414, rand_type: str = "uniform") -> None:
        super().__init__(scale=scale, rand_type=rand_type)
        if rand_type not in ("uniform", "normal"):
            raise ValueError(
                f"Orthogonal rand_type must be 'uniform' or 'normal', got {rand_type!r}"
            )
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _: Any, arr: NDArray) -> None:
        nout = arr.shape[0]
        nin = int(numpy.prod(arr.shape[1:]))
        rng = _host_rng()
        if self.rand_type == "uniform":
            tmp = rng.uniform(-1.0, 1.0, size=(nout, nin))
        else:
            tmp = rng.normal(0.0, 1.0, size=(nout, nin))
        u, _s, v = numpy.linalg.svd(tmp, full_matrices=False)
        res = u if u.shape == tmp.shape else v
        _fill(arr, self.scale * res)


@register
class Xavier(Initializer):
    """Glorot: ``U(±√(magnitude/factor))`` or ``N(0, √(magnitude/factor))`` where factor is
    fan_in, fan_out or their mean (fan = channels × receptive-field size)."""

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg",
                 magnitude: float = 3) -> None:
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError(f"Unknown random type {rnd_type!r}; expected 'uniform' or 'gaussian'")
        if factor_type not in ("avg", "in", "out"):
            raise ValueError(f"Incorrect factor type {factor_type!r}; expected avg, in or out")
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name: Any, arr: NDArray) -> None:
        shape = arr.shape
        if len(shape) < 2:
            raise ValueError(
                f"Xavier initializer cannot be applied to vector {name}. It requires at least 2D."
            )
        receptive = float(numpy.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = numpy.sqrt(self.magnitude / factor)
        rng = _host_rng()
        if self.rnd_type == "uniform":
            values = rng.uniform(-scale, scale, size=shape)
        else:
            values = rng.normal(0.0, scale, size=shape)
        _fill(arr, values)


@register
class MSRAPrelu(Xavier):
    """He/Kaiming init for PReLU nets: gaussian Xavier with magnitude ``2/(1+slope²)``."""

    def __init__(self, factor_type: str = "avg", slope: float = 0.25) -> None:
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope**2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Bilinear-upsampling kernels (for deconvolution): ``(1-|x/f-c|)(1-|y/f-c|)``."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: Any, arr: NDArray) -> None:
        shape = arr.shape
        if len(shape) < 2:
            raise ValueError(f"Bilinear needs a kernel of at least 2 dims, got shape {shape}")
        height, width = shape[-2], shape[-1]
        f = numpy.ceil(width / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        kx = 1 - numpy.abs(numpy.arange(width) / f - c)
        ky = 1 - numpy.abs(numpy.arange(height) / f - c)
        _fill(arr, numpy.broadcast_to(numpy.outer(ky, kx), shape).copy())


@register
class LSTMBias(Initializer):
    """Zero bias except the forget gate rows ``[H, 2H)``, set to ``forget_bias``."""

    def __init__(self, forget_bias: float = 1.0) -> None:
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, _: Any, arr: NDArray) -> None:
        hidden = arr.shape[0] // 4
        arr[:] = 0.0
        arr[hidden : 2 * hidden] = self.forget_bias


@register
class Load(Initializer):
    """Initialize from saved arrays (a dict or an ``nd.save`` file), by name.

    ``arg:``/``aux:`` prefixes are stripped; names not found use ``default_init``.
    """

    def __init__(self, param: Any, default_init: Any = None, verbose: bool = False) -> None:
        super().__init__()
        if isinstance(param, str):
            from .ndarray import load as nd_load

            param = nd_load(param)
        if not isinstance(param, dict):
            raise TypeError("Load needs a dict of arrays or the path of a saved dict")
        self.param = {}
        for name, arr in param.items():
            key = name[4:] if name.startswith(("arg:", "aux:")) else name
            self.param[key] = arr
        self.default_init = create(default_init) if default_init is not None else None
        self.verbose = verbose

    def __call__(self, name: Any, arr: NDArray) -> None:
        key = str(name)
        if key in self.param:
            loaded = self.param[key]
            loaded_shape = tuple(loaded.shape)
            if tuple(arr.shape) != loaded_shape:
                raise AssertionError(
                    f"Parameter {key} cannot be initialized from loading. Shape mismatch, "
                    f"target {tuple(arr.shape)} vs loaded {loaded_shape}"
                )
            arr[:] = loaded.asnumpy() if isinstance(loaded, NDArray) else numpy.asarray(loaded)
            if self.verbose:
                logging.info("Initialized %s by loading", key)
            return
        if self.default_init is None:
            raise AssertionError(
                f"Cannot Initialize {key}. Not found in loaded param and no default "
                "Initializer is provided."
            )
        self.default_init(name, arr)
        if self.verbose:
            logging.info("Initialized %s by default", key)

    _init_weight = __call__


@register
class Mixed(Initializer):
    """The first initializer whose regex pattern ``re.match``-es the parameter name.

    >>> m = Mixed([".*bias", ".*"], [Zero(), One()])
    """

    def __init__(self, patterns: list[str], initializers: list[Any]) -> None:
        super().__init__()
        if len(patterns) != len(initializers):
            raise ValueError(
                f"Mixed got {len(patterns)} patterns but {len(initializers)} initializers"
            )
        self.map = [(re.compile(p), create(i)) for p, i in zip(patterns, initializers, strict=True)]

    def __call__(self, name: Any, arr: NDArray) -> None:
        for pattern, init in self.map:
            if pattern.match(str(name)):
                init(name, arr)
                return
        # MXNet leaves a literal %s in this message; Rudder formats it
        raise ValueError(
            f"Parameter name {name} did not match any pattern. Consider adding a \".*\" "
            "pattern at the end with a default Initializer."
        )

    _init_weight = __call__


_RNN_GATES = {"rnn_relu": [""], "rnn_tanh": [""], "lstm": ["_i", "_f", "_c", "_o"],
              "gru": ["_r", "_z", "_o"]}


@register
class FusedRNN(Initializer):
    """Initialize a fused (cuDNN-layout) RNN parameter vector piece by piece.

    The flat vector holds, per layer and direction, the i2h then h2h weights of each gate,
    followed by all the biases in the same order. Each piece is initialized with ``init``
    (or the global initializer) under its unfused name (``l0_i2h_f_weight``, ...); LSTM
    forget-gate biases get ``forget_bias``.
    """

    def __init__(self, init: Any, num_hidden: int, num_layers: int, mode: str,
                 bidirectional: bool = False, forget_bias: float = 1.0) -> None:
        if isinstance(init, str):
            init = create(init)
        if mode not in _RNN_GATES:
            raise ValueError(f"unknown RNN mode {mode!r}; expected one of {sorted(_RNN_GATES)}")
        super().__init__(init=init.dumps() if init is not None else None, num_hidden=num_hidden,
                         num_layers=num_layers, mode=mode, bidirectional=bidirectional,
                         forget_bias=forget_bias)
        self._init = init
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._forget_bias = forget_bias

    def _slices(self, flat: numpy.ndarray) -> dict[str, numpy.ndarray]:
        gates = _RNN_GATES[self._mode]
        directions = ["l", "r"] if self._bidirectional else ["l"]
        ndir, ngate = len(directions), len(gates)
        hidden, layers = self._num_hidden, self._num_layers
        per_unit = flat.size // (ndir * hidden * ngate)
        num_input = per_unit - (layers - 1) * (hidden + ndir * hidden + 2) - hidden - 2
        expected = ndir * ngate * hidden * (
            (num_input + hidden + 2) + (layers - 1) * (ndir * hidden + hidden + 2))
        if num_input <= 0 or expected != flat.size:
            raise ValueError(
                f"FusedRNN: a parameter of {flat.size} values does not fit {layers} {self._mode} "
                f"layer(s) of {hidden} hidden units"
            )
        pieces: dict[str, numpy.ndarray] = {}
        pos = 0
        for layer in range(layers):
            in_size = num_input if layer == 0 else ndir * hidden
            for d in directions:
                for group, cols in (("i2h", in_size), ("h2h", hidden)):
                    for gate in gates:
                        size = hidden * cols
                        pieces[f"{d}{layer}_{group}{gate}_weight"] = flat[pos : pos + size].reshape(
                            hidden, cols
                        )
                        pos += size
        for layer in range(layers):
            for d in directions:
                for group in ("i2h", "h2h"):
                    for gate in gates:
                        pieces[f"{d}{layer}_{group}{gate}_bias"] = flat[pos : pos + hidden]
                        pos += hidden
        return pieces

    def _init_weight(self, desc: Any, arr: NDArray) -> None:
        flat = numpy.zeros(arr.size, dtype=numpy.float64)
        global_init = getattr(desc, "global_init", None)
        for name, piece in self._slices(flat).items():
            view = NDArray(piece)  # writes land in ``flat``
            if self._mode == "lstm" and name.endswith("_f_bias"):
                view[:] = self._forget_bias
            elif self._init is not None:
                self._init(InitDesc(name, global_init=global_init), view)
            elif global_init is not None:
                global_init(InitDesc(name, global_init=global_init), view)
            else:
                raise ValueError("FusedRNN needs init=... or a global initializer")
        _fill(arr, flat)


alias = _REGISTRY.alias  # MXNet's mx.initializer.alias, kept for user code

