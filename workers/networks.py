"""A job spec's ``model`` -> a hybridized engine network, and the network -> MXNet files.

Three forms (core.jobspec.ModelSpec): a layer list (:func:`workers.build.build_network`),
a Gluon model-zoo name, or an uploaded MXNet symbol read from object storage (never code:
a symbol is a JSON graph of operators the engine implements). A finished job's network
leaves as MXNet's own ``-symbol.json`` + ``-0000.params`` (:func:`export_network`).
"""

from __future__ import annotations

import json
from typing import Any

import engine.base
import engine.gluon
import engine.gluon.nn
import engine.symbol
from core.jobspec import LayerList, ModelSpec
from core.model_forms import UploadedModelRef, ZooModel
from core.storage import (
    MODEL_META_FILE,
    MODEL_PARAMS_FILE,
    MODEL_SYMBOL_FILE,
    ObjectNotFound,
    ObjectStore,
    job_export_prefix,
    model_prefix,
)
from engine.gluon.parameter_dict import save_arrays
from engine.gluon.symbol_block import SymbolBlock, exported
from workers.build import SpecError, build_network

# The params file of an upload is read with this bound (the api refused larger ones).
MAX_PARAMS_BYTES = 2 * 1024**3


def build_model(model: ModelSpec, store: ObjectStore) -> Any:
    """The network of any model form, hybridized, not yet initialized."""
    if isinstance(model, ZooModel):
        return zoo_network(model)
    if isinstance(model, UploadedModelRef):
        return _uploaded_network(model, store)
    layers: LayerList = model
    return build_network(layers)


def zoo_network(model: ZooModel) -> Any:
    from engine.gluon.model_zoo import vision

    try:
        net = vision.get_model(model.zoo, **model.engine_kwargs())
        # The top block's prefix comes from a process-wide counter (resnetv13_ in a worker
        # that built three before); name it as a fresh MXNet process would (resnetv10_),
        # so every build has the same names and the export's are MXNet's own: its params
        # load by name into mx.gluon.model_zoo's network.
        fresh = f"{type(net).__name__.lower()}0_"
        if net.prefix != fresh:
            net = vision.get_model(model.zoo, prefix=fresh, **model.engine_kwargs())
    except (KeyError, ValueError, TypeError) as exc:
        raise SpecError(f"model.zoo {model.zoo!r}: {exc}", field="model.zoo") from exc
    net.hybridize(static_alloc=True, static_shape=True)
    return net


def _read(store: ObjectStore, key: str, what: str) -> bytes:
    try:
        return store.get(key)
    except ObjectNotFound as exc:
        raise SpecError(f"{what} is gone from storage (was the model deleted?)") from exc


class UploadedNetwork(SymbolBlock):
    """An uploaded graph whose checkpoints reload.

    MXNet 1.9's SymbolBlock (and the engine's, faithfully) cannot load its own
    ``save_parameters`` file: it saves names without their common prefix (``fc0_weight``),
    then, seeing no "." in them, reads them back as full names (``user_fc0_weight``) and
    fails. A resumed job must load its checkpoint, so this one saves full names, the form
    ``load_parameters`` reads for a block without children (``collect_params().save``)."""

    def save_parameters(self, filename: Any, deduplicate: bool = False,
                        format: str = "npz") -> None:
        save_arrays(filename, {name: param.data().asnumpy()
                               for name, param in self.collect_params().items()}, format)


def uploaded_graph(symbol_json: str) -> Any:
    """An upload's graph as a job trains it: up to the input of a Module-style loss head."""
    return _without_loss_head(engine.symbol.load_json(symbol_json))


