"""``engine.nd``: MXNet's imperative NDArray API on numpy (cupy on GPU).

>>> from engine import nd
>>> nd.dot(nd.ones((2, 3)), nd.ones((3, 4))).shape
(2, 4)
"""

from __future__ import annotations

from typing import Any

from . import allocator as _allocator
from . import random
from .conv_ops import Convolution  # noqa: F401 - exported as nd.Convolution etc.
from .creation import (
    arange,
    array,
    empty,
    eye,
    full,
    full_like,
    linspace,
    load,
    load_frombuffer,
    ones,
    ones_like,
    save,
    waitall,
    zeros,
    zeros_like,
)
from .ctc_ops import CTCLoss, ctc_loss  # noqa: F401 - the layers' CTC op
from .deconv_ops import Deconvolution  # noqa: F401
from .fused_rnn import RNN  # noqa: F401 - MXNet's fused recurrent op (mx.sym.RNN too)
from .group_norm_ops import GroupNorm, InstanceNorm  # noqa: F401 - layers' ops
from .ndarray import NDArray, apply_op
from .nn_ops import activation as Activation  # noqa: N812 - MXNet's operator names
from .nn_ops import dropout as Dropout  # noqa: N812
from .nn_ops import fully_connected as FullyConnected  # noqa: N812
from .nn_ops import leaky_relu as LeakyReLU  # noqa: N812
from .nn_ops import log_softmax, one_hot, softmax
from .norm_ops import BatchNorm, Embedding, LayerNorm  # noqa: F401 - nd.BatchNorm etc.
from .ops import argmax as _argmax
from .ops import argmin as _argmin
from .ops import (
    batch_dot,
    binary,
    clip,
    dot,
    norm,
    prod,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_sum,
    stop_gradient,
    unary,
    where,
)
from .pool_ops import Pooling  # noqa: F401
from .shape_ops import (
    concat,
    expand_dims,
    flatten,
    pick,
    repeat,
    reshape,
    split,
    squeeze,
    stack,
    swapaxes,
    take,
    tile,
    transpose,
)

_allocator.keep_freed_memory()  # reuse big temporaries across steps (see allocator.py)
BlockGrad = stop_gradient
Flatten = flatten
Concat = concat


def sum(data: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False):  # noqa: A001
    return reduce_sum(data, axis, keepdims, exclude)


def mean(data: NDArray, axis: Any = None, keepdims: bool = False, exclude: bool = False):
    return reduce_mean(data, axis, keepdims, exclude)


def max(data: NDArray, axis: Any = None, keepdims: bool = False):  # noqa: A001
    return reduce_max(data, axis, keepdims)


def min(data: NDArray, axis: Any = None, keepdims: bool = False):  # noqa: A001
    return reduce_min(data, axis, keepdims)


def argmax(data: NDArray, axis: int | None = None, keepdims: bool = False) -> NDArray:
    return _argmax(data, axis, keepdims)


def argmin(data: NDArray, axis: int | None = None, keepdims: bool = False) -> NDArray:
    return _argmin(data, axis, keepdims)


def _unary_fn(name: str):
    def fn(data: NDArray) -> NDArray:
        return unary(name, data)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (differentiable)."
    return fn


def _binary_fn(name: str, op: str):
    def fn(lhs: Any, rhs: Any) -> NDArray:
        return binary(op, lhs, rhs)

    fn.__name__ = name
    fn.__doc__ = f"Broadcasting ``{op}`` (differentiable)."
    return fn


relu = _unary_fn("relu")
sigmoid = _unary_fn("sigmoid")
tanh = _unary_fn("tanh")
exp = _unary_fn("exp")
log = _unary_fn("log")
log1p = _unary_fn("log1p")
expm1 = _unary_fn("expm1")
sqrt = _unary_fn("sqrt")
rsqrt = _unary_fn("rsqrt")
square = _unary_fn("square")
reciprocal = _unary_fn("reciprocal")
abs = _unary_fn("abs")  # noqa: A001
sign = _unary_fn("sign")
negative = _unary_fn("negative")
sin = _unary_fn("sin")
cos = _unary_fn("cos")
floor = _unary_fn("floor")
ceil = _unary_fn("ceil")
round = _unary_fn("round")  # noqa: A001
softsign = _unary_fn("softsign")

