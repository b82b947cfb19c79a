"""Differential tests: the "current" scopes are per thread, as in MXNet 1.9.1.

MXNet keeps the default context, the attribute scope, the name manager and the Gluon Block
naming scope in thread-local storage, and exposes the first three as assignable class
attributes (``Context.default_ctx = ...``, ``NameManager.current``). A server that builds
networks in several threads relies on one thread's scope not leaking into another. Blocks
are numbered by the thread's NameManager, and symbols made inside a Block's ``name_scope``
carry its prefix.
"""

from __future__ import annotations

import pytest

from tests.engine.gluon.differential import compare, oracle_results
from tests.oracle import needs_mxnet

pytestmark = needs_mxnet

IN_THREAD = """
import threading, warnings
def in_thread(fn):
    seen = []
    thread = threading.Thread(target=lambda: seen.append(fn()))
    thread.start()
    thread.join()
    return seen[0]
warnings.simplefilter('ignore', DeprecationWarning)  # MXNet deprecates the class attributes
"""

CASES = {
    "default_context": IN_THREAD + """
Context = mx.context.Context
def other():
    Context.default_ctx = mx.cpu(5)
    return str(mx.current_context())
result['thread'] = in_thread(other)
result['main'] = str(Context.default_ctx)
with mx.cpu(3):
    result['inside_with'] = str(mx.current_context())
    result['thread_while_main_in_with'] = in_thread(lambda: str(mx.current_context()))
result['device_typeid'] = Context('cpu', 0).device_typeid
""",
    "attribute_scope": IN_THREAD + """
AttrScope = mx.attribute.AttrScope
AttrScope.current = AttrScope(y='hi', z='hey')
def other():
    before = sorted(map(list, AttrScope.current._attr.items()))
    with mx.AttrScope(x='hello'):
        inside = sorted(map(list, AttrScope.current._attr.items()))
    return [before, inside]
result['thread'] = in_thread(other)
result['main'] = sorted(map(list, AttrScope.current._attr.items()))
AttrScope.current = AttrScope()
""",
    "name_manager": IN_THREAD + """
NameManager = mx.name.NameManager
NameManager.current = NameManager()
first = mx.sym.FullyConnected(mx.sym.var('x'), num_hidden=2).name
second = mx.sym.FullyConnected(mx.sym.var('x'), num_hidden=2).name
result['thread'] = in_thread(lambda: mx.sym.FullyConnected(mx.sym.var('x'), num_hidden=2).name)
result['main'] = [first, second]
""",
    "block_scope": IN_THREAD + """
nn = mx.gluon.nn
with mx.name.NameManager():
    outer = nn.HybridSequential()
    with outer.name_scope():
        inner = nn.Dense(2)
        result['thread'] = in_thread(lambda: nn.Dense(2).prefix)
        made_here = mx.sym.FullyConnected(mx.sym.var('x'), num_hidden=2).name
    result['main'] = [outer.prefix, inner.prefix, made_here]
""",
    "blocks_numbered_by_the_name_manager": """
nn = mx.gluon.nn
nn.Dense(2); nn.Dense(2)
with mx.name.NameManager():
    fresh = nn.Dense(2).prefix
with mx.name.Prefix('enc_'):
    prefixed = nn.Dense(2).prefix
result['names'] = [fresh, prefixed]
""",
}


@pytest.fixture(scope="module")
def mxnet():
    return oracle_results(CASES, {})


@pytest.mark.parametrize("name", sorted(CASES))
def test_scopes_are_per_thread_as_in_mxnet(mxnet, name: str) -> None:
    ours, theirs = compare(CASES, name, {}, mxnet)
    assert ours == theirs