def _uploaded_network(model: UploadedModelRef, store: ObjectStore) -> Any:
    prefix = model_prefix(model.model)
    symbol_json = _read(store, prefix + MODEL_SYMBOL_FILE, f"model {model.model}")
    meta = json.loads(_read(store, prefix + MODEL_META_FILE, f"model {model.model}"))
    try:
        graph = uploaded_graph(symbol_json.decode())
        net = UploadedNetwork(graph, [engine.symbol.var(meta["input_name"])])
    except (KeyError, ValueError, TypeError, engine.base.MXNetError) as exc:
        raise SpecError(f"model {model.model}: {exc}", field="model.model") from exc
    _init_like_gluon_layers(net)
    net.hybridize(static_alloc=True, static_shape=True)
    return net


# Module-style heads that compute a loss's gradient in backward and pass data forward;
# their label input would otherwise become a trained "parameter" of the block.
LOSS_HEADS = frozenset({"SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput",
                        "MAERegressionOutput", "SVMOutput"})


def _without_loss_head(symbol: Any) -> Any:
    """A ``mx.model.save_checkpoint`` graph ends in e.g. ``SoftmaxOutput(fc, label)``; the
    job's spec names its loss, so train the network up to the head's input (the logits)."""
    graph = json.loads(symbol.tojson())
    if len(graph["heads"]) != 1:
        return symbol
    head = graph["nodes"][graph["heads"][0][0]]
    if head["op"] not in LOSS_HEADS:
        return symbol
    feeding = graph["nodes"][head["inputs"][0][0]]["name"]
    internals = symbol.get_internals()
    name = f"{feeding}_output"
    return internals[name] if name in internals.list_outputs() else symbol


# What Gluon's own layers initialize these to (bias_initializer="zeros", gamma "ones", ...).
# Module-style graphs name BatchNorm's statistics moving_*, Gluon-exported ones running_*.
_FIXED_INITS = (("_bias", "zeros"), ("_beta", "zeros"), ("_moving_mean", "zeros"),
                ("_running_mean", "zeros"), ("_gamma", "ones"), ("_moving_var", "ones"),
                ("_running_var", "ones"))


def _init_like_gluon_layers(net: Any) -> None:
    """A loaded graph's parameters carry no initializer of their own, so the spec's (say
    Xavier) would be applied to every one, biases included, and Xavier refuses vectors
    (MXNet's SymbolBlock behaves the same). Give them what the equivalent Gluon layers use;
    weights keep the spec's initializer."""
    for name, param in net.collect_params().items():
        fixed = next((init for suffix, init in _FIXED_INITS if name.endswith(suffix)), None)
        if fixed is not None and param.init is None:
            param.init = fixed


def load_initial_weights(net: Any, model: ModelSpec, store: ObjectStore, ctx: Any) -> bool:
    """Set an uploaded model's params (when asked for and present) on an initialized
    network; True when weights were loaded."""
    if not isinstance(model, UploadedModelRef) or model.params is False:
        return False
    key = model_prefix(model.model) + MODEL_PARAMS_FILE
    if not store.exists(key):
        if model.params:
            raise SpecError(f"model {model.model} was uploaded without a params file")
        return False
    from engine.ndarray import mxnet_format
    from engine.ndarray.creation import array

    loaded = mxnet_format.read_params(store.get(key), max_bytes=MAX_PARAMS_BYTES)
    params = net.collect_params()
    for stored_name, value in loaded.items():
        name = stored_name.split(":", 1)[1] if ":" in stored_name else stored_name
        if name in params:
            params[name].set_data(array(value, ctx=ctx))
    return True


def export_network(net: Any, store: ObjectStore, job_id: str) -> dict[str, int]:
    """Write the trained network as MXNet's ``-symbol.json`` + ``-0000.params`` under the
    job's export prefix; returns each file's size."""
    symbol_json, params = exported(net)
    files = {MODEL_SYMBOL_FILE: symbol_json.encode(), MODEL_PARAMS_FILE: params}
    prefix = job_export_prefix(job_id)
    for name, data in files.items():
        store.put(prefix + name, data)
    return {name: len(data) for name, data in files.items()}