add = broadcast_add = elemwise_add = _binary_fn("add", "add")
subtract = broadcast_sub = broadcast_minus = elemwise_sub = _binary_fn("subtract", "sub")
multiply = broadcast_mul = elemwise_mul = _binary_fn("multiply", "mul")
divide = broadcast_div = elemwise_div = _binary_fn("divide", "div")
power = broadcast_power = _binary_fn("power", "pow")
maximum = broadcast_maximum = _binary_fn("maximum", "maximum")
minimum = broadcast_minimum = _binary_fn("minimum", "minimum")


def broadcast_to(data: NDArray, shape: Any) -> NDArray:
    return data.broadcast_to(shape)


def softmax_cross_entropy(data: NDArray, label: NDArray) -> NDArray:
    """Sum over the batch of ``-log softmax(data)[label]`` (MXNet's operator)."""
    from .nn_ops import softmax_cross_entropy_sparse

    return reduce_sum(softmax_cross_entropy_sparse(data, label, axis=-1))


# ------------------------------------------------ the rest of MXNet 1.9's nd namespace
from . import contrib, linalg, output_ops, sampler_ops  # noqa: E402
from .cached_op import CachedOp  # noqa: E402
from .contrib import isfinite, isinf, isnan  # noqa: E402
from .fluent import (  # noqa: E402
    accepting_out,
    ignoring_unknown_keywords,
    install_methods,
    methods_accept_out,
)
from .im2col_ops import col2im, im2col  # noqa: E402
from .interop import (  # noqa: E402
    amp_multicast,
    from_dlpack,
    from_numpy,
    to_dlpack_for_read,
    to_dlpack_for_write,
)
from .interop import install as _install_interop  # noqa: E402
from .math_ops import (  # noqa: E402
    RELATION_FUNCTIONS,
    UNARY_FUNCTIONS,
    as_dtype,
    cumsum,
    hard_sigmoid,
    hypot,
    modulo,
    moments,
    nanprod,
    nansum,
    smooth_l1,
    softmin,
    sum_axis,
    true_divide,
)
from .pdf_ops import (  # noqa: E402
    random_pdf_dirichlet,
    random_pdf_exponential,
    random_pdf_gamma,
    random_pdf_generalized_negative_binomial,
    random_pdf_negative_binomial,
    random_pdf_normal,
    random_pdf_poisson,
    random_pdf_uniform,
)
from .random import shuffle  # noqa: E402
from .select_ops import (  # noqa: E402
    add_n,
    argmax_channel,
    argsort,
    batch_take,
    choose_element_0index,
    fill_element_0index,
    gather_nd,
    histogram,
    khatri_rao,
    onehot_encode,
    ravel_multi_index,
    reset_arrays,
    scatter_nd,
    sequence_last,
    sequence_mask,
    sequence_reverse,
    shape_array,
    size_array,
    sort,
    topk,
    unravel_index,
)
from .slice_ops import (  # noqa: E402
    broadcast_axes,
    broadcast_like,
    concatenate,
    crop,
    depth_to_space,
    diag,
    flip,
    moveaxis,
    pad,
    reshape_like,
    slice,
    slice_axis,
    slice_like,
    space_to_depth,
    split_v2,
)
from .update_ops import (  # noqa: E402
    adam_update,
    all_finite,
    ftml_update,
    ftrl_update,
    lamb_update_phase1,
    lamb_update_phase2,
    mp_lamb_update_phase1,
    mp_lamb_update_phase2,
    mp_nag_mom_update,
    mp_sgd_mom_update,
    mp_sgd_update,
    multi_all_finite,
    multi_lars,
    multi_mp_sgd_mom_update,
    multi_mp_sgd_update,
    multi_sgd_mom_update,
    multi_sgd_update,
    multi_sum_sq,
    nag_mom_update,
    preloaded_multi_mp_sgd_mom_update,
    preloaded_multi_mp_sgd_update,
    preloaded_multi_sgd_mom_update,
    preloaded_multi_sgd_update,
    rmsprop_update,
    rmspropalex_update,
    sgd_mom_update,
    sgd_update,
    signsgd_update,
    signum_update,
)

globals().update(UNARY_FUNCTIONS)  # arcsin, trunc, erf, gamma, identity, logical_not, ...
globals().update(RELATION_FUNCTIONS)  # equal, greater, logical_and, ...
for _name, _fn in RELATION_FUNCTIONS.items():
    globals()[f"broadcast_{_name}"] = _fn
