"""``engine.gluon.model_zoo``: MXNet 1.9.1's Gluon model zoo (``vision``), built here.

The networks have MXNet's constructors, structure and parameter names, so a params file
that MXNet's ``save_parameters`` wrote for a zoo model loads into the same model here.
Pretrained weights are not downloaded (Rudder runs without network access):
``pretrained=True`` raises :class:`PretrainedWeightsUnavailable`.

>>> from engine.gluon.model_zoo import vision
>>> net = vision.get_model("resnet18_v1", classes=10)
>>> type(net).__name__
'ResNetV1'
"""

from . import model_store, vision
from .model_store import PretrainedWeightsUnavailable

__all__ = ["PretrainedWeightsUnavailable", "model_store", "vision"]
