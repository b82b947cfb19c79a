"""``Block`` and ``HybridBlock``: the building units of Gluon networks (MXNet 1.x naming).

A Block created outside any other Block's ``name_scope()`` gets a global, per-class name
(``dense0_``, ``dense1_``...); one created inside a parent's scope is numbered within that
parent (``hybridsequential0_dense0_``). Parameters are named ``prefix + name``
(``dense0_weight``). ``save_parameters`` names arrays by attribute path instead
(``0.weight``, ``features.1.bias``), so files survive renumbering.

>>> import engine as mx
>>> class Net(mx.gluon.HybridBlock):
...     def __init__(self, **kw):
...         super().__init__(**kw)
...         with self.name_scope():
...             self.fc = mx.gluon.nn.Dense(2, in_units=3)
...     def hybrid_forward(self, F, x):
...         return F.relu(self.fc(x))
>>> net = Net(prefix="net_"); net.initialize()
>>> net(mx.nd.ones((1, 3))).shape, sorted(net.collect_params().keys())
((1, 2), ['net_dense0_bias', 'net_dense0_weight'])
"""

from __future__ import annotations

import os
import re
import threading
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from typing import Any

from .. import initializer as _init
from .. import name as _name
from .parameter import Parameter
from .parameter_dict import ParameterDict, ParameterFileError, _brief, load_arrays, save_arrays


class _BlockScope:
    """The naming scope a Block opens with ``name_scope()``."""

    _current = threading.local()

    def __init__(self, block: Block) -> None:
        self._block = block
        self._counter: dict[str, int] = {}
        self._old_scope: _BlockScope | None = None
        self._name_scope: _name.Prefix | None = None

    @staticmethod
    def create(prefix: str | None, params: ParameterDict | None,
               hint: str) -> tuple[str, ParameterDict]:
        current: _BlockScope | None = getattr(_BlockScope._current, "value", None)
        if current is None:
            if prefix is None:
                # numbered by this thread's NameManager, as MXNet does (so a fresh
                # ``with mx.name.NameManager():`` starts again from dense0_)
                prefix = _name.current().get(None, hint) + "_"
            params = ParameterDict(prefix) if params is None else ParameterDict(
                params.prefix, params)
            return prefix, params
        if prefix is None:
            count = current._counter.get(hint, 0)
            current._counter[hint] = count + 1
            prefix = f"{hint}{count}_"
        if params is None:
            parent = current._block.params
            params = ParameterDict(parent.prefix + prefix, parent._shared)
        else:
            params = ParameterDict(params.prefix, params)
        return current._block.prefix + prefix, params

    def __enter__(self) -> _BlockScope:
        if self._block._empty_prefix:
            return self
        self._old_scope = getattr(_BlockScope._current, "value", None)
        _BlockScope._current.value = self
        # symbols made inside are named under the block's prefix, as in MXNet
        self._name_scope = _name.Prefix(self._block.prefix)
        self._name_scope.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._block._empty_prefix:
            return
        if self._name_scope is not None:
            self._name_scope.__exit__(*exc)
            self._name_scope = None
        _BlockScope._current.value = self._old_scope


class HookHandle:
    """Returned by ``register_forward_hook``; ``detach()`` removes the hook."""

    def __init__(self, hooks: OrderedDict[int, Callable[..., Any]], key: int) -> None:
        self._hooks = hooks
        self._key = key

    def detach(self) -> None:
        self._hooks.pop(self._key, None)

    def __enter__(self) -> HookHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()


def _holds_unregistered_block(value: Any, children: set[int]) -> bool:
    """Whether a list, tuple or dict (nested) holds a Block whose id is not in ``children``.
    (A module function: a nested closure that calls itself is a reference cycle per call.)"""
    if isinstance(value, (list, tuple)):
        return any(_holds_unregistered_block(v, children) for v in value)
    if isinstance(value, dict):
        return any(_holds_unregistered_block(v, children) for v in value.values())
    return isinstance(value, Block) and id(value) not in children


