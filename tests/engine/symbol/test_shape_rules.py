"""Every shape rule (engine.symbol.shapes) against its operator: the rule's shapes are
the shapes the NDArray function returns on small arrays, for each case below, and a case
the operator refuses is refused by the rule too. A generic operator without a rule is
listed in NO_RULE, so a new operator cannot slip in without one."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import engine as mx
from engine.symbol.generic import GenericSpec, generic_spec, nd_function
from engine.symbol.ops import OPS
from engine.symbol.shapes import RULES, rule_for
from engine.symbol.shapes.elementwise import BINARY, UNARY

X = (2, 3, 4)
# op -> cases of (input shapes, attributes); unary and binary operators get defaults
CASES: dict[str, list[tuple[list[tuple[int, ...]], dict[str, Any]]]] = {
    "clip": [([X], {"a_min": 0, "a_max": 1})],
    "hard_sigmoid": [([X], {"alpha": 0.1})], "smooth_l1": [([X], {"scalar": 2.0})],
    "full_like": [([X], {"fill_value": 3})],
    "Cast": [([X], {"dtype": "float16"})], "cast": [([X], {"dtype": "int32"})],
    "amp_cast": [([X], {"dtype": "float16"})],
    "SoftmaxActivation": [([(2, 3, 4, 5)], {"mode": "channel"})],
    "L2Normalization": [([X], {"mode": "instance"})], "LRN": [([(2, 3, 4, 5)], {"nsize": 3})],
    "MakeLoss": [([X], {"normalization": "batch"})],
    "softmax": [([X], {"axis": 1})], "log_softmax": [([X], {})],
    "softmin": [([X], {"axis": -1, "temperature": 2.0})],
    "sort": [([X], {}), ([X], {"axis": None}), ([X], {"axis": 0, "is_ascend": False})],
    "argsort": [([X], {"axis": 1})], "cumsum": [([X], {}), ([X], {"axis": 2})],
    "add_n": [([X, X, X], {})], "ElementWiseSum": [([X, X], {})],
    "sum": [([X], {}), ([X], {"axis": 1}), ([X], {"axis": (0, 2), "keepdims": True}),
            ([X], {"axis": 1, "exclude": True}), ([X], {"axis": ()}), ([(5,)], {"axis": 0})],
    "mean": [([X], {"axis": -1})], "max": [([X], {"axis": (0, 1)})],
    "min": [([X], {"keepdims": True})], "prod": [([X], {"axis": 2})],
    "nansum": [([X], {"axis": (1,), "exclude": True})], "nanprod": [([X], {})],
    "sum_axis": [([X], {"axis": 0})], "max_axis": [([X], {"axis": 1})],
    "min_axis": [([X], {"axis": 2, "keepdims": True})],
    "reduce_sum": [([X], {"axis": 1})], "reduce_mean": [([X], {})],
    "reduce_max": [([X], {"axis": -2})], "reduce_min": [([X], {"axis": (0, 2)})],
    "norm": [([X], {}), ([X], {"axis": 1, "ord": 1}), ([X], {"axis": (1, 2),
                                                              "keepdims": True})],
    "argmax": [([X], {}), ([X], {"axis": 1}), ([X], {"axis": 2, "keepdims": True})],
    "argmin": [([X], {"axis": 0})], "argmax_channel": [([X], {})],
    "moments": [([X], {"axes": (1,)}), ([X], {"axes": (0, 2), "keepdims": True})],
    "topk": [([X], {"k": 2}), ([X], {"k": 2, "ret_typ": "mask"}),
             ([X], {"k": 3, "axis": None}), ([X], {"k": 0, "axis": 1}),
             ([X], {"k": 9}), ([X], {"k": 2, "ret_typ": "both", "axis": 0})],
    "reshape": [([X], {"shape": (0, -1)}), ([X], {"shape": (-3, 4)}),
                ([X], {"shape": (-4, 1, 2, -2)}), ([X], {"shape": (-1, 6), "reverse": True})],
    "flatten": [([X], {})],
    "expand_dims": [([X], {"axis": 0}), ([X], {"axis": -1})],
    "squeeze": [([(2, 1, 3)], {}), ([(1, 1)], {}), ([(2, 1, 1)], {"axis": (1, 2)})],
    "transpose": [([X], {}), ([X], {"axes": (1, 0, 2)})],
    "swapaxes": [([X], {"dim1": 0, "dim2": 2})], "SwapAxis": [([X], {"dim1": 1, "dim2": 2})],
    "moveaxis": [([X], {"source": 0, "destination": 2}),
                 ([X], {"source": (0, 1), "destination": (2, 0)})],
    "flip": [([X], {"axis": 1})], "reverse": [([X], {"axis": (0, 2)})],
    "tile": [([X], {"reps": (2,)}), ([X], {"reps": (2, 1, 1, 3)})],
    "repeat": [([X], {"repeats": 2}), ([X], {"repeats": 3, "axis": 1})],
    "broadcast_to": [([(1, 3)], {"shape": (4, 3)}), ([(1, 3)], {"shape": (4, 0)}),
                     ([(3,)], {"shape": (2, 3)})],
    "broadcast_axis": [([(1, 3, 1)], {"axis": (0, 2), "size": (2, 5)})],
    "broadcast_axes": [([(1, 3)], {"axis": 0, "size": 4})],
    "broadcast_like": [([(1, 3), (4, 3)], {}),
                       ([(1, 3), (3, 4)], {"lhs_axes": (0,), "rhs_axes": (1,)})],
    "reshape_like": [([(6,), (2, 3)], {}),
                     ([(2, 6), (2, 3, 5)], {"lhs_begin": 1, "lhs_end": 2, "rhs_begin": 0,
                                            "rhs_end": 2})],
    "slice": [([X], {"begin": (0, 1), "end": (2, None)}),
              ([X], {"begin": (None,), "end": (None,), "step": (-1,)}),
              ([X], {"begin": (1, 0, 1), "end": (2, 3, 4), "step": (1, 2, 2)})],
    "crop": [([X], {"begin": (0, 1), "end": (2, 3)})],
    "slice_axis": [([X], {"axis": 1, "begin": 1, "end": None}),
                   ([X], {"axis": -1, "begin": -3, "end": -1})],
    "slice_like": [([X, (1, 2, 3)], {}), ([X, (2, 2, 2)], {"axes": (1,)})],
    "concat": [([X, X], {"dim": 2}), ([X, (2, 5, 4)], {})],
    "stack": [([X, X], {"axis": 1}), ([X, X, X], {})],
    "split": [([X], {"num_outputs": 3}), ([X], {"num_outputs": 3, "squeeze_axis": True})],
    "SliceChannel": [([X], {"num_outputs": 2, "axis": 2})],
    "split_v2": [([X], {"indices_or_sections": (1, 3), "axis": 2}),
                 ([X], {"indices_or_sections": 2, "axis": 2})],
    "depth_to_space": [([(1, 8, 2, 3)], {"block_size": 2})],
    "space_to_depth": [([(1, 2, 4, 6)], {"block_size": 2})],
    "shape_array": [([X], {})], "size_array": [([X], {})],
    "take": [([X, (5, 6)], {}), ([X, (5,)], {"axis": 2})],
    "pick": [([X, (2, 4)], {"axis": 1}), ([X, (2, 1, 4)], {"axis": 1, "keepdims": True})],
    "one_hot": [([(2, 3)], {"depth": 5})],
    "where": [([X, X, X], {})],
    "gather_nd": [([X, (2, 5)], {}), ([X, (3, 2, 2)], {})],
    "scatter_nd": [([(5,), (2, 5)], {"shape": (3, 4)})],
    "batch_take": [([(4, 3), (4,)], {})],
    "diag": [([(3,)], {}), ([(3,)], {"k": 2}), ([(3, 5)], {"k": 1}), ([(3, 5)], {"k": -1}),
             ([X], {"k": 1, "axis1": 1, "axis2": 2})],
    "SequenceLast": [([X], {}), ([X], {"axis": 1}),
                     ([X, (3,)], {"use_sequence_length": True})],
    "sequence_last": [([X], {})], "SequenceMask": [([X], {"value": 1.0})],
    "sequence_mask": [([X], {"axis": 1})], "SequenceReverse": [([X], {})],
    "sequence_reverse": [([X, (3,)], {"use_sequence_length": True})],
    "ravel_multi_index": [([(2, 5)], {"shape": (3, 4)})],
    "unravel_index": [([(5,)], {"shape": (3, 4)})],
    "softmax_cross_entropy": [([(2, 3), (2,)], {})],
    "pad": [([(1, 2, 3, 4)], {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 2, 3, 4)})],
    "Pad": [([(1, 2, 3, 4, 5)], {"mode": "edge",
                                 "pad_width": (0, 0, 0, 0, 1, 1, 0, 2, 2, 0)}),
            ([(1, 2, 3, 4)], {"mode": "reflect", "pad_width": (0, 0, 0, 0, 2, 2, 1, 3)})],
    "UpSampling": [([(1, 2, 3, 4)], {"scale": 2, "sample_type": "nearest"}),
                   ([(1, 2, 3, 4), (1, 3, 3, 4)], {"scale": 3, "sample_type": "nearest",
                                                   "num_args": 2})],
    "Crop": [([(1, 2, 8, 9)], {"h_w": (4, 5)}),
             ([(1, 2, 8, 9), (1, 3, 4, 5)], {"num_args": 2, "center_crop": True})],
    "GridGenerator": [([(2, 6)], {"transform_type": "affine", "target_shape": (5, 7)}),
                      ([(2, 2, 5, 7)], {"transform_type": "warp"})],
    "BilinearSampler": [([(2, 3, 8, 9), (2, 2, 5, 7)], {})],
    "SpatialTransformer": [([(2, 3, 8, 9), (2, 6)], {"target_shape": (5, 7)})],
    "im2col": [([(2, 3, 8, 9)], {"kernel": (3, 3)}),
               ([(2, 3, 8, 9)], {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1),
                                 "dilate": (2, 1)})],
    "col2im": [([(2, 27, 42)], {"output_size": (8, 9), "kernel": (3, 3)})],
    "zeros": [([], {"shape": (2, 3)}), ([], {"shape": 4})], "ones": [([], {"shape": (3,)})],
    "full": [([], {"shape": (2, 2), "val": 7})],
    "arange": [([], {"start": 5}), ([], {"start": 2, "stop": 10, "step": 3}),
               ([], {"start": 2, "stop": 10, "step": 3, "repeat": 2}),
               ([], {"start": 10, "stop": 2, "step": -3}),
               ([], {"start": 0.5, "stop": 2.6, "step": 0.5}), ([], {"start": 3, "stop": 1})],
    "eye": [([], {"N": 3}), ([], {"N": 3, "M": 5, "k": 1})],
    "linspace": [([], {"start": 0, "stop": 1, "num": 7}),
                 ([], {"start": 0, "stop": 1, "num": 4, "endpoint": False})],
    "random_randint": [([], {"low": 0, "high": 5, "shape": (2, 3)})],
    "dot": [([(2, 3), (3, 4)], {}), ([(2, 3, 4), (4, 5, 6)], {}),
            ([(3, 2), (3, 4)], {"transpose_a": True}),
            ([(4, 3, 2), (4, 5)], {"transpose_a": True}),
            ([(2, 3), (4, 3)], {"transpose_b": True})],
    "batch_dot": [([(2, 3, 4), (2, 4, 5)], {}),
                  ([(2, 4, 3), (2, 5, 4)], {"transpose_a": True, "transpose_b": True})],
    "khatri_rao": [([(2, 3), (4, 3)], {}), ([(2, 3)], {}), ([(2, 3), (4, 3), (5, 3)], {})],
    "linalg_gemm2": [([(2, 3, 4), (2, 4, 5)], {}),
                     ([(4, 3), (5, 4)], {"transpose_a": True, "transpose_b": True})],
    "linalg_gemm": [([(3, 4), (4, 5), (3, 5)], {})],
    "linalg_potrf": [([(2, 3, 3)], {})], "linalg_potri": [([(3, 3)], {})],
    "linalg_inverse": [([(2, 3, 3)], {})], "linalg_det": [([(2, 3, 3)], {}), ([(3, 3)], {})],
    "linalg_sumlogdiag": [([(2, 3, 3)], {})],
    "linalg_trmm": [([(3, 3), (3, 4)], {}), ([(4, 4), (3, 4)], {"rightside": True})],
    "linalg_trsm": [([(2, 3, 3), (2, 3, 4)], {"lower": False})],
    "linalg_syrk": [([(3, 4)], {}), ([(3, 4)], {"transpose": True})],
    "linalg_extractdiag": [([(2, 3, 4)], {}), ([(2, 3, 4)], {"offset": 1}),
                           ([(3, 3)], {"offset": -1})],
    "linalg_makediag": [([(2, 3)], {}), ([(2, 3)], {"offset": -1})],
}
for _name in UNARY + ("BlockGrad",):
    CASES.setdefault(_name, [([X], {})])
for _name in BINARY:
    CASES.setdefault(_name, [([X, (1, 3, 1)], {}), ([X], {"rhs": 2.0})])
for _names in (("uniform", "random_uniform", "sample_uniform"),
               ("normal", "random_normal", "sample_normal"),
               ("random_exponential", "sample_exponential"), ("random_gamma", "sample_gamma"),
               ("random_poisson", "sample_poisson"),
               ("random_negative_binomial", "sample_negative_binomial"),
               ("random_generalized_negative_binomial",
                "sample_generalized_negative_binomial")):
    for _name in _names:
        CASES.setdefault(_name, [([], {"shape": (2, 3)}), ([], {})])
CASES["sample_uniform"].append(([(2,), (2,)], {"shape": (3,)}))
CASES["sample_normal"].append(([(2, 2), (2, 2)], {}))

# Generic operators with no shape rule: a user's graph may not use them (they are
# inferred only by running them, in a trusted process).
NO_RULE = {
    "Correlation", "ROIPooling", "IdentityAttachKLSparseReg", "Softmax", "histogram",
    "amp_multicast", "sample_multinomial", "linalg_gelqf", "linalg_slogdet",
    "linalg_extracttrian", "linalg_maketrian", "concatenate",
    "random_pdf_dirichlet", "random_pdf_exponential", "random_pdf_gamma",
    "random_pdf_generalized_negative_binomial", "random_pdf_negative_binomial",
    "random_pdf_normal", "random_pdf_poisson", "random_pdf_uniform",
}


def _values(op: str, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    if op.startswith("linalg_") and len(shape) >= 2 and shape[-1] == shape[-2]:
        return np.broadcast_to(np.eye(shape[-1]) * 2, shape).astype(np.float32)
    if op in ("take", "pick", "batch_take", "gather_nd", "scatter_nd", "one_hot",
              "ravel_multi_index", "unravel_index", "softmax_cross_entropy",
              "SequenceLast", "sequence_last", "sequence_reverse"):
        return np.ones(shape, np.float32)  # valid indices and lengths
    if op.startswith("sample_"):
        return np.full(shape, 0.5, np.float32)
    return rng.uniform(0.1, 0.9, size=shape).astype(np.float32)


def _run(op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any]) -> list[tuple]:
    spec = generic_spec(op)
    assert isinstance(spec, GenericSpec)
    rng = np.random.default_rng(0)
    inputs = [mx.nd.array(_values(op, s, rng)) for s in shapes]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        result = spec.fn(*inputs, **attrs)
    return [tuple(r.shape) for r in result] if isinstance(result, (list, tuple)) \
        else [tuple(result.shape)]


def _inferred(op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any]) -> list[tuple]:
    rule = rule_for(op)
    assert rule is not None
    rule.check_inputs(len(shapes))
    out = rule.infer(rule.validate(dict(attrs)), list(shapes))
    return [tuple(s) for s in out] if isinstance(out, list) else [tuple(out)]


ALL_CASES = [(op, shapes, attrs) for op, cases in sorted(CASES.items())
             for shapes, attrs in cases]


@pytest.mark.parametrize(("op", "shapes", "attrs"), ALL_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ALL_CASES)])
def test_a_rule_gives_the_shapes_its_operator_returns(op, shapes, attrs):
    assert _inferred(op, shapes, attrs) == _run(op, shapes, attrs)


REFUSED = [
    ("reshape", [(2, 64)], {"shape": (-1, 1, 7, 7)}),
    ("broadcast_plus", [(2, 3), (4, 3)], {}),
    ("sum", [X], {"axis": (1, 1)}),
    ("dot", [(2, 3), (4, 5)], {}),
    ("batch_dot", [(2, 3, 4), (3, 4, 5)], {}),
    ("khatri_rao", [(2, 3), (4, 5)], {}),
    ("Pad", [(1, 2, 3, 4)], {"mode": "constant", "pad_width": (1, 0, 0, 0, 1, 1, 1, 1)}),
    ("split", [X], {"num_outputs": 2, "axis": 1}),
    ("concat", [X, (2, 3, 5)], {"dim": 1}),
    ("transpose", [X], {"axes": (0, 0, 1)}),
    ("GridGenerator", [(2, 5)], {"transform_type": "affine", "target_shape": (4, 4)}),
    ("depth_to_space", [(1, 3, 2, 2)], {"block_size": 2}),
]


@pytest.mark.parametrize(("op", "shapes", "attrs"), REFUSED, ids=[c[0] for c in REFUSED])
def test_what_the_operator_refuses_the_rule_refuses(op, shapes, attrs):
    with pytest.raises(Exception):  # noqa: B017 - each operator raises its own kind
        _run(op, shapes, attrs)
    with pytest.raises(ValueError):
        _inferred(op, shapes, attrs)


def _generic_operators() -> set[str]:
    explicit = {name for name, spec in OPS.items() if not isinstance(spec, GenericSpec)}
    return {name for name in dir(mx.nd) if nd_function(name) is not None} - explicit


def test_every_generic_operator_has_a_rule_with_cases_or_is_listed_without_one():
    generic = _generic_operators()
    without = {name for name in generic if rule_for(name) is None}
    assert without == NO_RULE
    assert set(RULES) <= generic | set(CASES)
    assert not {name for name in RULES if name not in CASES}


@pytest.mark.parametrize(("op", "attrs", "words"), [
    ("Pad", {"mode": "wrap", "pad_width": "(0, 0, 0, 0, 1, 1, 1, 1)"}, "mode"),
    ("arange", {"start": "0", "stop": "inf"}, "stop"),
    ("one_hot", {"depth": "-3"}, "depth"),
    ("UpSampling", {"scale": "2", "sample_type": "bilinear"}, "sample_type"),
    ("Cast", {"dtype": "__import__('os')"}, "dtype"),
])
def test_an_attribute_outside_its_domain_is_refused_when_the_node_is_made(op, attrs, words):
    spec = generic_spec(op)
    assert spec is not None
    with pytest.raises(ValueError, match=words):
        spec.parse(attrs)
