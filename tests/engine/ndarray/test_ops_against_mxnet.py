# ruff: noqa: E501 - each case is one expression string shared verbatim with MXNet
"""Differential tests: the nd operators added for MXNet 1.9.1 parity give MXNet's values.

Each case is one expression over the inputs ``x`` (2x3x4 floats), ``m`` (3x4), ``v`` (4,),
``i`` (indices) ... written once and evaluated by both engines: MXNet in ONE subprocess per
module (start-up dominates), the engine here. Expressions are constants of this file.
"""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet

_rng = np.random.default_rng(3)
INPUTS = {
    "x": _rng.uniform(-2, 2, (2, 3, 4)).astype(np.float32),
    "m": _rng.uniform(-2, 2, (3, 4)).astype(np.float32),
    "v": np.array([0.5, -1.5, 2.5, -0.2], np.float32),
    "p": _rng.uniform(0.1, 0.9, (3, 4)).astype(np.float32),
    "i": np.array([2, 0, 3], np.float32),
    "img": _rng.uniform(-1, 1, (1, 8, 2, 3)).astype(np.float32),
    "seq": _rng.uniform(-1, 1, (4, 3, 2)).astype(np.float32),
    "lens": np.array([2, 4, 1], np.float32),
    "nanv": np.array([1.0, np.nan, np.inf, -np.inf, 2.0], np.float32),
    "u8a": np.array([7, 200, 9], np.uint8),
    "u8b": np.array([2, 3, 4], np.uint8),
    "i32": np.array([7, -3, 5], np.int32),
    "pos": np.array([[1.0, 2.0, 0.5], [3.0, 0.7, 1.0]], np.float32),
    "counts": np.array([[1, 2, 0], [0, 3, 5]], np.float32),
}