class Block:
    """Base class of all layers and models: override ``forward``.

    Child Blocks and Parameters assigned as attributes are registered automatically.
    """

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        object.__setattr__(self, "_children", OrderedDict())
        object.__setattr__(self, "_reg_params", OrderedDict())
        self._empty_prefix = prefix == ""
        self._prefix, self._params = _BlockScope.create(prefix, params, self._alias())
        self._name = self._prefix[:-1] if self._prefix.endswith("_") else self._prefix
        self._scope = _BlockScope(self)
        self._forward_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._forward_pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
        self._hook_id = 0

    def _alias(self) -> str:
        return self.__class__.__name__.lower()

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}("]
        for key, child in self._children.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({key}): {body}")
        lines.append(")")
        return "\n".join(lines)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_children" not in self.__dict__:
            if isinstance(value, (Block, Parameter)):
                raise RuntimeError(
                    f"{type(self).__name__}: call super().__init__() before assigning child "
                    f"Blocks or Parameters (while setting {name!r})"
                )
            object.__setattr__(self, name, value)
            return
        existing = self.__dict__.get(name)
        if isinstance(existing, (Parameter, Block)) and not isinstance(value, type(existing)):
            raise TypeError(
                f"Changing attribute type for {name} from {type(existing)} to {type(value)} "
                "is not allowed."
            )
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            if name in self._reg_params and self._reg_params[name] is not value:
                raise AssertionError(
                    f"Overriding Parameter attribute {name} is not allowed. If you want to share "
                    "parameters between blocks, please set 'params' at Block construction instead."
                )
            self._reg_params[name] = value
        object.__setattr__(self, name, value)

    # ------------------------------------------------------------------- naming
    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def name(self) -> str:
        return self._name

    @property
    def params(self) -> ParameterDict:
        """This Block's own parameters (not its children's: see collect_params)."""
        return self._params

    def name_scope(self) -> _BlockScope:
        """``with self.name_scope():`` names child Blocks under this Block's prefix."""
        return self._scope

    # ------------------------------------------------------------------ children
    def register_child(self, block: Block, name: str | None = None) -> None:
        if name is None:
            name = str(len(self._children))
        self._children[name] = block

    def apply(self, fn: Callable[[Block], Any]) -> Block:
        """Call ``fn`` on every descendant, then on this Block."""
        for child in self._children.values():
            child.apply(fn)
        fn(self)
        return self

    def collect_params(self, select: str | None = None) -> ParameterDict:
        """This Block's and its descendants' parameters, optionally those whose names
        ``re.match`` the regex ``select`` (e.g. ``'.*weight'``)."""
        self._warn_unregistered_blocks()
        out = ParameterDict(self._params.prefix)
        pattern = re.compile(select) if select else None
        own = dict(self._params.items())
        for param in self._reg_params.values():
            own.setdefault(param.name, param)
        out.update({k: v for k, v in own.items() if pattern is None or pattern.match(k)})
        for child in self._children.values():
            out.update(child.collect_params(select))
        return out

    def _warn_unregistered_blocks(self) -> None:
        """MXNet warns when an attribute is a list, tuple or dict holding Blocks: those are
        not children, so their parameters are missing from collect_params()."""
        children = {id(c) for c in self._children.values()}
        for key, value in self.__dict__.items():
            if isinstance(value, (list, tuple, dict)) and not key.startswith("__") \
                    and key != "_children" and _holds_unregistered_block(value, children):
                warnings.warn(f'"{type(self).__name__}.{key}" is an unregistered container with '
                              "Blocks. Note that Blocks inside the list, tuple or dict will not "
                              "be registered automatically. Make sure to register them using "
                              "register_child() or switching to nn.Sequential/nn.HybridSequential "
                              "instead. ", stacklevel=3)

    def _collect_params_with_prefix(self, prefix: str = "") -> dict[str, Parameter]:
        if prefix:
            prefix += "."
        out = {prefix + key: value for key, value in self._reg_params.items()}
        for name, child in self._children.items():
            out.update(child._collect_params_with_prefix(prefix + name))
        return out

    # ------------------------------------------------------------------- running
    def initialize(self, init: Any = None, ctx: Any = None, verbose: bool = False,
                   force_reinit: bool = False) -> None:
        """Initialize all parameters (``init`` defaults to ``Uniform()``)."""
        self.collect_params().initialize(
            _init.Uniform() if init is None else init, ctx, verbose, force_reinit
        )

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """Hybridize the HybridBlocks among the descendants (a plain Block itself keeps
        running imperatively, as in MXNet); see :meth:`HybridBlock.hybridize`."""
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    def cast(self, dtype: Any) -> None:
        for child in self._children.values():
            child.cast(dtype)
        for param in self._own_params():
            param.cast(dtype)

    def _own_params(self) -> list[Parameter]:
        seen: dict[int, Parameter] = {id(p): p for p in self._params.values()}
        for p in self._reg_params.values():
            seen.setdefault(id(p), p)
        return list(seen.values())

    def zero_grad(self) -> None:
        self.collect_params().zero_grad()

    def reset_ctx(self, ctx: Any) -> None:
        self.collect_params().reset_ctx(ctx)

    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> HookHandle:
        """``hook(block, inputs)`` runs before each forward."""
        self._hook_id += 1
        self._forward_pre_hooks[self._hook_id] = hook
        return HookHandle(self._forward_pre_hooks, self._hook_id)

    def register_forward_hook(self, hook: Callable[..., Any]) -> HookHandle:
        """``hook(block, inputs, output)`` runs after each forward."""
        self._hook_id += 1
        self._forward_hooks[self._hook_id] = hook
        return HookHandle(self._forward_hooks, self._hook_id)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for hook in list(self._forward_pre_hooks.values()):
            hook(self, args)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            hook(self, args, out)
        return out

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    # ------------------------------------------------------------------ save/load
    def save_parameters(self, filename: Any, deduplicate: bool = False,
                        format: str = "npz") -> None:
        """Save values by attribute path (``0.weight``) to a path or binary file: npz, the
        engine's checkpoint format, or with ``format="mxnet"`` MXNet's binary format (what
        MXNet 1.9's ``save_parameters`` writes and its ``load_parameters`` reads).
        ``load_parameters`` reads both."""
        params = self._collect_params_with_prefix()
        if deduplicate:  # a shared parameter is stored once, under its first name
            first: dict[int, str] = {}
            for key, param in params.items():
                first.setdefault(id(param), key)
            params = {k: p for k, p in params.items() if first[id(p)] == k}
        save_arrays(filename, {key: p._reduce().asnumpy() for key, p in params.items()}, format)

    def load_parameters(self, filename: Any, ctx: Any = None, allow_missing: bool = False,
                        ignore_extra: bool = False, cast_dtype: bool = False,
                        dtype_source: str = "current") -> None:
        """Load what ``save_parameters`` wrote (also a ``collect_params().save`` file)."""
        loaded = load_arrays(filename)
        where = f"file '{filename}'" if isinstance(filename, (str, os.PathLike)) else "the file"
        params = self._collect_params_with_prefix()
        if not loaded and not params:
            return
        if loaded and not any("." in name for name in loaded):
            # a ParameterDict.save file: full names without this Block's prefix
            self.collect_params().load_dict(
                loaded, ctx, allow_missing, ignore_extra, self.prefix,
                str(filename) if isinstance(filename, (str, os.PathLike)) else None,
                cast_dtype, dtype_source,
            )
            return
        if not allow_missing:
            names_of: dict[int, list[str]] = defaultdict(list)
            for key, param in params.items():
                names_of[id(param)].append(key)
            for key, param in params.items():
                if not any(n in loaded for n in names_of[id(param)]):
                    raise ParameterFileError(
                        f"Parameter '{key}' is missing in {where}, which contains parameters: "
                        f"{_brief(loaded)}. Set allow_missing=True to ignore missing parameters."
                    )
        for name, value in loaded.items():
            if name not in params:
                if not ignore_extra:
                    raise ParameterFileError(
                        f"Parameter '{name}' loaded from {where} is not present in the network, "
                        f"which contains parameters {_brief(params)}. Set ignore_extra=True to "
                        "ignore."
                    )
                continue
            params[name]._load_init(value, ctx, cast_dtype, dtype_source)

    def save_params(self, filename: Any) -> None:
        """Deprecated (MXNet too): the parameters by full name without this Block's prefix,
        the format a SymbolBlock of the exported graph loads; prefer save_parameters."""
        warnings.warn("save_params is deprecated. Please use save_parameters. Note that if you "
                      "want to load from SymbolBlock later, please use export instead.",
                      stacklevel=2)
        self.collect_params().save(filename, strip_prefix=self.prefix)

    def load_params(self, filename: Any, ctx: Any = None, allow_missing: bool = False,
                    ignore_extra: bool = False) -> None:
        """Deprecated (MXNet too): load_parameters."""
        warnings.warn("load_params is deprecated. Please use load_parameters.", stacklevel=2)
        self.load_parameters(filename, ctx, allow_missing, ignore_extra)

    def save(self, prefix: str) -> None:
        """Write ``<prefix>-model.json`` (the Block tree) and ``<prefix>-model.params``, as
        MXNet 1.9's ``Block.save`` (see :mod:`engine.gluon.model_files`)."""
        from .model_files import save_model

        save_model(self, prefix)

    def load(self, prefix: str) -> None:
        """Load what :meth:`save` wrote into this Block (built the same way)."""
        from .model_files import load_model

        load_model(self, prefix)

    def summary(self, *inputs: Any) -> None:
        """Print each layer's output shape and parameter count for ``inputs`` (MXNet's
        table; the Block must not be hybridized)."""
        from .summary import print_summary

        print_summary(self, *inputs)


# HybridBlock lives with the hybridize machinery; re-exported here, where MXNet has it.
from .hybrid.hybrid_block import HybridBlock, _is_symbol  # noqa: E402, F401
