"""Optimizers (``mxnet.optimizer``): every 1.x optimizer plus LAMB, LARS and AdamW.

>>> import engine as mx
>>> opt = mx.optimizer.create("Adam", learning_rate=0.01)
>>> type(opt).__name__
'Adam'

A user optimizer subclasses :class:`Optimizer`, implements ``create_state`` and
``update(index, weight, grad, state)`` with NDArray code, and registers itself with
``@mx.optimizer.Optimizer.register``; the Trainer then updates it parameter by parameter.
"""

from __future__ import annotations

from typing import Any

from . import contrib
from .adam import FTML, LAMB, Adam, Adamax, AdamW, Nadam
from .adaptive import AdaDelta, AdaGrad, Ftrl, RMSProp
from .lbsgd import LBSGD
from .optimizer import Optimizer, check_learning_rate, create, register, registered
from .sgd import DCASGD, LARS, NAG, SGD, SGLD, Signum
from .testing import Test
from .updater import Updater, get_updater

ccSGD = SGD  # noqa: N816 - MXNet's alias


def NDabs(data: Any, out: Any = None) -> Any:  # noqa: N802 - MXNet's name for nd.abs
    """``nd.abs`` (MXNet exports it from the optimizer module)."""
    from ..ndarray import abs as nd_abs

    return nd_abs(data, out=out)

Optimizer.opt_registry.register(SGD, name="ccsgd")

__all__ = [
    "DCASGD", "FTML", "LAMB", "LARS", "LBSGD", "NAG", "SGD", "SGLD", "AdaDelta", "AdaGrad",
    "Adam", "AdamW", "Adamax", "Ftrl", "Nadam", "Optimizer", "RMSProp", "Signum", "Test",
    "Updater", "ccSGD", "check_learning_rate", "create", "get_updater", "register",
    "registered", "NDabs", "contrib",
]
