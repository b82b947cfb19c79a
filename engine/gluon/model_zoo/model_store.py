"""Where MXNet's model zoo fetches pretrained weights; here, the place that says it cannot.

MXNet downloads ``<name>-<sha1>.params`` from its public bucket into ``root``. Rudder
trains inside a service with no outbound network, so every constructor's
``pretrained=True`` ends in :func:`get_model_file`, which raises with the way to use
weights you already have.

>>> from engine.gluon.model_zoo import model_store
>>> try:
...     model_store.get_model_file("resnet18_v1")
... except model_store.PretrainedWeightsUnavailable as err:
...     print(str(err).split(":")[0])
resnet18_v1
"""

from __future__ import annotations

import os

DEFAULT_ROOT = os.path.join("~", ".mxnet", "models")


class PretrainedWeightsUnavailable(ValueError):
    """``pretrained=True`` was asked for; Rudder never downloads weights."""


def get_model_file(name: str, root: str = DEFAULT_ROOT) -> str:
    """Always raises: pretrained weights would have to be downloaded, and Rudder does not."""
    raise PretrainedWeightsUnavailable(
        f"{name}: pretrained=True is not supported: Rudder does not download MXNet's "
        f"pretrained weights (no network access; root={root!r} is not read). Build the model "
        "with pretrained=False and, if you hold the weights, load them with "
        "net.load_parameters(<file>)."
    )


def refuse_pretrained(pretrained: bool, name: str, root: str = DEFAULT_ROOT) -> None:
    """The constructors' ``pretrained`` check: a no-op for False, the error for True."""
    if pretrained:
        get_model_file(name, root)
