"""mx.sym's operators beyond the common ones compute what MXNet 1.9.1 computes, gradients
included (that every public name exists is tests/engine/test_mxnet_public_names.py)."""

from __future__ import annotations

import numpy as np
import pytest

import engine as mx
from engine import autograd, nd
from tests.oracle import needs_mxnet, run_mxnet

pytestmark = needs_mxnet


def _inputs():
    rng = np.random.default_rng(11)
    spd = rng.normal(size=(3, 3))
    spd = spd @ spd.T + 3 * np.eye(3)
    batch = rng.normal(size=(2, 3, 3))
    batch = batch @ batch.transpose(0, 2, 1) + 3 * np.eye(3)
    return {
        "x": rng.normal(size=(2, 3, 4)), "u": rng.uniform(-0.9, 0.9, size=(2, 3, 4)),
        "pos": rng.uniform(0.5, 3.0, size=(2, 3, 4)), "img": rng.normal(size=(1, 8, 2, 2)),
        "seq": rng.normal(size=(4, 3, 2)), "lens": np.array([1, 4, 2]),
        "m": rng.normal(size=(3, 4)), "k": rng.normal(size=(2, 4)),
        "idx_i": np.array([2, 0, 1]), "vals": np.array([5.0, 6.0, 7.0]),
        "nd_idx": np.array([[0, 1, 1], [2, 0, 2]]), "spd": spd, "spds": batch,
        "tri": np.linalg.cholesky(spd), "v6": rng.normal(size=(2, 6)),
        "flat": np.array([[1, 2], [2, 3]]), "lin": np.array([5, 11, 3]),
        "mu": np.array([0.5, -1.0]), "sigma": np.array([1.5, 0.7]),
        "samp": rng.uniform(0.1, 2.0, size=(2, 3)), "cnt": np.array([[0, 1, 3], [2, 5, 1]]),
        "prob": np.array([0.3, 0.6]), "dir": np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]),
        "alpha": np.array([[1.5, 2.0, 0.5], [1.0, 3.0, 2.0]]),
    }


