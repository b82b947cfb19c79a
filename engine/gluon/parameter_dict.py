"""``ParameterDict``: a prefix-named, ordered collection of Parameters, and the npz file
format that save/load use (arrays only, loaded with ``allow_pickle=False``).

>>> import engine as mx
>>> pd = mx.gluon.ParameterDict("net_")
>>> w = pd.get("weight", shape=(2, 2))
>>> list(pd.keys())
['net_weight']
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy

from .. import initializer as _init
from ..ndarray.ndarray import NDArray
from ..serialization import SerializationError, load_array_file, save_npz
from .parameter import Constant, Parameter


class ParameterFileError(AssertionError, ValueError):
    """A parameter file does not match the network (missing/extra names, bad file).

    It is an AssertionError, as in MXNet, and a ValueError, as the problem is the input.
    """


def _brief(names: Any, limit: int = 6) -> str:
    names = list(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}] ({len(names)} in all)"


def save_arrays(file: Any, arrays: dict[str, numpy.ndarray], format: str = "npz") -> None:
    """Write named arrays to a path (exactly that name) or binary file: an npz archive (the
    engine's own format), or with ``format="mxnet"`` MXNet's binary format, which MXNet
    1.9's ``load_parameters`` reads."""
    if format == "npz":
        save_npz(file, arrays)
        return
    if format != "mxnet":
        raise ValueError(f"format must be 'npz' or 'mxnet', got {format!r}")
    from ..ndarray.mxnet_format import write_params

    blob = write_params(arrays)
    if isinstance(file, (str, os.PathLike)):
        with open(file, "wb") as handle:
            handle.write(blob)
    else:
        file.write(blob)


def load_arrays(file: Any) -> dict[str, numpy.ndarray]:
    """Read named arrays from an npz archive or an MXNet params file (``save_parameters``
    or ``export`` of MXNet); pickled or corrupt files are refused."""
    where = f"file '{file}'" if isinstance(file, (str, os.PathLike)) else "the given file"
    try:
        arrays = load_array_file(file)
    except SerializationError as err:
        raise ParameterFileError(
            f"cannot load parameters from {where}: not an npz parameter archive nor an MXNet "
            f"params file ({err})"
        ) from err
    if isinstance(arrays, list):
        if not arrays:
            return {}
        raise ParameterFileError(f"cannot load parameters from {where}: it holds an unnamed "
                                 "list of arrays")
    return arrays


class ParameterDict:
    """Parameters by full name; ``get`` creates or retrieves ``prefix + name``."""

    def __init__(self, prefix: str = "", shared: ParameterDict | None = None) -> None:
        self._prefix = prefix
        self._params: OrderedDict[str, Parameter] = OrderedDict()
        self._shared = shared

    def __repr__(self) -> str:
        body = "\n".join(f"  {p!r}" for p in self.values())
        return f"{self._prefix} (\n{body}\n)"

    @property
    def prefix(self) -> str:
        return self._prefix

    def __getitem__(self, key: str) -> Parameter:
        return self._params[key]

    def __contains__(self, key: object) -> bool:
        return key in self._params

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def items(self) -> Any:
        return self._params.items()

    def keys(self) -> Any:
        return self._params.keys()

    def values(self) -> Any:
        return self._params.values()

    def _get_impl(self, name: str) -> Parameter | None:
        if name in self._params:
            return self._params[name]
        if self._shared is not None and name in self._shared._params:
            self._params[name] = self._shared._params[name]
            return self._params[name]
        return None

    def get(self, name: str, **kwargs: Any) -> Parameter:
        """The parameter ``prefix + name``, created with ``kwargs`` if absent; if present,
        ``kwargs`` must agree with it (0 dims of a shape are filled in)."""
        full = self._prefix + name
        param = self._get_impl(full)
        if param is None:
            param = Parameter(full, **kwargs)
            self._params[full] = param
            return param
        for key, value in kwargs.items():
            existing = getattr(param, key, None)
            if existing is None:
                setattr(param, key, value)
                continue
            if key == "shape" and value is not None:
                value = (value,) if isinstance(value, int) else tuple(value)
                if len(value) == len(existing) and all(
                    a == b or a == 0 or b == 0 for a, b in zip(value, existing, strict=True)
                ):
                    param._shape = tuple(
                        max(a, b) for a, b in zip(value, existing, strict=True)
                    )
                    continue
            elif key == "dtype" and numpy.dtype(value) == numpy.dtype(existing):
                continue
            if value is not None and value != existing:
                raise AssertionError(
                    f"Cannot retrieve Parameter '{full}' because desired attribute does not "
                    f"match with stored for attribute '{key}': desired '{value}' vs stored "
                    f"'{existing}'."
                )
        return param

    def get_constant(self, name: str, value: Any = None) -> Parameter:
        """The Constant ``prefix + name`` (created from ``value`` if absent)."""
        full = self._prefix + name
        param = self._get_impl(full)
        if param is None:
            if value is None:
                raise KeyError(
                    f"No constant named '{full}'. Please specify value if you want to create "
                    "a new constant."
                )
            param = Constant(full, value)
            self._params[full] = param
        elif value is not None and not isinstance(param, Constant):
            raise AssertionError(f"Parameter '{full}' already exists but is not a constant.")
        return param

    def update(self, other: ParameterDict | dict[str, Parameter]) -> None:
        """Add ``other``'s parameters; the same name must mean the same Parameter."""
        for key, value in other.items():
            if key in self._params and self._params[key] is not value:
                raise AssertionError(
                    "Cannot update self with other because they have different Parameters with "
                    f"the same name '{key}'"
                )
            self._params[key] = value

    def initialize(self, init: Any = None, ctx: Any = None, verbose: bool = False,
                   force_reinit: bool = False) -> None:
        """Initialize every parameter (each one's own ``init`` wins over ``init``)."""
        init = _init.Uniform() if init is None else _init.create(init)
        if verbose:
            init.set_verbose(verbose=verbose)
        for param in self.values():
            param.initialize(None, ctx, init, force_reinit=force_reinit)

    def zero_grad(self) -> None:
        for param in self.values():
            param.zero_grad()

    def reset_ctx(self, ctx: Any) -> None:
        for param in self.values():
            param.reset_ctx(ctx)

    def list_ctx(self) -> list[Any]:
        out: list[Any] = []
        for param in self.values():
            for c in param.list_ctx():
                if c not in out:
                    out.append(c)
        return out

    def setattr(self, name: str, value: Any) -> None:
        """Set an attribute on every parameter, e.g. ``setattr('grad_req', 'null')``."""
        for param in self.values():
            setattr(param, name, value)

    def select(self, pattern: str | None) -> ParameterDict:
        """The parameters whose names ``re.match`` the regex ``pattern`` (all for None)."""
        out = ParameterDict(self._prefix)
        regex = re.compile(pattern) if pattern else None
        for name, param in self.items():
            if regex is None or regex.match(name):
                out._params[name] = param
        return out

    # ----------------------------------------------------------------- save / load
    def save(self, filename: Any, strip_prefix: str = "", format: str = "npz") -> None:
        """Save values by full name (minus ``strip_prefix``) as npz (``format="mxnet"``:
        MXNet's binary format)."""
        arrays = {}
        for param in self.values():
            if not param.name.startswith(strip_prefix):
                raise ValueError(
                    f"Prefix '{strip_prefix}' is to be striped before saving, but Parameter's "
                    f"name '{param.name}' does not start with '{strip_prefix}'."
                )
            arrays[param.name[len(strip_prefix):]] = param._reduce().asnumpy()
        save_arrays(filename, arrays, format)

    def load(self, filename: Any, ctx: Any = None, allow_missing: bool = False,
             ignore_extra: bool = False, restore_prefix: str = "", cast_dtype: bool = False,
             dtype_source: str = "current") -> None:
        """Load what :meth:`save` wrote (names get ``restore_prefix`` prepended)."""
        if restore_prefix:
            for name in self.keys():
                if not name.startswith(restore_prefix):
                    raise ValueError(
                        f"restore_prefix is '{restore_prefix}' but Parameters name '{name}' "
                        "does not start with it"
                    )
        self.load_dict(load_arrays(filename), ctx, allow_missing, ignore_extra, restore_prefix,
                       str(filename) if isinstance(filename, (str, os.PathLike)) else None,
                       cast_dtype, dtype_source)

    def load_dict(self, param_dict: dict[str, Any], ctx: Any = None, allow_missing: bool = False,
                  ignore_extra: bool = False, restore_prefix: str = "",
                  filename: str | None = None, cast_dtype: bool = False,
                  dtype_source: str = "current") -> None:
        """Load from a dict of arrays (NDArray or numpy)."""
        arrays: dict[str, Any] = {}
        for key, value in param_dict.items():
            key = key[4:] if key.startswith(("arg:", "aux:")) else key
            arrays[restore_prefix + key] = value.asnumpy() if isinstance(value, NDArray) else value
        source = f"file '{filename}'" if filename else "param_dict"
        if not allow_missing:
            for name in self.keys():
                if name not in arrays:
                    raise ParameterFileError(
                        f"Parameter '{name[len(restore_prefix):]}' is missing in {source}, which "
                        f"contains parameters: {_brief(arrays)}. Please make sure source and "
                        "target networks have the same prefix (or pass allow_missing=True)."
                    )
        for name, value in arrays.items():
            if name not in self._params:
                if not ignore_extra:
                    raise ParameterFileError(
                        f"Parameter '{name[len(restore_prefix):]}' loaded from {source} is not "
                        f"present in ParameterDict, choices are: {_brief(self.keys())}. Set "
                        "ignore_extra=True to ignore."
                    )
                continue
            self._params[name]._load_init(value, ctx, cast_dtype, dtype_source)
