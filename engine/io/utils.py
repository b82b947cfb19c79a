"""Helpers the iterators share (``mxnet.io.utils``)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy

from ..ndarray.ndarray import NDArray


def init_data(data: Any, allow_empty: bool, default_name: str) -> list[tuple[str, Any]]:
    """Normalise data/label arguments to a name-sorted list of (name, array)."""
    from .. import nd

    if data is None:
        data = []
    if isinstance(data, (numpy.ndarray, NDArray)):
        data = [data]
    if isinstance(data, list):
        if not allow_empty and not data:
            raise ValueError(f"NDArrayIter needs at least one {default_name} array")
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict((f"_{i}_{default_name}", d) for i, d in enumerate(data))
    if not isinstance(data, dict):
        raise TypeError(
            "Input must be NDArray, numpy.ndarray, a list of them or dict with them as values"
        )
    out = []
    for key, value in data.items():
        if not isinstance(value, NDArray):
            try:
                value = nd.array(value)
            except Exception as err:
                raise TypeError(
                    f"Invalid type '{type(value)}' for {key}, should be NDArray or numpy.ndarray"
                ) from err
        out.append((key, value))
    return sorted(out, key=lambda kv: kv[0])