broadcast_plus = add
broadcast_mod = modulo
broadcast_hypot = hypot
broadcast_axis = broadcast_axes
reverse = flip
SwapAxis = swapaxes
SliceChannel = split
Cast = cast = as_dtype
amp_cast = as_dtype
Crop = crop
crop = slice  # MXNet's lower-case crop is slice; Crop is the legacy NCHW op
Pad = pad
ElementWiseSum = add_n
max_axis = max
min_axis = min
Reshape = reshape
SequenceLast = sequence_last
SequenceMask = sequence_mask
SequenceReverse = sequence_reverse
Softmax = SoftmaxOutput = output_ops.softmax_output
LinearRegressionOutput = output_ops.linear_regression_output
LogisticRegressionOutput = output_ops.logistic_regression_output
MAERegressionOutput = output_ops.mae_regression_output
MakeLoss = output_ops.make_loss
make_loss = output_ops.make_loss_simple
SoftmaxActivation = output_ops.softmax_activation
L2Normalization = output_ops.l2_normalization
LRN = output_ops.lrn
UpSampling = output_ops.upsampling
SVMOutput = output_ops.svm_output
IdentityAttachKLSparseReg = output_ops.identity_attach_kl_sparse_reg
GridGenerator = sampler_ops.grid_generator
BilinearSampler = sampler_ops.bilinear_sampler
SpatialTransformer = sampler_ops.spatial_transformer
ROIPooling = sampler_ops.roi_pooling
Correlation = sampler_ops.correlation
BatchNorm_v1 = BatchNorm
Convolution_v1 = Convolution
Pooling_v1 = Pooling


for _name in linalg.__all__:  # nd.linalg_gemm2, nd.linalg_potrf, ...
    globals()[f"linalg_{_name}"] = getattr(linalg, _name)

# MXNet 1.9 hangs its 2.x-style namespaces off nd too (nd.np is mx.np, nd.npx is mx.npx);
# they import this package, so they are looked up on first use.
_LAZY_NAMESPACES = {"np": "engine.np", "numpy": "engine.np", "npx": "engine.npx",
                    "numpy_extension": "engine.npx"}


def __getattr__(name: str) -> Any:
    if name in _LAZY_NAMESPACES:
        import importlib

        return importlib.import_module(_LAZY_NAMESPACES[name])
    raise AttributeError(f"module 'engine.ndarray' has no attribute {name!r}")


# Legacy flat random names: nd.uniform, nd.random_normal, nd.sample_gamma, ...
uniform = random_uniform = sample_uniform = random.uniform
normal = random_normal = sample_normal = random.normal
random_randint = random.randint
random_exponential = sample_exponential = random.exponential
random_gamma = sample_gamma = random.gamma
random_poisson = sample_poisson = random.poisson
random_negative_binomial = sample_negative_binomial = random.negative_binomial
random_generalized_negative_binomial = random.generalized_negative_binomial
sample_generalized_negative_binomial = random.generalized_negative_binomial
sample_multinomial = random.multinomial


_install_interop()

