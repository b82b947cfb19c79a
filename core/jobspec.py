"""The job spec (v1): what a user submits, validated before anything is stored.

Unknown fields are errors everywhere. Names of layers, losses, optimizers, ... are
checked against :mod:`core.registry_names` (the api cannot import the engine).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from core import registry_names as names

MAX_LAYERS = 256
MAX_PARAMS = 32
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=128)]
ParamValue = float | int | bool | str | None | list[float | int]
Activation = Literal["relu", "sigmoid", "tanh", "softrelu", "softsign"]
PositiveInt = Annotated[int, Field(ge=1, le=1_000_000)]
Size2 = PositiveInt | tuple[PositiveInt, PositiveInt]
Pad2 = Annotated[int, Field(ge=0, le=1024)] | tuple[int, int]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- layers


class Dense(StrictModel):
    type: Literal["Dense"]
    units: PositiveInt
    activation: Activation | None = None
    use_bias: bool = True
    flatten: bool = True
    in_units: Annotated[int, Field(ge=0, le=1_000_000)] = 0


class Dropout(StrictModel):
    type: Literal["Dropout"]
    rate: float = Field(ge=0.0, lt=1.0)


class ActivationLayer(StrictModel):
    type: Literal["Activation"]
    activation: Activation


class Flatten(StrictModel):
    type: Literal["Flatten"]


class Conv2D(StrictModel):
    type: Literal["Conv2D"]
    channels: PositiveInt
    kernel_size: Size2
    strides: Size2 = 1
    padding: Pad2 = 0
    dilation: Size2 = 1
    groups: PositiveInt = 1
    activation: Activation | None = None
    use_bias: bool = True
    in_channels: Annotated[int, Field(ge=0, le=1_000_000)] = 0


class MaxPool2D(StrictModel):
    type: Literal["MaxPool2D"]
    pool_size: Size2 = 2
    strides: Size2 | None = None
    padding: Pad2 = 0
    ceil_mode: bool = False


class AvgPool2D(StrictModel):
    type: Literal["AvgPool2D"]
    pool_size: Size2 = 2
    strides: Size2 | None = None
    padding: Pad2 = 0
    ceil_mode: bool = False
    count_include_pad: bool = True


class GlobalAvgPool2D(StrictModel):
    type: Literal["GlobalAvgPool2D"]


class BatchNorm(StrictModel):
    type: Literal["BatchNorm"]
    axis: int = Field(default=1, ge=-8, le=8)
    momentum: float = Field(default=0.9, ge=0.0, le=1.0)
    epsilon: float = Field(default=1e-5, gt=0.0)
    center: bool = True
    scale: bool = True
    in_channels: Annotated[int, Field(ge=0, le=1_000_000)] = 0


class LayerNorm(StrictModel):
    type: Literal["LayerNorm"]
    axis: int = Field(default=-1, ge=-8, le=8)
    epsilon: float = Field(default=1e-5, gt=0.0)
    center: bool = True
    scale: bool = True
    in_channels: Annotated[int, Field(ge=0, le=1_000_000)] = 0


class Embedding(StrictModel):
    type: Literal["Embedding"]
    input_dim: PositiveInt
    output_dim: PositiveInt


class LeakyReLU(StrictModel):
    type: Literal["LeakyReLU"]
    alpha: float = Field(default=0.01, ge=0.0, le=1.0)


Layer = Annotated[
    Dense | Dropout | ActivationLayer | Flatten | Conv2D | MaxPool2D | AvgPool2D
    | GlobalAvgPool2D | BatchNorm | LayerNorm | Embedding | LeakyReLU,
    Field(discriminator="type"),
]


# ---------------------------------------------------------------- named components


def _check_name(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value.lower() not in allowed:
        raise ValueError(f"unknown {what} {value!r}; expected one of: {', '.join(allowed)}")
    return value.lower()


def _check_params(params: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    if len(params) > MAX_PARAMS:
        raise ValueError(f"too many {what} parameters (at most {MAX_PARAMS})")
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(
            f"unknown {what} parameter(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    for key, value in params.items():
        scalar = value is None or isinstance(value, bool | int | float | str)
        numbers = isinstance(value, list) and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value
        )
        if not (scalar or numbers):
            raise ValueError(f"{what} parameter {key} must be a number, string, bool or list")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{what} parameter {key} must be finite")
        if isinstance(value, list) and len(value) > 1024:
            raise ValueError(f"{what} parameter {key} is too long")
        if isinstance(value, str) and len(value) > 64:
            raise ValueError(f"{what} parameter {key} is too long")


class NamedComponent(BaseModel):
    """``{type: name, **params}``; params are checked per category by subclasses."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str
    # Class-level tables, set by each subclass (as ClassVars pydantic leaves them alone
    # instead of copying them into every instance as private attributes).
    _names: ClassVar[tuple[str, ...]] = ()
    _params: ClassVar[frozenset[str]] = frozenset()
    _what: ClassVar[str] = "component"

    @model_validator(mode="after")
    def _validate(self) -> NamedComponent:
        object.__setattr__(self, "type", _check_name(self.type, self._names, self._what))
        _check_params(self.params, self._params, self._what)
        return self

    @property
    def params(self) -> dict[str, ParamValue]:
        return dict(self.model_extra or {})


