"""``engine.gluon.model_zoo.vision``: MXNet 1.9.1's vision networks by constructor or by
name (:func:`get_model`), with MXNet's structure and parameter names.

Every constructor takes ``classes`` (the output width), ``pretrained`` (refused: Rudder
never downloads weights), ``ctx`` and ``root`` (accepted for MXNet's signature) and the
Block arguments ``prefix``/``params``.

>>> import engine as mx
>>> from engine.gluon.model_zoo import vision
>>> net = vision.get_model("mobilenet0.25", classes=10)
>>> net.initialize()
>>> net(mx.nd.ones((2, 3, 32, 32))).shape
(2, 10)
>>> "squeezenet1.1" in vision.model_names()
True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ...block import HybridBlock
from .alexnet import *  # noqa: F403
from .alexnet import alexnet
from .densenet import *  # noqa: F403
from .densenet import densenet121, densenet161, densenet169, densenet201
from .inception import *  # noqa: F403
from .inception import inception_v3
from .mobilenet import *  # noqa: F403
from .mobilenet import (
    mobilenet0_5,
    mobilenet0_25,
    mobilenet0_75,
    mobilenet1_0,
    mobilenet_v2_0_5,
    mobilenet_v2_0_25,
    mobilenet_v2_0_75,
    mobilenet_v2_1_0,
)
from .resnet import *  # noqa: F403
from .resnet import (
    resnet18_v1,
    resnet18_v2,
    resnet34_v1,
    resnet34_v2,
    resnet50_v1,
    resnet50_v2,
    resnet101_v1,
    resnet101_v2,
    resnet152_v1,
    resnet152_v2,
)
from .squeezenet import *  # noqa: F403
from .squeezenet import squeezenet1_0, squeezenet1_1
from .vgg import *  # noqa: F403
from .vgg import vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn

# The names get_model accepts, as MXNet 1.9.1 spells them.
_models: dict[str, Callable[..., HybridBlock]] = {
    "resnet18_v1": resnet18_v1, "resnet34_v1": resnet34_v1, "resnet50_v1": resnet50_v1,
    "resnet101_v1": resnet101_v1, "resnet152_v1": resnet152_v1,
    "resnet18_v2": resnet18_v2, "resnet34_v2": resnet34_v2, "resnet50_v2": resnet50_v2,
    "resnet101_v2": resnet101_v2, "resnet152_v2": resnet152_v2,
    "vgg11": vgg11, "vgg13": vgg13, "vgg16": vgg16, "vgg19": vgg19,
    "vgg11_bn": vgg11_bn, "vgg13_bn": vgg13_bn, "vgg16_bn": vgg16_bn, "vgg19_bn": vgg19_bn,
    "alexnet": alexnet,
    "densenet121": densenet121, "densenet161": densenet161, "densenet169": densenet169,
    "densenet201": densenet201,
    "squeezenet1.0": squeezenet1_0, "squeezenet1.1": squeezenet1_1,
    "inceptionv3": inception_v3,
    "mobilenet1.0": mobilenet1_0, "mobilenet0.75": mobilenet0_75,
    "mobilenet0.5": mobilenet0_5, "mobilenet0.25": mobilenet0_25,
    "mobilenetv2_1.0": mobilenet_v2_1_0, "mobilenetv2_0.75": mobilenet_v2_0_75,
    "mobilenetv2_0.5": mobilenet_v2_0_5, "mobilenetv2_0.25": mobilenet_v2_0_25,
}


def model_names() -> list[str]:
    """Every name :func:`get_model` accepts, sorted."""
    return sorted(_models)


def get_model(name: str, **kwargs: Any) -> HybridBlock:
    """The zoo network called ``name`` (case-insensitive, e.g. ``"resnet18_v1"``,
    ``"mobilenet0.5"``), built with ``kwargs`` (``classes=10``, ``thumbnail=True``...)."""
    key = name.lower()
    if key not in _models:
        raise ValueError(f"Model {name} is not supported. Available options are\n\t"
                         + "\n\t".join(model_names()))
    return _models[key](**kwargs)


# the submodules' public names (their package attributes are shadowed by same-named
# constructors such as ``alexnet``, hence the lookup through importlib)
__all__ = ["get_model", "model_names"] + [
    name for module in ("alexnet", "densenet", "inception", "mobilenet", "resnet",
                        "squeezenet", "vgg")
    for name in importlib.import_module(f"{__name__}.{module}").__all__
]
