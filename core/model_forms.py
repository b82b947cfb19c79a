"""The two model forms of a job spec besides the layer list (issue 12).

``{"zoo": "resnet18_v1", "classes": 10}`` builds a network of the engine's Gluon model zoo
(``engine.gluon.model_zoo.vision.get_model``); ``{"model": "<id>"}`` trains an uploaded
MXNet symbol (``POST /v1/models``), optionally starting from its uploaded params.

The api cannot import the engine, so the zoo's names and the keyword arguments a spec may
pass are listed here; tests/workers/test_zoo_names.py builds every one of them with the
engine and fails if this list and the zoo drift apart.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RESNETS = tuple(f"resnet{depth}_v{version}" for version in (1, 2) for depth in (18, 34, 50))
MOBILENETS = tuple(f"mobilenet{m}" for m in ("1.0", "0.75", "0.5", "0.25"))
MOBILENETS_V2 = tuple(f"mobilenetv2_{m}" for m in ("1.0", "0.75", "0.5", "0.25"))
VGGS = ("vgg11", "vgg16", "vgg11_bn", "vgg16_bn")
OTHERS = ("alexnet", "densenet121", "squeezenet1.0", "squeezenet1.1")

# Zoo name -> the keyword arguments (besides ``classes``) its constructor takes from a spec.
# ``thumbnail`` swaps ResNet's 7x7/stride-2 stem and max-pool for one 3x3 convolution, the
# variant for 32x32 images (CIFAR); ``dropout`` is DenseNet's rate before the classifier.
ZOO_MODELS: dict[str, frozenset[str]] = {
    **{name: frozenset({"thumbnail"}) for name in RESNETS},
    **{name: frozenset() for name in MOBILENETS + MOBILENETS_V2 + VGGS},
    "alexnet": frozenset(),
    "densenet121": frozenset({"dropout"}),
    "squeezenet1.0": frozenset(),
    "squeezenet1.1": frozenset(),
}
MAX_CLASSES = 100_000

MODEL_ID_PATTERN = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                              r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ZooModel(_Strict):
    """A network from the engine's Gluon model zoo, with random initial weights (no
    pretrained weights: workers have no network access)."""

    zoo: str = Field(description="one of the zoo's names, e.g. `resnet18_v1`, `mobilenet1.0`")
    classes: Annotated[int, Field(ge=1, le=MAX_CLASSES)] = 1000
    thumbnail: bool | None = Field(default=None, description="ResNet only: the 32x32 stem")
    dropout: float | None = Field(default=None, ge=0.0, lt=1.0,
                                  description="DenseNet only: dropout before the classifier")

    @field_validator("zoo")
    @classmethod
    def _known_name(cls, value: str) -> str:
        name = value.lower()
        if name not in ZOO_MODELS:
            raise ValueError(f"unknown zoo model {value[:64]!r}; available: "
                             + ", ".join(ZOO_MODELS))
        return name

    @model_validator(mode="after")
    def _kwargs_the_model_takes(self) -> ZooModel:
        for option in ("thumbnail", "dropout"):
            if getattr(self, option) is not None and option not in ZOO_MODELS[self.zoo]:
                raise ValueError(f"{self.zoo} takes no option {option!r}")
        return self

    def engine_kwargs(self) -> dict[str, Any]:
        """``get_model(self.zoo, **kwargs)``."""
        kwargs: dict[str, Any] = {"classes": self.classes}
        kwargs.update({o: getattr(self, o) for o in ("thumbnail", "dropout")
                       if getattr(self, o) is not None})
        return kwargs


class UploadedModelRef(_Strict):
    """An uploaded MXNet symbol (``POST /v1/models``) as the network."""

    model: str = Field(description="the id of an uploaded model (a uuid)")
    params: bool | None = Field(
        default=None,
        description="start from the uploaded params file (null: when the upload has one)",
    )

    @field_validator("model")
    @classmethod
    def _is_model_id(cls, value: str) -> str:
        if not MODEL_ID_PATTERN.match(value):
            shown = value if len(value) <= 64 else value[:61] + "..."
            raise ValueError(f"{shown!r} is not a model id; use the id (a uuid) that "
                             "POST /v1/models returned")
        return value


def model_form(value: Any) -> str | None:
    """Which form a spec's ``model`` is: picked by shape, so an error names that form's
    field (``model.zoo``) and not every member of the union."""
    if isinstance(value, list | tuple):
        return "Layers"
    if isinstance(value, ZooModel | UploadedModelRef):
        return "Zoo" if isinstance(value, ZooModel) else "Uploaded"
    keys = value.keys() if isinstance(value, dict) else ()
    if "zoo" in keys:
        return "Zoo"
    if "model" in keys:
        return "Uploaded"
    return None
