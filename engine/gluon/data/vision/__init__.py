"""``engine.gluon.data.vision``: image datasets and transforms (``mxnet.gluon.data.vision``).

>>> from engine.gluon.data import vision
>>> sorted(n for n in vision.__all__ if n.endswith("Dataset"))[:2]
['ImageFolderDataset', 'ImageListDataset']
"""

from . import datasets, transforms
from .datasets import (
    CIFAR10,
    CIFAR100,
    MNIST,
    FashionMNIST,
    ImageFolderDataset,
    ImageListDataset,
    ImageRecordDataset,
)

__all__ = ["CIFAR10", "CIFAR100", "MNIST", "FashionMNIST", "ImageFolderDataset",
           "ImageListDataset", "ImageRecordDataset", "datasets", "transforms"]