__all__ = [
    "CachedOp",
    "BilinearSampler", "Correlation", "GridGenerator", "ROIPooling", "SpatialTransformer",
    "IdentityAttachKLSparseReg", "SVMOutput",
    "col2im", "im2col",
    "linalg", "linalg_det", "linalg_extractdiag", "linalg_extracttrian", "linalg_gelqf",
    "linalg_gemm", "linalg_gemm2", "linalg_inverse", "linalg_makediag", "linalg_maketrian",
    "linalg_potrf", "linalg_potri", "linalg_slogdet", "linalg_sumlogdiag", "linalg_syrk",
    "linalg_trmm", "linalg_trsm",
    "random_pdf_dirichlet", "random_pdf_exponential", "random_pdf_gamma",
    "random_pdf_generalized_negative_binomial", "random_pdf_negative_binomial",
    "random_pdf_normal", "random_pdf_poisson", "random_pdf_uniform",
    "Activation", "BatchNorm", "BatchNorm_v1", "BlockGrad", "Cast", "Concat", "Convolution",
    "Convolution_v1", "Crop", "Dropout", "ElementWiseSum", "Embedding", "Flatten",
    "FullyConnected", "L2Normalization", "LRN", "LayerNorm", "LeakyReLU", "LinearRegressionOutput",
    "LogisticRegressionOutput", "MAERegressionOutput", "MakeLoss", "NDArray", "Pad", "Pooling",
    "Pooling_v1", "Reshape", "SequenceLast", "SequenceMask", "SequenceReverse", "SliceChannel",
    "Softmax", "SoftmaxActivation", "SoftmaxOutput", "SwapAxis", "UpSampling", "abs",
    "adam_update", "add", "add_n", "all_finite", "amp_cast", "amp_multicast", "arange", "arccos",
    "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "argmax", "argmax_channel", "argmin",
    "argsort", "array", "batch_dot", "batch_take", "broadcast_add", "broadcast_axes",
    "broadcast_axis", "broadcast_div", "broadcast_equal", "broadcast_greater",
    "broadcast_greater_equal", "broadcast_hypot", "broadcast_lesser", "broadcast_lesser_equal",
    "broadcast_like", "broadcast_logical_and", "broadcast_logical_or", "broadcast_logical_xor",
    "broadcast_maximum", "broadcast_minimum", "broadcast_minus", "broadcast_mod", "broadcast_mul",
    "broadcast_not_equal", "broadcast_plus", "broadcast_power", "broadcast_sub", "broadcast_to",
    "cast", "cbrt", "ceil", "choose_element_0index", "clip", "concat", "concatenate", "contrib",
    "cos", "cosh", "crop", "cumsum", "degrees", "depth_to_space", "diag", "divide", "dot",
    "elemwise_add", "elemwise_div", "elemwise_mul", "elemwise_sub", "empty", "equal", "erf",
    "erfinv", "exp", "expand_dims", "expm1", "eye", "fill_element_0index", "fix", "flatten",
    "flip", "floor", "from_dlpack", "from_numpy", "ftml_update", "ftrl_update", "full",
    "full_like", "gamma", "gammaln", "gather_nd", "greater", "greater_equal", "hard_sigmoid",
    "histogram", "hypot", "identity", "isfinite", "isinf", "isnan", "khatri_rao",
    "lamb_update_phase1", "lamb_update_phase2", "lesser", "lesser_equal", "linspace", "load",
    "load_frombuffer",
    "log", "log10", "log1p", "log2", "log_softmax", "logical_and", "logical_not", "logical_or",
    "logical_xor", "make_loss", "max", "max_axis", "maximum", "mean", "min", "min_axis", "minimum",
    "modulo", "moments", "moveaxis", "mp_lamb_update_phase1", "mp_lamb_update_phase2",
    "mp_nag_mom_update", "mp_sgd_mom_update", "mp_sgd_update", "multi_all_finite", "multi_lars",
    "multi_mp_sgd_mom_update", "multi_mp_sgd_update", "multi_sgd_mom_update", "multi_sgd_update",
    "multi_sum_sq", "multiply", "nag_mom_update", "nanprod", "nansum", "negative", "norm",
    "normal", "not_equal", "one_hot", "onehot_encode", "ones", "ones_like", "pad", "pick", "power",
    "preloaded_multi_mp_sgd_mom_update", "preloaded_multi_mp_sgd_update",
    "preloaded_multi_sgd_mom_update", "preloaded_multi_sgd_update", "prod", "radians", "random",
    "random_exponential", "random_gamma", "random_generalized_negative_binomial",
    "random_negative_binomial", "random_normal", "random_poisson", "random_randint",
    "random_uniform", "ravel_multi_index", "rcbrt", "reciprocal", "reduce_max", "reduce_mean",
    "reduce_min", "reduce_sum", "relu", "repeat", "reset_arrays", "reshape", "reshape_like",
    "reverse", "rint", "rmsprop_update", "rmspropalex_update", "round", "rsqrt",
    "sample_exponential", "sample_gamma", "sample_generalized_negative_binomial",
    "sample_multinomial", "sample_negative_binomial", "sample_normal", "sample_poisson",
    "sample_uniform", "save", "scatter_nd", "sequence_last", "sequence_mask", "sequence_reverse",
    "sgd_mom_update", "sgd_update", "shape_array", "shuffle", "sigmoid", "sign", "signsgd_update",
    "signum_update", "sin", "sinh", "size_array", "slice", "slice_axis", "slice_like", "smooth_l1",
    "softmax", "softmax_cross_entropy", "softmin", "softsign", "sort", "space_to_depth", "split",
    "split_v2", "sqrt", "square", "squeeze", "stack", "stop_gradient", "subtract", "sum",
    "sum_axis", "swapaxes", "take", "tan", "tanh", "tile", "to_dlpack_for_read",
    "to_dlpack_for_write", "topk", "transpose", "true_divide", "trunc", "uniform", "unravel_index",
    "waitall", "where", "zeros", "zeros_like"
]

