"""``engine.module`` (``mx.mod``): MXNet's Module API over symbols.

>>> import engine as mx
>>> net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=2),
...                            name='softmax')
>>> mx.mod.Module(net).label_names
['softmax_label']
"""

from .base_module import BaseModule
from .bucketing_module import BucketingModule
from .module import Module

__all__ = ["BaseModule", "BucketingModule", "Module"]
