"""The symbol JSON the engine writes is MXNet 1.9.1's, node for node, and each side loads the
other's file."""

import json

import engine as mx
from tests.oracle import needs_mxnet, run_mxnet

SOURCE = '''
data = mx.sym.var("data")
c = mx.sym.Convolution(data, kernel=(3, 3), num_filter=8, pad=(1, 1), name="c")
b = mx.sym.BatchNorm(c, fix_gamma=False, name="bn")
a = mx.sym.Activation(b + c, act_type="relu", name="relu")
p = mx.sym.Pooling(a, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
r = mx.sym.Reshape(p, shape=(0, -1), name="rs")
d = mx.sym.Dropout(r, p=0.2, name="drop")
f = mx.sym.FullyConnected(d, num_hidden=10, name="fc")
out = mx.sym.SoftmaxOutput(mx.sym.clip(f * 0.5, -3, 3), name="softmax")
'''


@needs_mxnet
def test_the_engines_symbol_json_is_mxnets():
    space = {"mx": mx}
    with mx.name.NameManager():  # fresh operator counters (_plus0), as in a new process
        exec(SOURCE, space)  # noqa: S102 - the test's own source
    ours = json.loads(space["out"].tojson())
    run = run_mxnet(SOURCE + '''
result["json"] = out.tojson()
loaded = mx.sym.load_json(OURS)
result["args"] = loaded.list_arguments()
result["shape"] = loaded.infer_shape(data=(2, 3, 8, 8))[1][0]
'''.replace("OURS", repr(json.dumps(ours))))
    theirs = json.loads(run.json["json"])
    assert ours["nodes"] == theirs["nodes"]  # ops, names, string attributes, inputs
    for key in ("arg_nodes", "heads", "attrs"):
        assert ours[key] == theirs[key], key
    # node_row_ptr counts each node's outputs, hidden ones included; MXNet's count for max
    # Pooling depends on its build (MKLDNN keeps a workspace output), and its loader
    # recomputes the table, so only the layout is compared
    assert len(ours["node_row_ptr"]) == len(theirs["node_row_ptr"])
    assert run.json["args"] == space["out"].list_arguments()
    assert tuple(run.json["shape"]) == (2, 10)
    back = mx.sym.load_json(run.json["json"])
    assert back.list_arguments() == space["out"].list_arguments()
    assert back.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