_WARMUP = {"warmup_steps", "warmup_begin_lr", "warmup_mode", "base_lr"}


class LossSpec(NamedComponent):
    _names = names.LOSSES
    _params = frozenset({"axis", "sparse_label", "from_logits", "weight", "batch_axis",
                         "rho", "from_sigmoid"})
    _what = "loss"


class InitializerSpec(NamedComponent):
    _names = names.INITIALIZERS
    _params = frozenset({"magnitude", "rnd_type", "factor_type", "scale", "sigma", "value",
                         "slope"})
    _what = "initializer"


class OptimizerSpec(NamedComponent):
    _names = names.OPTIMIZERS
    _params = frozenset({
        "learning_rate", "wd", "clip_gradient", "rescale_grad", "momentum", "beta1", "beta2",
        "epsilon", "gamma1", "gamma2", "centered", "rho", "clip_weights", "lamda", "lamda1",
        "beta", "eta", "wd_lh", "lower_bound", "upper_bound", "bias_correction",
        "schedule_decay", "initial_accumulator_value", "multi_precision", "lazy_update",
        "use_fused_step", "warmup_strategy", "warmup_epochs", "batch_scale",
        "updates_per_epoch", "begin_epoch", "num_epochs",
    })
    _what = "optimizer"

    @property
    def learning_rate(self) -> float | None:
        value = self.params.get("learning_rate")
        return float(value) if isinstance(value, int | float) else None

    @model_validator(mode="after")
    def _positive_lr(self) -> OptimizerSpec:
        value = self.params.get("learning_rate")
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0
        ):
            raise ValueError("optimizer learning_rate must be a finite number > 0")
        return self


class SchedulerSpec(NamedComponent):
    _names = names.LR_SCHEDULERS
    _params = frozenset({"step", "factor", "stop_factor_lr", "max_update", "pwr", "final_lr"}
                        | _WARMUP)
    _what = "lr_scheduler"


class MetricSpec(StrictModel):
    type: str
    top_k: int | None = Field(default=None, ge=1, le=1000)

    @field_validator("type")
    @classmethod
    def _known(cls, value: str) -> str:
        return _check_name(value, names.METRICS, "metric")


# ---------------------------------------------------------------- data and the rest


class BuiltinSource(StrictModel):
    builtin: Literal["digits", "iris", "wine", "breast_cancer"]
    split: Literal["train", "val", "test"] = "train"


class DatasetSource(StrictModel):
    dataset: Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F-]{36}$")]


DataSource = BuiltinSource | DatasetSource


class DataSpec(StrictModel):
    train: DataSource
    val: DataSource | None = None
    batch_size: int = Field(default=64, ge=1, le=65_536)
    shuffle: bool = True


class CompressionSpec(StrictModel):
    type: Literal["2bit", "1bit"]
    threshold: float = Field(default=0.5, gt=0)


class TrainerSpec(StrictModel):
    kvstore: Literal["device", "local"] | None = "device"
    update_on_kvstore: bool | None = None
    compression: CompressionSpec | None = None


class CheckpointSpec(StrictModel):
    every_steps: int = Field(default=200, ge=1, le=10_000_000)
    keep_last: int = Field(default=3, ge=1, le=100)


def _default_metrics() -> list[str | MetricSpec]:
    return ["accuracy"]


class JobSpec(StrictModel):
    """A training job, exactly as in design.md's job spec (v1)."""

    name: ShortText
    model: list[Layer] = Field(min_length=1, max_length=MAX_LAYERS)
    data: DataSpec
    loss: LossSpec
    initializer: InitializerSpec = InitializerSpec(type="uniform")
    optimizer: OptimizerSpec
    lr_scheduler: SchedulerSpec | None = None
    trainer: TrainerSpec = TrainerSpec()
    epochs: int = Field(default=1, ge=1, le=100_000)
    metrics: list[str | MetricSpec] = Field(default_factory=_default_metrics, max_length=16)
    checkpoint: CheckpointSpec = CheckpointSpec()
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    device: Literal["cpu", "gpu", "auto"] = "auto"

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, values: list[str | MetricSpec]) -> list[str | MetricSpec]:
        return [
            _check_name(v, names.METRICS, "metric") if isinstance(v, str) else v for v in values
        ]

    def queue(self, *, default: str = "cpu") -> str:
        """The Celery queue: ``gpu`` and ``cpu`` as asked, ``auto`` uses ``default``."""
        return default if self.device == "auto" else self.device

    def initial_learning_rate(self) -> float | None:
        if self.optimizer.learning_rate is not None:
            return self.optimizer.learning_rate
        base_lr = self.lr_scheduler.params.get("base_lr") if self.lr_scheduler else None
        return float(base_lr) if isinstance(base_lr, int | float) else None

    def dataset_ids(self) -> list[str]:
        sources = [self.data.train, self.data.val]
        return [s.dataset for s in sources if isinstance(s, DatasetSource)]


def parse_spec(data: dict[str, Any]) -> JobSpec:
    """Validate a spec dict (raises pydantic.ValidationError naming the bad field)."""
    return JobSpec.model_validate(data)
