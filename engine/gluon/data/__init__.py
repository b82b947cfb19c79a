"""``engine.gluon.data``: datasets, samplers and the DataLoader.

>>> import numpy as np
>>> from engine.gluon import data
>>> loader = data.DataLoader(data.ArrayDataset(np.ones((5, 2)), np.arange(5)), batch_size=2)
>>> len(loader)
3
"""

from .dataloader import DataLoader, default_batchify_fn, default_mp_batchify_fn
from .dataset import ArrayDataset, Dataset, SimpleDataset
from .record_dataset import RecordFileDataset
from .sampler import BatchSampler, FilterSampler, RandomSampler, Sampler, SequentialSampler

__all__ = [
    "ArrayDataset", "BatchSampler", "DataLoader", "Dataset", "FilterSampler", "RandomSampler",
    "Sampler", "SequentialSampler", "SimpleDataset", "default_batchify_fn",
]
__all__ += ["default_mp_batchify_fn"]
__all__ += ["RecordFileDataset", "vision"]


def __getattr__(name: str) -> object:
    # vision pulls in Pillow: import it on first use so `engine.gluon.data` stays light
    if name == "vision":
        import importlib

        module = importlib.import_module("engine.gluon.data.vision")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'engine.gluon.data' has no attribute {name!r}")