CASES = {
    # elementwise math
    **{f"unary_{name}": f"nd.{name}(nd.array(inputs['p']))" for name in (
        "arcsin", "arccos", "arctan", "arcsinh", "arctanh", "sinh", "cosh", "tan", "degrees",
        "radians", "log2", "log10", "cbrt", "rcbrt", "erf", "erfinv", "gamma", "gammaln",
        "identity", "logical_not")},
    "unary_arccosh": "nd.arccosh(nd.array(inputs['p']) + 1)",
    **{f"round_{name}": f"nd.{name}(nd.array(inputs['m']))" for name in ("trunc", "fix", "rint")},
    **{f"cmp_{name}": f"nd.{name}(nd.array(inputs['m']), nd.array(inputs['v']))" for name in (
        "broadcast_equal", "broadcast_not_equal", "broadcast_greater",
        "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal",
        "broadcast_logical_and", "broadcast_logical_or", "broadcast_logical_xor",
        "broadcast_hypot", "broadcast_mod", "broadcast_plus")},
    "cmp_scalar_greater": "nd.greater(nd.array(inputs['m']), 0.5)",
    "modulo_scalar": "nd.modulo(nd.array(inputs['m']), 0.7)",
    "nansum": "nd.nansum(nd.array(inputs['nanv'][:2]))",
    "nanprod": "nd.nanprod(nd.array(inputs['nanv'][:2]))",
    "moments_mean": "nd.moments(nd.array(inputs['x']), axes=(1, 2))[0]",
    "moments_var": "nd.moments(nd.array(inputs['x']), axes=(1, 2))[1]",
    "cumsum": "nd.cumsum(nd.array(inputs['m']), axis=1)",
    "smooth_l1": "nd.smooth_l1(nd.array(inputs['m']), scalar=1.5)",
    "hard_sigmoid": "nd.hard_sigmoid(nd.array(inputs['m']))",
    "softmin": "nd.softmin(nd.array(inputs['m']))",
    "isnan": "nd.contrib.isnan(nd.array(inputs['nanv']))",
    "isinf": "nd.contrib.isinf(nd.array(inputs['nanv']))",
    "isfinite": "nd.contrib.isfinite(nd.array(inputs['nanv']))",
    "sum_axis": "nd.sum_axis(nd.array(inputs['x']), axis=1)",
    "max_axis": "nd.max_axis(nd.array(inputs['x']), axis=2)",
    # dtype rules
    "uint8_div": "nd.array(inputs['u8a'], dtype='uint8') / nd.array(inputs['u8b'], dtype='uint8')",
    "uint8_add": "nd.array(inputs['u8a'], dtype='uint8') + nd.array(inputs['u8b'], dtype='uint8')",
    "uint8_div_scalar": "nd.array(inputs['u8a'], dtype='uint8') / 2",
    "int32_div_scalar": "nd.array(inputs['i32'], dtype='int32') / 2",
    "int32_mul_float": "nd.array(inputs['i32'], dtype='int32') * 1.5",
    "f16_sum": "nd.array(np.full(10000, 0.1), dtype='float16').sum()",
    # shapes and slicing
    "reshape_m2": "nd.array(inputs['x']).reshape((-2,))",
    "reshape_m3": "nd.array(inputs['x']).reshape((-3, 4))",
    "reshape_m4": "nd.array(inputs['x']).reshape((2, -4, -1, 3, 4))",
    "reshape_m4_m2": "nd.array(inputs['x']).reshape((-4, 1, 2, -2))",
    "reshape_reverse": "nd.array(inputs['x']).reshape((-1, 0), reverse=True)",
    "reshape_op": "nd.Reshape(nd.array(inputs['x']), shape=(0, -1))",
    "slice": "nd.slice(nd.array(inputs['x']), begin=(0, 1), end=(2, 3))",
    "slice_step": "nd.slice(nd.array(inputs['x']), begin=(None, 2), end=(None, 0), step=(1, -1))",
    "slice_method": "nd.array(inputs['x']).slice(begin=(1,), end=(2,))",
    "slice_axis": "nd.array(inputs['x']).slice_axis(axis=2, begin=1, end=-1)",
    "slice_axis_none": "nd.slice_axis(nd.array(inputs['x']), axis=1, begin=-2, end=None)",
    "slice_like": "nd.array(inputs['x']).slice_like(nd.zeros((1, 2, 3)))",
    "slice_like_axes": "nd.slice_like(nd.array(inputs['x']), nd.zeros((1, 2, 3)), axes=(1,))",
    "reshape_like": "nd.reshape_like(nd.array(inputs['x']), nd.zeros((6, 4)))",
    "flip": "nd.flip(nd.array(inputs['x']), axis=1)",
    "reverse": "nd.reverse(nd.array(inputs['x']), axis=(0, 2))",
    "crop": "nd.crop(nd.array(inputs['x']), begin=(0, 1, 0), end=(1, 3, 2))",
    "Crop": "nd.Crop(nd.array(inputs['img']), offset=(0, 1), h_w=(2, 2))",
    "Crop_like": "nd.Crop(nd.array(inputs['img']), nd.zeros((1, 1, 1, 2)), num_args=2, center_crop=True)",
    "depth_to_space": "nd.depth_to_space(nd.array(inputs['img']), block_size=2)",
    "space_to_depth": "nd.space_to_depth(nd.array(inputs['img'])[:, :, :, :2], block_size=2)",
    "diag_vector": "nd.diag(nd.array(inputs['v']), k=1)",
    "diag_matrix": "nd.diag(nd.array(inputs['m']), k=-1)",
    "pad_constant": "nd.pad(nd.array(inputs['img']), mode='constant', pad_width=(0, 0, 0, 0, 1, 2, 2, 1), constant_value=3)",
    "pad_edge": "nd.pad(nd.array(inputs['img']), mode='edge', pad_width=(0, 0, 0, 0, 1, 1, 2, 2))",
    "pad_reflect": "nd.pad(nd.array(inputs['img']), mode='reflect', pad_width=(0, 0, 0, 0, 1, 1, 1, 1))",
    "transpose_axes_keyword": "nd.array(inputs['x']).transpose(axes=(1, 0, 2))",
    "transpose_nd_keyword": "nd.transpose(nd.array(inputs['x']), axes=(2, 0, 1))",
    "moveaxis": "nd.moveaxis(nd.array(inputs['x']), 0, 2)",
    "concatenate": "nd.concatenate([nd.array(inputs['m']), nd.array(inputs['p'])], axis=1)",
    "split_v2": "nd.split_v2(nd.array(inputs['x']), (1, 3), axis=2)[1]",
    "SliceChannel": "nd.SliceChannel(nd.array(inputs['x']), num_outputs=3, axis=1, squeeze_axis=True)[2]",
    "SwapAxis": "nd.SwapAxis(nd.array(inputs['x']), dim1=0, dim2=2)",
    "broadcast_axes": "nd.broadcast_axes(nd.array(inputs['v']).reshape((1, 4)), axis=0, size=3)",
    "broadcast_like_axes": "nd.broadcast_like(nd.array(inputs['v']).reshape((1, 4)), nd.zeros((5, 6)), lhs_axes=(0,), rhs_axes=(1,))",
    "expand_dims_inplace": "nd.array(inputs['m']).expand_dims(1, inplace=True)",
    "flatten_inplace": "nd.array(inputs['x']).flatten(inplace=True)",
    "squeeze_inplace": "nd.array(inputs['m']).reshape((3, 1, 4)).squeeze(axis=1, inplace=True)",
    "shape_array": "nd.shape_array(nd.array(inputs['x']))",
    "size_array": "nd.size_array(nd.array(inputs['x']))",
    # ordering and selection
    "sort": "nd.sort(nd.array(inputs['m']))",
    "sort_desc_axis0": "nd.sort(nd.array(inputs['m']), axis=0, is_ascend=False)",
    "argsort": "nd.argsort(nd.array(inputs['m']), axis=1)",
    "argsort_none": "nd.argsort(nd.array(inputs['m']), axis=None, is_ascend=False)",
    "topk_indices": "nd.topk(nd.array(inputs['m']), k=2)",
    "topk_value": "nd.topk(nd.array(inputs['m']), k=2, ret_typ='value', axis=0)",
    "topk_mask": "nd.topk(nd.array(inputs['m']), k=2, ret_typ='mask', is_ascend=True)",
    "topk_both_values": "nd.topk(nd.array(inputs['m']), k=3, ret_typ='both')[0]",
    "topk_both_indices": "nd.topk(nd.array(inputs['m']), k=3, ret_typ='both')[1]",
    "argmax_channel": "nd.argmax_channel(nd.array(inputs['m']))",
    "one_hot": "nd.one_hot(nd.array(inputs['i']), depth=5, on_value=2, off_value=-1)",
    "onehot_encode": "nd.onehot_encode(nd.array(inputs['i']), nd.zeros((3, 4)))",
    "pick": "nd.pick(nd.array(inputs['m']), nd.array(inputs['i']), axis=1)",
    "choose_element_0index": "nd.choose_element_0index(nd.array(inputs['m']), nd.array(inputs['i']))",
    "fill_element_0index": "nd.fill_element_0index(nd.array(inputs['m']), nd.array([7, 8, 9]), nd.array(inputs['i']))",
    "batch_take": "nd.batch_take(nd.array(inputs['m']), nd.array(inputs['i'], dtype='int32'))",
    "gather_nd": "nd.gather_nd(nd.array(inputs['m']), nd.array([[0, 2], [1, 3]]))",
    "scatter_nd": "nd.scatter_nd(nd.array([5, 6]), nd.array([[0, 2], [1, 3]]), shape=(3, 4))",
    "ravel_multi_index": "nd.ravel_multi_index(nd.array([[0, 2], [1, 3]]), shape=(3, 4))",
    "unravel_index": "nd.unravel_index(nd.array([1, 11]), shape=(3, 4))",
    "khatri_rao": "nd.khatri_rao(nd.array(inputs['m'][:2, :3]), nd.array(inputs['p'][:, :3]))",
    "add_n": "nd.add_n(nd.array(inputs['m']), nd.array(inputs['p']), nd.array(inputs['m']))",
    "ElementWiseSum": "nd.ElementWiseSum(nd.array(inputs['m']), nd.array(inputs['p']))",
    "SequenceMask": "nd.SequenceMask(nd.array(inputs['seq']), nd.array(inputs['lens']), use_sequence_length=True, value=-1)",
    "SequenceLast": "nd.SequenceLast(nd.array(inputs['seq']), nd.array(inputs['lens']), use_sequence_length=True)",
    "SequenceReverse": "nd.SequenceReverse(nd.array(inputs['seq']), nd.array(inputs['lens']), use_sequence_length=True)",
    "Cast": "nd.Cast(nd.array(inputs['m']), dtype='float16')",
    "L2Normalization": "nd.L2Normalization(nd.array(inputs['img']), mode='channel')",
    "LRN": "nd.LRN(nd.array(inputs['img']), nsize=3)",
    "UpSampling": "nd.UpSampling(nd.array(inputs['img']), scale=2, sample_type='nearest')",
    "SoftmaxActivation": "nd.SoftmaxActivation(nd.array(inputs['m']))",
    "from_numpy": "nd.from_numpy(inputs['m'])",
    "power_int": "nd.power(nd.array(inputs['p']), 3)",
    "true_divide": "nd.true_divide(nd.array(inputs['m']), 4)",
    "im2col": "nd.im2col(nd.array(inputs['img']), kernel=(2, 2), stride=(1, 2), pad=(1, 1))",
    "im2col_dilate": "nd.im2col(nd.array(inputs['img']), kernel=(2, 2), dilate=(2, 1), pad=(1, 0))",
    "col2im": "nd.col2im(nd.im2col(nd.array(inputs['img']), kernel=(2, 2), pad=(1, 1)), output_size=(2, 3), kernel=(2, 2), pad=(1, 1))",
    # densities: params (2,), samples (2, 3)
    "pdf_uniform": "nd.random_pdf_uniform(nd.array(inputs['pos']), nd.array([0.0, 0.5]), nd.array([2.0, 4.0]))",
    "pdf_normal": "nd.random_pdf_normal(nd.array(inputs['pos']), nd.array([2.0, 3.0]), nd.array([1.5, 0.5]))",
    "pdf_normal_log": "nd.random_pdf_normal(nd.array(inputs['pos']), nd.array([2.0, 3.0]), nd.array([1.5, 0.5]), is_log=True)",
    "pdf_gamma": "nd.random_pdf_gamma(nd.array(inputs['pos']), nd.array([2.0, 3.0]), nd.array([1.5, 0.5]))",
    "pdf_exponential": "nd.random_pdf_exponential(nd.array(inputs['pos']), nd.array([2.0, 3.0]))",
    "pdf_poisson": "nd.random_pdf_poisson(nd.array(inputs['counts']), nd.array([2.0, 3.0]))",
    "pdf_negative_binomial": "nd.random_pdf_negative_binomial(nd.array(inputs['counts']), nd.array([2.0, 3.0]), nd.array([0.4, 0.6]))",
    "pdf_gen_negative_binomial": "nd.random_pdf_generalized_negative_binomial(nd.array(inputs['counts']), nd.array([2.0, 3.0]), nd.array([0.4, 0.6]))",
    "pdf_dirichlet": "nd.random_pdf_dirichlet(nd.array([[[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]]), nd.array([[1.0, 2.0, 3.0]]))",
    "pdf_dirichlet_one_draw": "nd.random_pdf_dirichlet(nd.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]), nd.array([[1.0, 2.0, 3.0], [0.5, 1.0, 2.0]]), is_log=True)",
    "argmax_channel_3d": "nd.argmax_channel(nd.array(inputs['x']))",
    "argmax_channel_4d": "nd.argmax_channel(nd.array(inputs['img']))",
    "mod_by_zero": "nd.broadcast_mod(nd.array([1.5, -2.0, 3.0, -4.0]), nd.array([0.0, 1.5, -0.7, 0.0]))",
    "mod_int": "nd.broadcast_mod(nd.array(inputs['i32'], dtype='int32'), nd.array([3, 3, 0], dtype='int32'))",
    "mod_operator": "nd.array(inputs['m']) % nd.array(inputs['v'])",
    "rmod_scalar": "2.5 % nd.array(inputs['p'])",
}