# (case, MXNet expression with sym = mx.sym and variables named after _inputs(), whether
# to compare gradients). The engine runs the same expression with sym = engine.symbol.
_CASES = [
    ("arcs", "sym.arcsin(u) + sym.arccos(u) * 2 + sym.arctan(x) + sym.arctanh(u)", True),
    ("hyper", "sym.sinh(x) + sym.cosh(x) + sym.arcsinh(x) + sym.arccosh(pos + 1) + sym.tan(u)",
     True),
    ("logs", "sym.log2(pos) + sym.log10(pos) + sym.cbrt(pos) + sym.rcbrt(pos)", True),
    ("angles", "sym.degrees(x) + sym.radians(x)", True),
    ("erf", "sym.erf(x) + sym.erfinv(u)", True),
    ("gamma", "sym.gamma(pos) + sym.gammaln(pos)", True),
    ("rounding", "sym.fix(x * 3) + sym.trunc(x * 3) + sym.rint(x * 3) + sym.logical_not(x > 0)",
     False),
    ("hard_sigmoid", "sym.hard_sigmoid(x, alpha=0.3, beta=0.4)", True),
    ("softmin", "sym.softmin(x, axis=1)", True),
    ("compare", "sym.broadcast_equal(x, x) + sym.broadcast_greater(x, u) * 2"
     " + sym.broadcast_lesser_equal(x, u) * 3 + sym.broadcast_logical_xor(x > 0, u > 0)",
     False),
    ("hypot_mod", "sym.broadcast_hypot(x, u) + sym.broadcast_mod(pos * 3.5, pos)", True),
    ("python_binaries", "sym.maximum(x, u) + sym.minimum(x, 0.5) + sym.power(pos, u)"
     " + sym.hypot(x, 2.0) + sym.hypot(x, u) + sym.maximum(0.1, x) + sym.pow(2.0, u)", True),
    ("mods", "x % u + x % 0.7 + 2.5 % pos + sym.broadcast_mod(x, u)", False),
    ("mods_grad", "x % u + x % 0.7", True),
    ("nan", "sym.nansum(x, axis=1) + sym.nanprod(pos, axis=1)", True),
    ("moments", "sym.moments(x, axes=(0, 2))", False),
    ("argmax_channel", "sym.argmax_channel(x)", False),
    ("add_n", "sym.add_n(x, u, pos) + sym.ElementWiseSum(x, x)", True),
    ("smooth_l1", "sym.smooth_l1(x * 2, scalar=1.5)", True),
    ("l2norm", "sym.L2Normalization(img, mode='channel') + sym.L2Normalization(img)", True),
    ("softmax_act", "sym.SoftmaxActivation(img, mode='channel')", True),
    ("slice", "sym.slice(x, begin=(0, 1, None), end=(None, 3, 4), step=(1, 1, 2))", True),
    ("slice_axis", "sym.slice_axis(x, axis=2, begin=1, end=-1) + sym.crop(x, begin=(0, 0, 1),"
     " end=(2, 3, 3))", True),
    ("slice_like", "sym.slice_like(x, sym.ones((2, 2)), axes=(1,)) + 1", True),
    ("reshape_like", "sym.reshape_like(x, sym.reshape(x, (4, 6)))", True),
    ("reshape_codes", "sym.reshape(x, shape=(-4, 1, 2, -2)) + 1", True),
    ("reshape_merge", "sym.reshape(x, shape=(-3, -1)) * 2", True),
    ("reshape_keep", "sym.reshape(x, shape=(0, -1)) - 1", True),
    ("reshape_reverse", "sym.Reshape(x, shape=(-1, 0), reverse=True) * 3", True),
    ("reshape_split_last", "sym.reshape(x, shape=(0, 0, -4, -1, 2))", True),
    ("flip", "sym.flip(x, axis=1) + sym.reverse(x, axis=(0, 2))", True),
    ("broadcast_axis", "sym.broadcast_axis(sym.sum(x, axis=1, keepdims=True), axis=1, size=5)",
     True),
    ("cast", "sym.Cast(x, dtype='float16')", False),
    ("shape_array", "sym.shape_array(x)", False),
    ("size_array", "sym.size_array(x)", False),
    ("diag", "sym.diag(m, k=1)", True),
    ("diag_make", "sym.diag(sym.sum(m, axis=0))", True),
    ("depth_space", "sym.depth_to_space(img, block_size=2) * 2 + 1", True),
    ("space_depth", "sym.space_to_depth(sym.depth_to_space(img, block_size=2), block_size=2)",
     True),
    ("pad_const", "sym.Pad(img, mode='constant', pad_width=(0, 0, 0, 0, 1, 2, 2, 1),"
     " constant_value=0.5)", True),
    ("pad_edge", "sym.pad(img, mode='edge', pad_width=(0, 0, 0, 0, 1, 1, 2, 0))", True),
    ("pad_reflect", "sym.pad(img, mode='reflect', pad_width=(0, 0, 0, 0, 1, 1, 1, 1))", True),
    ("seq_mask", "sym.SequenceMask(seq, lens, use_sequence_length=True, value=-1)", True),
    ("seq_last", "sym.SequenceLast(seq, lens, use_sequence_length=True)", True),
    ("seq_reverse", "sym.SequenceReverse(seq, lens, use_sequence_length=True)", True),
    ("sort", "sym.sort(x, axis=1, is_ascend=False)", True),
    ("argsort", "sym.argsort(x, axis=-1)", False),
    ("topk", "sym.topk(x, axis=1, k=2, ret_typ='both')", False),
    ("topk_value", "sym.topk(x, axis=2, k=3, ret_typ='value', is_ascend=True)", True),
    ("cumsum", "sym.cumsum(x, axis=1)", True),
    ("khatri_rao", "sym.khatri_rao(m, sym.slice_axis(k, axis=0, begin=0, end=2))", False),
    ("upsampling", "sym.UpSampling(img, scale=2, sample_type='nearest')", True),
    ("batch_take", "sym.batch_take(sym.reshape(x, (3, 8)), idx_i)", False),
    ("gather_nd", "sym.gather_nd(x, nd_idx)", True),
    ("scatter_nd", "sym.scatter_nd(vals, nd_idx, shape=(2, 3))", True),
    ("ravel", "sym.ravel_multi_index(flat, shape=(3, 4))", False),
    ("unravel", "sym.unravel_index(lin, shape=(3, 4))", False),
    ("split_v2", "sym.split_v2(x, indices_or_sections=(1, 3), axis=2)", False),
    ("lrn", "sym.LRN(img, nsize=3, alpha=0.01, beta=0.5, knorm=1.5)", True),
    ("crop_legacy", "sym.Crop(img, offset=(0, 1), h_w=(2, 1))", True),
    ("crop_center", "sym.Crop(img, sym.slice_axis(img, axis=2, begin=0, end=1),"
     " center_crop=True)", True),
    ("gemm", "sym.linalg_gemm(m, k, sym.ones((3, 2)), transpose_b=True, alpha=2.0, beta=0.5)",
     True),
    ("gemm2", "sym.linalg.gemm2(k, m, transpose_a=False, transpose_b=True)", True),
    ("trmm", "sym.linalg_trmm(tri, m, lower=True, alpha=1.5)", True),
    ("trsm", "sym.linalg_trsm(tri, m, transpose=True, alpha=2.0)", True),
    ("syrk", "sym.linalg_syrk(m, transpose=True, alpha=0.5)", True),
    ("potrf", "sym.linalg_potrf(spd)", False),
    ("potri", "sym.linalg_potri(tri)", True),
    ("gelqf", "sym.linalg_gelqf(m)", False),
    ("det", "sym.linalg_det(spds) + sym.linalg_sumlogdiag(spds)", True),
    ("slogdet", "sym.linalg_slogdet(spd)", False),
    ("inverse", "sym.linalg_inverse(spds)", True),
    ("tri_diag", "sym.linalg_extractdiag(spd, offset=1)", True),
    ("makediag", "sym.linalg_makediag(k, offset=-1)", True),
    ("extracttrian", "sym.linalg_extracttrian(spds, offset=0, lower=False)", True),
    ("maketrian", "sym.linalg_maketrian(v6, lower=True)", True),
    ("pdf_normal", "sym.random_pdf_normal(samp, mu, sigma)", True),
    ("pdf_gamma", "sym.random_pdf_gamma(samp, mu + 2, sigma, is_log=True)", True),
    ("pdf_exponential", "sym.random_pdf_exponential(samp, sigma)", True),
    ("pdf_uniform", "sym.random_pdf_uniform(samp, mu - 1, sigma + 1)", False),
    ("pdf_poisson", "sym.random_pdf_poisson(cnt, sigma)", False),
    ("pdf_negbin", "sym.random_pdf_negative_binomial(cnt, sigma + 1, prob)", False),
    ("pdf_gnegbin", "sym.random_pdf_generalized_negative_binomial(cnt, sigma, prob)", False),
    ("pdf_dirichlet", "sym.random_pdf_dirichlet(dir, alpha)", False),
]

