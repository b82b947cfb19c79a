"""Does a job's model build for its training data? The network of each model form is
made as the worker makes it (workers.build / workers.networks), traced on a variable, and
its shapes inferred for one batch (engine.symbol.inspect_symbol): a layer that cannot take
its input is refused at submit, naming the layer, instead of failing in the worker."""

from __future__ import annotations

from typing import Any

import engine.symbol
from core.inspection import Answer, CheckModel, ModelFit
from core.model_forms import UploadedModelRef, ZooModel
from engine.symbol import GraphTooLarge, SymbolFormatError, inspect_symbol
from workers.build import SpecError, build_network
from workers.inspector.uploads import Refused, engine_bounds
from workers.networks import uploaded_graph, zoo_network

INPUT = "data"


def check_model(question: CheckModel) -> Answer:
    shape = tuple(question.input_shape)
    try:
        symbol, inputs, field, layers = _network(question)
        info = inspect_symbol(symbol, inputs, engine_bounds(question))
        if question.uploaded is not None and question.uploaded.params:
            _check_params_fit(question, symbol, info)
    except Refused as exc:
        return Answer(refused=exc.refusal)
    except SpecError as exc:
        return Answer(refused=Refused(exc.field or "model", str(exc)).refusal)
    except SymbolFormatError as exc:
        where = _layer_of(exc.node, layers) or field
        # the node's own problem, without the graph-level wording (the batch is named here)
        detail = exc.__cause__ if isinstance(exc.__cause__, ValueError) else exc
        return Answer(refused=Refused(where, f"the model does not build for batches of shape "
                                      f"{shape}: {detail}",
                                      isinstance(exc, GraphTooLarge)).refusal)
    return Answer(fit=ModelFit(output_shapes=[list(s) for s in info["output_shapes"]],
                               parameter_count=info["parameter_count"],
                               computed_elements=info["computed_elements"]))


def _network(question: CheckModel) -> tuple[Any, dict[str, tuple[int, ...]], str,
                                            list[tuple[str, str]]]:
    """(the symbol the worker's network computes, its input shapes, the spec field of the
    model, (block prefix, spec field) of each layer of a layer list)."""
    shape = tuple(question.input_shape)
    model = question.model
    if isinstance(model, UploadedModelRef):
        graph = question.uploaded
        if graph is None:
            raise Refused("model.model", "the uploaded model's symbol was not sent")
        return uploaded_graph(graph.symbol), {graph.input_name: shape}, "model.model", []
    if isinstance(model, ZooModel):
        return zoo_network(model)(engine.symbol.var(INPUT)), {INPUT: shape}, "model.zoo", []
    net = build_network(model)
    layers = [(child.prefix, f"model.{index}")
              for index, child in enumerate(net._children.values())]
    return net(engine.symbol.var(INPUT)), {INPUT: shape}, "model", layers


def _check_params_fit(question: CheckModel, symbol: Any, info: dict[str, Any]) -> None:
    """The uploaded params were checked for the upload's input shape; the job's batches
    must need the same parameter shapes, or the params would not load."""
    graph = question.uploaded
    assert graph is not None
    declared = inspect_symbol(symbol, {graph.input_name: tuple(graph.input_shape)},
                              engine_bounds(question))
    wanted = {**info["arg_shapes"], **info["aux_shapes"]}
    uploaded = {**declared["arg_shapes"], **declared["aux_shapes"]}
    differ = [f"{name} {uploaded[name]} -> {wanted[name]}" for name in declared[
        "parameter_names"] if uploaded.get(name) != wanted.get(name)]
    if differ:
        raise Refused("model.model", f"the params were uploaded for input "
                      f"{tuple(graph.input_shape)}; batches of shape {tuple(question.input_shape)}"
                      f" need other parameter shapes ({', '.join(differ[:3])}); resize the "
                      "images to the uploaded shape, or set params: false")


def _layer_of(node: str | None, layers: list[tuple[str, str]]) -> str | None:
    """The spec field of the layer whose block made ``node`` (its name has the prefix)."""
    if node is None:
        return None
    matches = [(len(prefix), field) for prefix, field in layers if node.startswith(prefix)]
    return max(matches)[1] if matches else None

