"""Job specs used by the api tests."""

from __future__ import annotations

import copy
from typing import Any

DIGITS_MLP: dict[str, Any] = {
    "name": "digits-mlp",
    "model": [
        {"type": "Dense", "units": 128, "activation": "relu"},
        {"type": "Dropout", "rate": 0.1},
        {"type": "Dense", "units": 10},
    ],
    "data": {
        "train": {"builtin": "digits", "split": "train"},
        "val": {"builtin": "digits", "split": "val"},
        "batch_size": 64,
        "shuffle": True,
    },
    "loss": {"type": "softmax_cross_entropy"},
    "initializer": {"type": "xavier", "magnitude": 2.24},
    "optimizer": {"type": "adam", "learning_rate": 0.001, "wd": 0.0001, "clip_gradient": 5.0},
    "lr_scheduler": {"type": "cosine", "max_update": 1000, "warmup_steps": 50},
    "trainer": {"kvstore": "device", "update_on_kvstore": None, "compression": None},
    "epochs": 10,
    "metrics": ["accuracy", "cross-entropy"],
    "checkpoint": {"every_steps": 200, "keep_last": 3},
    "seed": 42,
    "device": "auto",
}


def digits_spec(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(DIGITS_MLP)
    spec.update(changes)
    return spec
