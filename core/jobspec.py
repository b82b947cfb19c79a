"""The job spec (v1): what a user submits, validated before anything is stored.

Unknown fields are errors everywhere. Losses, optimizers, schedulers, initializers and
metrics are checked per class against core/spec_tables.json (generated from the engine's
constructors; the api cannot import the engine), see :mod:`core.spec_params`. The full
reference, generated from this module, is docs/job-spec.md.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    field_validator,
    model_validator,
)

from core import spec_params
from core.model_forms import UploadedModelRef, ZooModel, model_form
from core.rules import MAX_RULES, Rule, RuleList
from core.transform_spec import Transforms

MAX_LAYERS = 256
MAX_PARAMS = 32
# No control characters (a NUL is refused by PostgreSQL text columns, and no name needs one).
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=PRINTABLE)]
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


class GlobalMaxPool2D(StrictModel):
    type: Literal["GlobalMaxPool2D"]


class Reshape(StrictModel):
    """The whole batch's new shape; ``0`` copies that input dimension, ``-1`` infers one.

    ``[-1, 1, 8, 8]`` turns the 64 flat features of ``digits`` into 8x8 one-channel images
    for Conv2D."""

    type: Literal["Reshape"]
    shape: list[Annotated[int, Field(ge=-1, le=1_000_000)]] = Field(min_length=1, max_length=8)

    @field_validator("shape")
    @classmethod
    def _one_inferred_dimension(cls, shape: list[int]) -> list[int]:
        if shape.count(-1) > 1:
            raise ValueError("at most one dimension may be -1 (inferred)")
        return shape


Layer = Annotated[
    Dense | Dropout | ActivationLayer | Flatten | Conv2D | MaxPool2D | AvgPool2D
    | GlobalAvgPool2D | GlobalMaxPool2D | BatchNorm | LayerNorm | Embedding | LeakyReLU
    | Reshape,
    Field(discriminator="type"),
]
# Layers that expect images (N, C, H, W): on flat rows they fail at run time, so a layer
# list that reaches one before any Reshape is refused at submit when the data is flat.
IMAGE_LAYERS = (Conv2D, MaxPool2D, AvgPool2D, GlobalAvgPool2D, GlobalMaxPool2D)

LayerList = Annotated[list[Layer], Field(min_length=1, max_length=MAX_LAYERS)]
# Tags are capitalised: api.errors drops them from a field's name (``model.0.units``).
ModelSpec = Annotated[
    Annotated[LayerList, Tag("Layers")]
    | Annotated[ZooModel, Tag("Zoo")]
    | Annotated[UploadedModelRef, Tag("Uploaded")],
    Discriminator(
        model_form,
        custom_error_type="model_form",
        custom_error_message="a model is a list of layers, {zoo: name, classes: n} or "
                             "{model: id}",
    ),
]


# ---------------------------------------------------------------- named components


class NamedComponent(BaseModel):
    """``{type: name, **params}``, checked against that class's row of the spec tables.

    The tables (core/spec_tables.json) are generated from the engine's constructors, so a
    parameter the engine would refuse (``adam`` + ``momentum``) is refused here, at submit.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str
    # Class-level: which table this component is checked against (pydantic leaves a
    # ClassVar alone instead of copying it into every instance).
    _kind: ClassVar[spec_params.Kind]

    @model_validator(mode="after")
    def _validate(self) -> NamedComponent:
        kind = self._kind
        name = spec_params.check_name(kind, self.type)
        object.__setattr__(self, "type", name)
        if len(self.params) > MAX_PARAMS:
            raise ValueError(f"too many {kind} parameters (at most {MAX_PARAMS})")
        spec_params.check_component(kind, name, self.params)
        return self

    @property
    def params(self) -> dict[str, ParamValue]:
        return dict(self.model_extra or {})

    def engine_kwargs(self) -> dict[str, ParamValue]:
        """The parameters to pass to the engine's ``create(type, **kwargs)``."""
        return {k: v for k, v in self.params.items() if v is not None}


class LossSpec(NamedComponent):
    _kind = "loss"


class InitializerSpec(NamedComponent):
    _kind = "initializer"


class OptimizerSpec(NamedComponent):
    _kind = "optimizer"

    @property
    def learning_rate(self) -> float | None:
        value = self.params.get("learning_rate")
        return float(value) if isinstance(value, int | float) else None


class SchedulerSpec(NamedComponent):
    _kind = "lr_scheduler"