_MXNET_RUNNER = """
result['errors'] = {}
for case, expr, grad in cases:
  try:
    g = expr_of(mx.sym, expr)
    args = {n: nd.array(inputs[n], dtype='int32' if n.endswith('_i') else 'float32')
            for n in g.list_arguments()}
    grads = {n: nd.zeros(a.shape, dtype=a.dtype) for n, a in args.items()}
    ex = g.bind(mx.cpu(), args, args_grad=grads if grad else None,
                grad_req='write' if grad else 'null')
    outs = ex.forward(is_train=grad)
    for i, o in enumerate(outs):
        outputs['%s_out%d' % (case, i)] = o.asnumpy()
    if grad:
        ex.backward([nd.ones(o.shape, dtype=o.dtype) for o in outs])
        for n, a in grads.items():
            outputs['%s_d%s' % (case, n)] = a.asnumpy()
    nd.waitall()
  except Exception as exc:
    result['errors'][case] = '%s: %s' % (type(exc).__name__, str(exc)[:300])
"""


def _expr_of(sym, expr):
    """Build a case's graph from its expression: a small interpreter of calls on ``sym``,
    variables, literals, + - * and comparisons (nothing is handed to eval)."""
    import ast
    import operator

    variables = {}
    binary = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Mod: operator.mod, ast.Pow: operator.pow,
              ast.Gt: operator.gt, ast.Lt: operator.lt}

    def build(node):
        if isinstance(node, ast.Call):
            args = [build(a) for a in node.args]
            return build(node.func)(*args, **{k.arg: build(k.value) for k in node.keywords})
        if isinstance(node, ast.Attribute):
            return getattr(build(node.value), node.attr)
        if isinstance(node, ast.Name):
            if node.id == "sym":
                return sym
            return variables.setdefault(node.id, sym.var(node.id))
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Tuple):
            return tuple(build(e) for e in node.elts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -build(node.operand)
        if isinstance(node, ast.BinOp):
            return binary[type(node.op)](build(node.left), build(node.right))
        if isinstance(node, ast.Compare):
            return binary[type(node.ops[0])](build(node.left), build(node.comparators[0]))
        raise ValueError(f"unsupported expression {ast.dump(node)}")

    return build(ast.parse(expr, mode="eval").body)


def test_extra_operators_match_mxnet_outputs_and_gradients():
    import inspect

    inputs = _inputs()
    code = (inspect.getsource(_expr_of).replace("def _expr_of", "def expr_of")
            + f"cases = {_CASES!r}\n" + _MXNET_RUNNER)
    expected = run_mxnet(code, inputs)
    errors = expected.json["errors"]
    assert errors == {}, "\n".join(f"{k}: {v[-300:]}" for k, v in errors.items())
    failures = []
    for case, expr, grad in _CASES:
        graph = _expr_of(mx.sym, expr)
        args = {n: nd.array(inputs[n], dtype="int32" if n.endswith("_i") else "float32")
                for n in graph.list_arguments()}
        if grad:
            for arr in args.values():
                arr.attach_grad()
        with autograd.record(train_mode=grad):
            outs = graph.eval(**args)
        try:
            for i, out in enumerate(outs):
                np.testing.assert_allclose(out.asnumpy(), expected[f"{case}_out{i}"],
                                           rtol=2e-4, atol=2e-5)
                assert out.dtype == expected[f"{case}_out{i}"].dtype
            if grad:
                autograd.backward(outs, [nd.ones(o.shape, dtype=o.dtype) for o in outs])
                for n, arr in args.items():
                    np.testing.assert_allclose(arr.grad.asnumpy(), expected[f"{case}_d{n}"],
                                               rtol=2e-3, atol=2e-4, err_msg=f"d{n}")
        except (AssertionError, KeyError) as exc:
            failures.append(f"{case}: {exc}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("op", ["random_uniform", "random_normal"])
def test_random_operators_draw_the_requested_shape_and_dtype(op):
    graph = getattr(mx.sym, op)(shape=(3, 4), dtype="float16")
    assert graph.infer_shape()[1] == [(3, 4)]
    (out,) = graph.eval()
    assert out.shape == (3, 4) and out.dtype == np.float16
    mx.random.seed(5)
    first = graph.eval()[0].asnumpy()
    mx.random.seed(5)
    graph.infer_shape()  # inference must not consume the generator
    np.testing.assert_array_equal(graph.eval()[0].asnumpy(), first)


def test_shape_inference_never_warns_on_operators_undefined_at_zero():
    # inference runs operators on zeros; log(0) or a zero-scale density must not leak
    # warnings (pytest turns them into errors, and users would see them)
    s, m, sg = mx.sym.var("s"), mx.sym.var("m"), mx.sym.var("sg")
    graph = mx.sym.Group([mx.sym.random_pdf_normal(s, m, sg), mx.sym.sum(mx.sym.log(s), axis=1),
                          mx.sym.gammaln(s), mx.sym.rcbrt(s)])
    assert graph.infer_shape(s=(2, 3), m=(2,), sg=(2,))[1] == [(2, 3), (2,), (2, 3), (2, 3)]