# d(sum of the result)/d(each input), for the forms of mod and comparisons; rhs holds a zero
# (MXNet's -floor(lhs/0) = -inf there) and a divisor that divides exactly
BINARY_GRADIENTS = {
    "broadcast_mod": "nd.broadcast_mod(a, b)",
    "operator": "a % b",
    "scalar": "a % 0.7",
    "rscalar": "2.5 % a",
    # comparisons are recorded as constants: backward through them writes zeros
    "greater": "nd.broadcast_greater(a, b)",
    "operator_le": "a <= b",
}

SNIPPET = f"""
cases = {CASES!r}
for name, expr in cases.items():
    try:
        value = eval(expr)
        outputs[name] = value
        result[name] = str(value.dtype.__name__ if hasattr(value.dtype, '__name__') else value.dtype)
    except Exception as err:
        result[name] = 'error:' + type(err).__name__
result['power_scalars'] = nd.power(0.9, 3)
for name, expr in {BINARY_GRADIENTS!r}.items():
    a, b = nd.array([1.5, -2.0, 3.0, 4.5]), nd.array([0.0, 1.5, -0.7, 1.5])
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        y = eval(expr)
    y.backward()
    outputs['grad_a_' + name] = a.grad.copy()
    outputs['grad_b_' + name] = b.grad.copy()
"""