class MetricSpec(NamedComponent):
    """A metric with parameters, e.g. ``{type: top_k_accuracy, top_k: 5}``."""

    _kind = "metric"

    @model_validator(mode="before")
    @classmethod
    def _drop_unset_top_k(cls, data: Any) -> Any:
        # Specs stored by the previous schema dumped ``top_k: null`` for every metric.
        if isinstance(data, dict) and "top_k" in data and data["top_k"] is None:
            return {k: v for k, v in data.items() if k != "top_k"}
        return data


# ---------------------------------------------------------------- data and the rest


# Built-in data sets, no network at run time: name -> feature count. The one list: the
# worker loads ``sklearn.datasets.load_<name>`` for the tables, and generates the image
# sets (synthetic, in MNIST's and CIFAR-10's file formats) locally; the size estimate
# reads the feature count.
# The image sets reach the network as CHW tensors (ToTensor is added when absent).
IMAGE_BUILTIN_SHAPES: dict[str, tuple[int, int, int]] = {
    "mnist": (1, 28, 28), "cifar10": (3, 32, 32),
}
BUILTIN_DATASETS: dict[str, int] = {
    "digits": 64, "iris": 4, "wine": 13, "breast_cancer": 30,
    **{name: math.prod(shape) for name, shape in IMAGE_BUILTIN_SHAPES.items()},
}
BuiltinName = Literal["digits", "iris", "wine", "breast_cancer", "mnist", "cifar10"]
IMAGE_BUILTINS = frozenset(IMAGE_BUILTIN_SHAPES)


class BuiltinSource(StrictModel):
    builtin: BuiltinName
    split: Literal["train", "val", "test"] = "train"
    transforms: Transforms | None = Field(
        default=None, description="image transforms (image sets only), applied in order"
    )

    @model_validator(mode="after")
    def _transforms_need_images(self) -> BuiltinSource:
        if self.transforms and self.builtin not in IMAGE_BUILTINS:
            raise ValueError(f"transforms apply to image sets ({sorted(IMAGE_BUILTINS)}), "
                             f"not to {self.builtin!r}")
        return self


DATASET_ID_PATTERN = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                                r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class DatasetSource(StrictModel):
    dataset: str = Field(description="the id of an uploaded data set (a uuid)")
    transforms: Transforms | None = Field(
        default=None, description="image transforms (RecordIO and image-folder sets only)"
    )

    @field_validator("dataset")
    @classmethod
    def _is_dataset_id(cls, value: str) -> str:
        if not DATASET_ID_PATTERN.match(value):
            shown = value if len(value) <= 64 else value[:61] + "..."
            raise ValueError(
                f"{shown!r} is not a dataset id; use the id (a uuid) that "
                "POST /v1/datasets/uploads returned"
            )
        return value


def _source_kind(value: Any) -> str | None:
    # Pick the member by its key, so a bad dataset id is reported as exactly that and not
    # as "builtin: Field required" from the other member of the union.
    if isinstance(value, dict):
        keys = value.keys()
    elif isinstance(value, BaseModel):
        keys = vars(value).keys()
    else:
        return None  # a list, a number, ...: refused as "a data source is ..."
    if "dataset" in keys:
        return "DatasetSource"
    if "builtin" in keys:
        return "BuiltinSource"
    return None


DataSource = Annotated[
    Annotated[BuiltinSource, Tag("BuiltinSource")] | Annotated[DatasetSource, Tag("DatasetSource")],
    Discriminator(
        _source_kind,
        custom_error_type="data_source",
        custom_error_message="a data source is {builtin: name, split: ...} or {dataset: id}",
    ),
]


class DataSpec(StrictModel):
    train: DataSource
    val: DataSource | None = None
    batch_size: int = Field(default=64, ge=1, le=65_536)
    shuffle: bool = True
    normalize: Literal["auto"] | None = Field(
        default=None,
        description="auto: normalise with the training set's per-channel mean/std (the "
                    "stats computed when it was validated)",
    )


class CompressionSpec(StrictModel):
    type: Literal["2bit", "1bit"]
    threshold: float = Field(default=0.5, gt=0)


class TrainerSpec(StrictModel):
    kvstore: Literal["device", "local"] | None = "device"
    update_on_kvstore: bool | None = None
    compression: CompressionSpec | None = None


