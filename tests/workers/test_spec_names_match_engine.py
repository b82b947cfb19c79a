"""The job spec's static name lists (core.registry_names, used by the api, which may not
import the engine) must name only things the engine's registries can create, and must offer
every optimizer the engine registers."""

import pytest

from core import registry_names as names
from engine import initializer, lr_scheduler, metric, optimizer
from engine.gluon import loss, nn

# the smallest arguments each name needs (everything else has a default)
REQUIRED_ARGS = {
    "Dense": {"units": 2},
    "Conv2D": {"channels": 2, "kernel_size": 1},
    "Dropout": {"rate": 0.1},
    "Activation": {"activation": "relu"},
    "Embedding": {"input_dim": 3, "output_dim": 2},
    "LeakyReLU": {"alpha": 0.1},
    "constant": {"value": 1.0},
    "top_k_accuracy": {"top_k": 3},
    "factor": {"step": 10},
    "multifactor": {"step": [10, 20]},
    "poly": {"max_update": 100},
    "cosine": {"max_update": 100},
}

CASES = [
    ("layers", names.LAYERS, nn.create),
    ("optimizers", names.OPTIMIZERS, optimizer.create),
    ("losses", names.LOSSES, loss.create),
    ("initializers", names.INITIALIZERS, initializer.create),
    ("metrics", names.METRICS, metric.create),
    ("schedulers", names.LR_SCHEDULERS, lr_scheduler.create),
]


@pytest.mark.parametrize(("kind", "listed", "create"), CASES, ids=[c[0] for c in CASES])
def test_every_listed_name_is_creatable_by_the_engine(kind, listed, create):
    for name in listed:
        assert create(name, **REQUIRED_ARGS.get(name, {})) is not None, f"{kind}: {name}"


def test_spec_offers_every_engine_optimizer():
    registered = {  # the engine's own (tests register user optimizers too)
        cls.__name__.lower() for cls in optimizer.optimizer._REGISTRY.classes()
        if cls.__module__.startswith("engine.")
    }
    internal = {"test"}  # MXNet's test-only optimizer
    missing = registered - set(names.OPTIMIZERS) - internal
    assert not missing, f"engine optimizers the job spec does not offer: {sorted(missing)}"
