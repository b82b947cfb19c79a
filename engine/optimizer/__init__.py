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

from .adam import FTML, LAMB, Adam, Adamax, AdamW, Nadam
from .adaptive import AdaDelta, AdaGrad, Ftrl, RMSProp
from .lbsgd import LBSGD
from .optimizer import Optimizer, check_learning_rate, create, register, registered
from .sgd import DCASGD, LARS, NAG, SGD, SGLD, Signum, Test
from .updater import Updater, get_updater

ccSGD = SGD  # noqa: N816 - MXNet's alias
Optimizer.opt_registry.register(SGD, name="ccsgd")

__all__ = [
    "DCASGD", "FTML", "LAMB", "LARS", "LBSGD", "NAG", "SGD", "SGLD", "AdaDelta", "AdaGrad",
    "Adam", "AdamW", "Adamax", "Ftrl", "Nadam", "Optimizer", "RMSProp", "Signum", "Test",
    "Updater", "ccSGD", "check_learning_rate", "create", "get_updater", "register",
    "registered",
]