class ResourcesSpec(StrictModel):
    workers: int = Field(
        default=1, ge=1, le=1024,
        description="worker processes that train the job together, data-parallel (one "
                    "rank each; data.batch_size is the global batch, split evenly among "
                    "them); the api refuses more than its configured maximum",
    )


class CheckpointSpec(StrictModel):
    every_steps: int = Field(default=200, ge=1, le=10_000_000)
    keep_last: int = Field(default=3, ge=1, le=100)


def _default_metrics() -> list[str | MetricSpec]:
    return ["accuracy"]


class JobSpec(StrictModel):
    """A training job, exactly as in design.md's job spec (v1)."""

    name: ShortText
    model: ModelSpec
    data: DataSpec
    loss: LossSpec
    initializer: InitializerSpec = InitializerSpec(type="uniform")
    optimizer: OptimizerSpec
    lr_scheduler: SchedulerSpec | None = None
    trainer: TrainerSpec = TrainerSpec()
    epochs: int = Field(default=1, ge=1, le=100_000)
    metrics: list[str | MetricSpec] = Field(default_factory=_default_metrics, max_length=16)
    checkpoint: CheckpointSpec = CheckpointSpec()
    resources: ResourcesSpec = ResourcesSpec()
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    device: Literal["cpu", "gpu", "auto"] = "auto"
    rules: list[Rule] = Field(default_factory=list, max_length=MAX_RULES,
                              description="policies the worker applies at each validation "
                                          "(see \"Rules\" below)")

    @field_validator("rules")
    @classmethod
    def _unique_rule_names(cls, rules: list[Rule]) -> list[Rule]:
        return list(RuleList(rules=rules).rules)

    @model_validator(mode="after")
    def _val_metrics_need_val_data(self) -> JobSpec:
        for index, rule in enumerate(self.rules):
            if rule.metric.startswith("val_") and self.data.val is None:
                raise ValueError(f"rules.{index}.metric: {rule.metric} needs validation "
                                 "data (data.val)")
        return self

    @model_validator(mode="after")
    def _batch_splits_among_workers(self) -> JobSpec:
        workers = self.resources.workers
        if self.data.batch_size % workers:
            raise ValueError(f"data.batch_size: {self.data.batch_size} does not split evenly "
                             f"among resources.workers={workers} (each rank trains "
                             f"batch_size / workers samples a step)")
        return self

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, values: list[str | MetricSpec]) -> list[str | MetricSpec]:
        return [
            spec_params.check_name("metric", v) if isinstance(v, str) else v for v in values
        ]

    def queue(self, *, default: str = "cpu") -> str:
        """The Celery queue: ``gpu`` and ``cpu`` as asked, ``auto`` uses ``default``."""
        return default if self.device == "auto" else self.device

    def initial_learning_rate(self) -> float | None:
        """The base learning rate: the optimizer's, else the schedule's ``base_lr``."""
        if self.optimizer.learning_rate is not None:
            return self.optimizer.learning_rate
        base_lr = self.lr_scheduler.params.get("base_lr") if self.lr_scheduler else None
        return float(base_lr) if isinstance(base_lr, int | float) else None

    def learning_rate_at_start(self) -> float | None:
        """The learning rate in effect at step 0, what a queued job shows: a schedule's
        value there, which is where its warmup begins (``warmup_begin_lr``) when it has
        one, else its base (every engine schedule starts at its base_lr; a test holds
        this against the engine's schedules)."""
        base = self.initial_learning_rate()
        schedule = self.lr_scheduler
        if base is None or schedule is None:
            return base
        warmup_steps = schedule.params.get("warmup_steps")
        if isinstance(warmup_steps, int) and warmup_steps > 0:
            begin = schedule.params.get("warmup_begin_lr")
            if not isinstance(begin, int | float):
                entry = spec_params.parameters(
                    "lr_scheduler", spec_params.check_name("lr_scheduler", schedule.type))
                begin = entry.get("warmup_begin_lr", {}).get("default", 0.0)
            return float(begin)
        return base

    def uploaded_model_id(self) -> str | None:
        return self.model.model if isinstance(self.model, UploadedModelRef) else None

    def dataset_ids(self) -> list[str]:
        sources: list[BuiltinSource | DatasetSource | None] = [self.data.train, self.data.val]
        return [s.dataset for s in sources if isinstance(s, DatasetSource)]


def parse_spec(data: dict[str, Any]) -> JobSpec:
    """Validate a spec dict (raises pydantic.ValidationError naming the bad field)."""
    return JobSpec.model_validate(data)