# MXNet's operators without parameters (element-wise math, broadcast arithmetic, ...) accept
# any keyword and ignore it, its operator registry having no parameters to parse it into:
# nd.broadcast_maximum(a, b, axis=1) runs there, so it runs here.
_PARAMETERLESS = (
    "BlockGrad", "ElementWiseSum", "Flatten", "abs", "add_n", "arccos", "arccosh", "arcsin",
    "arcsinh", "arctan", "arctanh", "argmax_channel", "batch_take", "broadcast_add",
    "broadcast_div", "broadcast_equal", "broadcast_greater", "broadcast_greater_equal",
    "broadcast_hypot", "broadcast_lesser", "broadcast_lesser_equal", "broadcast_logical_and",
    "broadcast_logical_or", "broadcast_logical_xor", "broadcast_maximum", "broadcast_minimum",
    "broadcast_minus", "broadcast_mod", "broadcast_mul", "broadcast_not_equal",
    "broadcast_plus", "broadcast_power", "broadcast_sub", "cbrt", "ceil", "cos", "cosh",
    "degrees", "elemwise_add", "elemwise_div", "elemwise_mul", "elemwise_sub", "erf", "erfinv",
    "exp", "expm1", "fill_element_0index", "fix", "flatten", "floor", "gamma", "gammaln",
    "gather_nd", "identity", "khatri_rao", "linalg_det", "linalg_gelqf", "linalg_inverse",
    "linalg_potrf", "linalg_potri", "linalg_slogdet", "linalg_sumlogdiag", "log", "log10",
    "log1p", "log2", "logical_not", "make_loss", "negative", "ones_like", "radians", "rcbrt",
    "reciprocal", "relu", "rint", "round", "rsqrt", "shape_array", "shuffle", "sigmoid",
    "sign", "sin", "sinh", "size_array", "softmax_cross_entropy", "softsign", "sqrt",
    "square", "stop_gradient", "tan", "tanh", "trunc", "where", "zeros_like",
)
for _name in _PARAMETERLESS:
    globals()[_name] = ignoring_unknown_keywords(globals()[_name])
# Every operator takes out= (MXNet's convention); creation, I/O and the random draws handle
# it themselves or have no result to write.
_NO_OUT = {"NDArray", "CachedOp", "array", "load", "load_frombuffer", "save", "waitall",
           "from_numpy", "from_dlpack", "reset_arrays", "random", "contrib", "linalg",
           "onehot_encode"}
for _name in __all__:
    _value = globals()[_name]
    if _name not in _NO_OUT and callable(_value) and not isinstance(_value, type):
        globals()[_name] = accepting_out(_value)

# MXNet's fluent methods: x.slice_axis(...), x.topk(...), x.arcsin(), ...
install_methods(globals(), (
    "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "argmax_channel", "argsort",
    "broadcast_axes", "cbrt", "cosh", "degrees", "depth_to_space", "diag", "fix", "flip",
    "log10", "log2", "log_softmax", "nanprod", "nansum", "one_hot", "pad", "radians", "rcbrt",
    "reshape_like", "rint", "shape_array", "sinh", "size_array", "slice", "slice_axis",
    "slice_like", "softmax", "softmin", "sort", "space_to_depth", "split_v2", "tan", "topk",
    "trunc",
))
install_methods(globals(), ("broadcast_like",), replace=True)  # lhs_axes=/rhs_axes=
methods_accept_out((
    "abs", "argmax", "argmin", "clip", "exp", "log", "max", "mean", "min", "norm", "prod",
    "round", "sqrt", "square", "sum", "relu", "sigmoid", "tanh", "sign", "sin", "cos",
    "floor", "ceil", "expm1", "log1p", "rsqrt", "reciprocal", "tile", "repeat", "transpose",
    "expand_dims", "flatten", "squeeze", "take", "pick", "swapaxes", "broadcast_to",
    "zeros_like", "ones_like", "split",
))
