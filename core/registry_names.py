"""The engine registry names a job spec may use, as static lists.

The api validates specs without importing the engine (design.md import rules), so the
names live here; a test on the engine side compares these lists with the engine's
registries so the two cannot drift apart silently.
"""

from __future__ import annotations

LAYERS: tuple[str, ...] = (
    "Dense",
    "Dropout",
    "Activation",
    "Flatten",
    "Conv2D",
    "MaxPool2D",
    "AvgPool2D",
    "GlobalAvgPool2D",
    "BatchNorm",
    "LayerNorm",
    "Embedding",
    "LeakyReLU",
)

ACTIVATIONS: tuple[str, ...] = ("relu", "sigmoid", "tanh", "softrelu", "softsign")

OPTIMIZERS: tuple[str, ...] = (
    "sgd", "nag", "rmsprop", "adam", "adagrad", "adadelta", "adamax", "nadam", "dcasgd",
    "sgld", "signum", "ftml", "lbsgd", "ftrl", "lamb", "lars", "adamw", "groupadagrad",
)

LR_SCHEDULERS: tuple[str, ...] = ("factor", "multifactor", "poly", "cosine")

LOSSES: tuple[str, ...] = (
    "softmax_cross_entropy",
    "l2",
    "l1",
    "sigmoid_binary_cross_entropy",
    "huber",
    "kl_div",
)

INITIALIZERS: tuple[str, ...] = (
    "uniform", "normal", "zero", "one", "constant", "orthogonal", "xavier", "msraprelu",
    "bilinear",
)

METRICS: tuple[str, ...] = (
    "accuracy", "top_k_accuracy", "f1", "mcc", "mae", "mse", "rmse", "cross-entropy", "ce",
    "nll_loss", "perplexity", "pearsonr", "loss",
)

# Data sets that ship with an installed package (scikit-learn), so no network is needed.
BUILTIN_DATASETS: tuple[str, ...] = ("digits", "iris", "wine", "breast_cancer")
DATA_SPLITS: tuple[str, ...] = ("train", "val", "test")
