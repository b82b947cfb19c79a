"""``mx.npx``: the numpy-extension operators MXNet 2.x code calls (a small subset).

>>> import engine as mx
>>> mx.npx.set_np()
>>> mx.npx.relu(mx.nd.array([-1.0, 2.0])).asnumpy().tolist()
[0.0, 2.0]
>>> mx.npx.reset_np()

``set_np``/``reset_np`` and the ``is_np_*`` queries are ``engine.util``'s: under ``set_np()``
operators keep 0-d results, as MXNet's numpy arrays do.
"""

from __future__ import annotations

from typing import Any

from .. import image
from .. import ndarray as _nd
from .. import util as _util
from ..context import cpu, cpu_pinned, current_context, gpu, num_gpus  # noqa: F401 - as MXNet
from ..ndarray import nn_ops, ops
from ..ndarray.conv_ops import convolution, pooling
from ..ndarray.ndarray import NDArray
from ..ndarray.norm_ops import batch_norm, embedding, layer_norm
from . import random, utils
from .shapes import arange_like, constraint_check, nonzero, reshape

softmax = nn_ops.softmax
log_softmax = nn_ops.log_softmax
one_hot = nn_ops.one_hot
activation = nn_ops.activation
leaky_relu = nn_ops.leaky_relu
fully_connected = nn_ops.fully_connected
dropout = nn_ops.dropout
pick = ops.pick
convolution = convolution
pooling = pooling
batch_norm = batch_norm
layer_norm = layer_norm
embedding = embedding


def relu(data: NDArray) -> NDArray:
    return ops.unary("relu", data)


def sigmoid(data: NDArray) -> NDArray:
    return ops.unary("sigmoid", data)


set_np = _util.set_np
reset_np = _util.reset_np
is_np_array = _util.is_np_array
is_np_shape = _util.is_np_shape
use_np = _util.use_np


def seed(seed_state: int, ctx: Any = "all") -> None:
    from .. import random as _random

    _random.seed(seed_state, ctx)


# the legacy operators under their numpy-extension names
deconvolution = _nd.Deconvolution
rnn = _nd.RNN
roi_pooling = _nd.ROIPooling
batch_dot = _nd.batch_dot
batch_flatten = _nd.flatten
cast = _nd.cast
erf, erfinv, gamma, gammaln = _nd.erf, _nd.erfinv, _nd.gamma, _nd.gammaln
gather_nd = _nd.gather_nd
reshape_like = _nd.reshape_like
sequence_mask = _nd.SequenceMask
shape_array = _nd.shape_array
slice = _nd.slice  # noqa: A001 - MXNet's name
smooth_l1 = _nd.smooth_l1
topk = _nd.topk
waitall = _nd.waitall
save, load = utils.save, utils.load