@pytest.fixture(scope="module")
def oracle():
    return run_mxnet(SNIPPET, INPUTS)


def _engine(expr: str):
    # the expressions are this module's constants, shared verbatim with the MXNet snippet
    return eval(expr, {"nd": nd, "mx": mx, "np": np, "inputs": INPUTS})  # noqa: S307


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_mxnet(oracle, name: str) -> None:
    expected_dtype = oracle.json[name]
    assert not expected_dtype.startswith("error"), f"MXNet failed on {name}: {expected_dtype}"
    got = _engine(CASES[name])
    assert isinstance(got, nd.NDArray)
    assert np.dtype(got.dtype).name == np.dtype(expected_dtype).name, name
    np.testing.assert_allclose(got.asnumpy(), oracle[name], rtol=2e-5, atol=2e-6,
                               err_msg=name)


@pytest.mark.parametrize("name", sorted(BINARY_GRADIENTS))
def test_binary_gradients_match_mxnet(oracle, name: str) -> None:
    a, b = nd.array([1.5, -2.0, 3.0, 4.5]), nd.array([0.0, 1.5, -0.7, 1.5])
    a.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        y = eval(BINARY_GRADIENTS[name], {"nd": nd, "a": a, "b": b})  # noqa: S307 - constants
    y.backward()
    np.testing.assert_allclose(a.grad.asnumpy(), oracle[f"grad_a_{name}"], rtol=1e-6)
    np.testing.assert_allclose(b.grad.asnumpy(), oracle[f"grad_b_{name}"], rtol=1e-6)


