"""inspect_symbol_json: the check a user's symbol file passes before the service stores it.
Each bad graph gives a SymbolFormatError (an MXNetError and a ValueError) naming the node."""

import json

import pytest

import engine as mx
from engine.base import MXNetError
from engine.symbol import SymbolFormatError, inspect_symbol_json


def _user_net():
    x = mx.sym.var("data")
    c = mx.sym.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), name="c")
    b = mx.sym.BatchNorm(c, name="bn")
    r = mx.sym.Activation(b + c, act_type="relu", name="relu")
    f = mx.sym.FullyConnected(mx.sym.Reshape(r, shape=(0, -1)), num_hidden=10, name="fc")
    return mx.sym.SoftmaxOutput(f, name="softmax")


def _graph(*nodes, heads=((1, 0, 0),)):
    return json.dumps({"nodes": list(nodes), "heads": [list(h) for h in heads]})


def _var(name):
    return {"op": "null", "name": name, "inputs": []}


def test_a_valid_graph_is_summarised():
    info = inspect_symbol_json(_user_net().tojson(), {"data": (2, 3, 8, 8)})
    assert info["ops"] == ["Activation", "BatchNorm", "Convolution", "FullyConnected",
                           "Reshape", "SoftmaxOutput", "elemwise_add"]
    assert info["arg_shapes"]["c_weight"] == (8, 3, 3, 3)
    assert info["arg_shapes"]["fc_weight"] == (10, 8 * 8 * 8)
    assert info["aux_shapes"] == {"bn_moving_mean": (8,), "bn_moving_var": (8,)}
    assert info["output_shapes"] == [(2, 10)]
    # conv 8*27+8, bn gamma/beta 16, fc 5120+10, bn moving stats 16; data and label excluded
    assert info["parameter_count"] == 224 + 16 + 5130 + 16
    json.dumps(info)  # the service returns it as JSON


@pytest.mark.parametrize("text, shapes, message", [
    ("{not json", {"data": (1,)}, "not valid JSON"),
    ("[1, 2]", {"data": (1,)}, "not a symbol JSON graph"),
    (_graph(_var("data"), {"op": "FancyOp", "name": "fancy0", "inputs": [[0, 0, 0]]}),
     {"data": (1,)}, "node 'fancy0' .*unknown operator 'FancyOp'"),
    (_graph({"op": "relu", "name": "a", "inputs": [[1, 0, 0]]},
            {"op": "relu", "name": "b", "inputs": [[0, 0, 0]]}), {"data": (1,)},
     "cycle in the graph: .*b -> a -> b|cycle in the graph: .*a -> b -> a"),
    (_graph(_var("data"), {"op": "relu", "name": "r", "inputs": [[7, 0, 0]]}),
     {"data": (1,)}, "node 'r' .*node 7, which does not exist"),
    (_graph(_var("data"), {"op": "save", "name": "w", "inputs": [[0, 0, 0]],
                           "attrs": {"fname": "/tmp/owned"}}),
     {"data": (1,)}, "unknown operator 'save'"),
    (_graph(_var("data"), {"op": "Convolution", "name": "conv", "inputs": [[0, 0, 0]],
                           "attrs": {"kernel": "(3, 3)", "num_filter": "4"}}),
     {"data": (1, 3, 8, 8)}, "node 'conv' .*takes 3 inputs"),
    (_user_net().tojson(), {"data": (2, 3, 8)}, "Convolution 'c'"),
    (_user_net().tojson(), {"image": (2, 3, 8, 8)}, "not arguments"),
    (_user_net().tojson(), {"data": (2, 0, 8, 8)}, "positive"),
    (_graph(_var("data"), {"op": "tile", "name": "big", "inputs": [[0, 0, 0]],
                           "attrs": {"reps": "(100000, 100000)"}}),
     {"data": (2, 2)}, r"node 'big' \(tile\)"),
])
def test_bad_graphs_are_refused_with_the_node_named(text, shapes, message):
    with pytest.raises(SymbolFormatError, match=message) as info:
        inspect_symbol_json(text, shapes)
    assert isinstance(info.value, MXNetError) and isinstance(info.value, ValueError)


def _mutations(graph, rng):
    """Copies of ``graph`` with one field replaced by something a hostile file might hold."""
    odd_values = [None, -1, 10 ** 12, "x", [], {}, [[0]], True, 1.5, "(" * 300, "()",
                  "(2**64,)", "[1, [2, [3]]]", "-7", "None", "nan"]
    for _ in range(300):
        mutated = json.loads(json.dumps(graph))
        node = mutated["nodes"][rng.randint(len(mutated["nodes"]))]
        choice = rng.randint(5)
        if choice == 0 and node.get("attrs"):
            key = sorted(node["attrs"])[rng.randint(len(node["attrs"]))]
            node["attrs"][key] = str(odd_values[rng.randint(len(odd_values))])
        elif choice == 1:
            node["inputs"] = [[int(rng.randint(-2, len(mutated["nodes"]) + 2)),
                               int(rng.randint(-1, 3)), 0]]
        elif choice == 2:
            node["op"] = ["relu", "Concat", "FullyConnected", "null", 7, "_copy"][rng.randint(6)]
        elif choice == 3:
            node[["op", "name", "attrs", "inputs"][rng.randint(4)]] = \
                odd_values[rng.randint(len(odd_values))]
        else:
            mutated["heads"] = [[int(rng.randint(-1, len(mutated["nodes"]) + 1)), 0, 0]]
        yield json.dumps(mutated)


def test_no_mutated_graph_escapes_as_anything_but_a_symbol_format_error():
    import numpy as np

    graph = json.loads(_user_net().tojson())
    rng = np.random.RandomState(0)
    for text in _mutations(graph, rng):
        try:
            inspect_symbol_json(text, {"data": (2, 3, 8, 8)})
        except SymbolFormatError:
            pass
    with pytest.raises(SymbolFormatError, match="nested too deeply"):
        inspect_symbol_json("[" * 100_000, {"data": (1,)})


def test_params_are_checked_by_name_and_shape_against_the_graph():
    import numpy as np

    from engine.ndarray.mxnet_format import read_params, write_params
    from engine.symbol import check_params

    info = inspect_symbol_json(_user_net().tojson(), {"data": (2, 3, 8, 8)})
    assert "data" not in info["parameter_names"] and "softmax_label" not in \
        info["parameter_names"]
    good = {f"arg:{n}": np.zeros(info["arg_shapes"][n], np.float32)
            for n in info["parameter_names"] if n in info["arg_shapes"]}
    good.update({f"aux:{n}": np.ones(s, np.float32) for n, s in info["aux_shapes"].items()})
    check_params(info, read_params(write_params(good), max_bytes=1 << 20))
    with pytest.raises(SymbolFormatError, match="no values for .*'fc_bias'"):
        check_params(info, {k: v for k, v in good.items() if k != "arg:fc_bias"})
    check_params(info, {"arg:fc_bias": good["arg:fc_bias"]}, allow_missing=True)
    with pytest.raises(SymbolFormatError, match="'arg:fc_weight' has shape \\(10, 7\\)"):
        check_params(info, {**good, "arg:fc_weight": np.zeros((10, 7))})
    with pytest.raises(SymbolFormatError, match="'arg:fc2_weight' is not one of"):
        check_params(info, {**good, "arg:fc2_weight": np.zeros(1)})
    with pytest.raises(SymbolFormatError, match="'aux:fc_bias' is not one of the graph's aux"):
        check_params(info, {**good, "aux:fc_bias": good["arg:fc_bias"]})
