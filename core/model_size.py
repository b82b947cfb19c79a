"""A job's memory estimate at submit: parameters × bytes plus activations for one batch.

A spec whose network cannot fit in a worker (two Dense layers of 10**6 units is 10**12
weights) is refused with 422 when it is submitted, instead of failing with MemoryError in
the worker. The estimate is deliberately simple and errs high: float32 weights, their
gradients and up to two optimizer states each; forward activations kept for backward.

>>> from core.jobspec import parse_spec
>>> spec = parse_spec({"name": "m", "model": [{"type": "Dense", "units": 10}],
...     "data": {"train": {"builtin": "digits"}}, "loss": {"type": "l2"},
...     "optimizer": {"type": "sgd"}})
>>> estimate(spec, input_features=64).parameters
650
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.jobspec import (
    BUILTIN_DATASETS,
    IMAGE_BUILTIN_SHAPES,
    BatchNorm,
    BuiltinSource,
    Conv2D,
    Dense,
    Embedding,
    JobSpec,
    LayerNorm,
)
from core.transform_spec import image_shape

BYTES_PER_VALUE = 4  # float32
# weight + gradient + up to two optimizer states (Adam's mean and variance)
COPIES_PER_PARAMETER = 4


@dataclass(frozen=True)
class SizeEstimate:
    parameters: int
    activations: int  # values held for one batch's backward pass

    @property
    def bytes(self) -> int:
        return BYTES_PER_VALUE * (COPIES_PER_PARAMETER * self.parameters + self.activations)


def _pair(value: int | tuple[int, int]) -> int:
    return value[0] * value[1] if isinstance(value, tuple) else value * value


def estimate(
    spec: JobSpec, *, input_features: int | None = None, parameters: int = 0
) -> SizeEstimate:
    """Walk the layers, tracking the width each layer sees (1 where it is unknowable).

    ``parameters``: a count known otherwise (an uploaded model's, measured at upload)."""
    width = max(1, input_features or 1)
    activations = 0
    # A zoo network's size is fixed by its name and an upload's was measured at upload
    # (its parameter_count); only a layer list is estimated here.
    layers = spec.model if isinstance(spec.model, list) else []
    for layer in layers:
        if isinstance(layer, Dense):
            fan_in = layer.in_units or width
            parameters += fan_in * layer.units + (layer.units if layer.use_bias else 0)
            width = layer.units
        elif isinstance(layer, Conv2D):
            in_channels = layer.in_channels or 1
            parameters += layer.channels * (in_channels // layer.groups or 1) * _pair(
                layer.kernel_size) + (layer.channels if layer.use_bias else 0)
            width = max(width, layer.channels)
        elif isinstance(layer, Embedding):
            parameters += layer.input_dim * layer.output_dim
            width = layer.output_dim
        elif isinstance(layer, BatchNorm | LayerNorm):
            parameters += 4 * (layer.in_channels or width)
        activations += width
    return SizeEstimate(parameters=parameters, activations=activations * spec.data.batch_size)


def input_features_of(spec: JobSpec) -> int | None:
    """The train split's feature count when it is a built-in set (uploads: the caller's)."""
    source = spec.data.train
    return BUILTIN_DATASETS[source.builtin] if isinstance(source, BuiltinSource) else None


def input_shape_of(spec: JobSpec) -> tuple[int, ...] | None:
    """One training record's shape as the network sees it, when a built-in set makes it
    known before anything runs: ``(features,)`` for the tables, ``(C, H, W)`` for the
    image sets after their transforms. Uploads: the caller's (from validation).

    >>> from core.jobspec import JobSpec
    >>> spec = JobSpec.model_validate({"name": "x", "model": [{"type": "Dense", "units": 2}],
    ...     "data": {"train": {"builtin": "cifar10", "transforms": [
    ...         {"type": "RandomResizedCrop", "size": [24, 20]}, {"type": "ToTensor"}]}},
    ...     "loss": {"type": "softmax_cross_entropy"}, "optimizer": {"type": "sgd"}})
    >>> input_shape_of(spec)
    (3, 20, 24)
    """
    source = spec.data.train
    return builtin_record_shape(source) if isinstance(source, BuiltinSource) else None


def builtin_record_shape(source: BuiltinSource) -> tuple[int, ...]:
    """A built-in set's record as the network sees it (ValueError for a Normalize that
    does not fit its channels)."""
    if source.builtin not in IMAGE_BUILTIN_SHAPES:
        return (BUILTIN_DATASETS[source.builtin],)
    channels, height, width = IMAGE_BUILTIN_SHAPES[source.builtin]
    return image_shape(height, width, channels, source.transforms)


def human_bytes(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    exponent = min(int(math.log(count, 1024)), 5)
    return f"{count / 1024**exponent:.1f} {'KMGTP'[exponent - 1]}iB"