def test_power_of_two_scalars_is_a_number(oracle) -> None:
    assert nd.power(0.9, 3) == pytest.approx(oracle.json["power_scalars"])


def test_uniform_density_is_zero_outside_its_support() -> None:
    # MXNet 1.9.1 returns 1/(high - low) for any sample (no support check); not copied
    pdf = nd.random_pdf_uniform(nd.array([[5.0, -1.0, 1.0]]), nd.array([0.0]), nd.array([2.0]))
    np.testing.assert_array_equal(pdf.asnumpy(), [[0.0, 0.0, 0.5]])


def test_densities_are_differentiable() -> None:
    mu = nd.array([0.5])
    mu.attach_grad()
    with mx.autograd.record():
        logp = nd.random_pdf_normal(nd.array([[1.0, 2.0]]), mu, nd.array([1.0]), is_log=True)
    logp.backward()
    np.testing.assert_allclose(mu.grad.asnumpy(), [0.5 + 1.5], rtol=1e-6)  # Σ (x − μ)/σ²


def test_im2col_gradient_is_col2im() -> None:
    x = nd.array(INPUTS["img"])
    x.attach_grad()
    with mx.autograd.record():
        cols = nd.im2col(x, kernel=(2, 2), stride=(1, 2), pad=(1, 1))
    head = nd.array(np.random.default_rng(0).uniform(-1, 1, cols.shape))
    cols.backward(head)
    expected = nd.col2im(head, output_size=(2, 3), kernel=(2, 2), stride=(1, 2), pad=(1, 1))
    np.testing.assert_allclose(x.grad.asnumpy(), expected.asnumpy(), rtol=1e-6)
