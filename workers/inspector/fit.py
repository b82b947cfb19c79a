"""Does a job's model build for its training data? The network of each model form is
made as the worker makes it (workers.build / workers.networks), traced on a variable, and
its shapes inferred for one batch (engine.symbol.inspect_symbol): a layer that cannot take
its input is refused at submit, naming the layer, instead of failing in the worker."""

from __future__ import annotations

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
    model = question.model
    try:
        if isinstance(model, UploadedModelRef):
            graph = question.uploaded
            if graph is None:
                raise Refused("model.model", "the uploaded model's symbol was not sent")
            symbol, inputs, field = (uploaded_graph(graph.symbol), {graph.input_name: shape},
                                     "model.model")
            layers: list[tuple[str, str]] = []
        else:
            net = zoo_network(model) if isinstance(model, ZooModel) else build_network(model)
            symbol, inputs = net(engine.symbol.var(INPUT)), {INPUT: shape}
            field = "model.zoo" if isinstance(model, ZooModel) else "model"
            layers = [] if isinstance(model, ZooModel) else [
                (child.prefix, f"model.{index}")
                for index, child in enumerate(net._children.values())]
        info = inspect_symbol(symbol, inputs, engine_bounds(question))
    except Refused as exc:
        return Answer(refused=exc.refusal)
    except SpecError as exc:
        return Answer(refused=Refused(exc.field or "model", str(exc)).refusal)
    except SymbolFormatError as exc:
        where = _layer_of(exc.node, layers) or field
        return Answer(refused=Refused(where, f"the model does not build for batches of shape "
                                      f"{shape}: {exc}", isinstance(exc, GraphTooLarge)).refusal)
    return Answer(fit=ModelFit(output_shapes=[list(s) for s in info["output_shapes"]],
                               parameter_count=info["parameter_count"],
                               computed_elements=info["computed_elements"]))


def _layer_of(node: str | None, layers: list[tuple[str, str]]) -> str | None:
    """The spec field of the layer whose block made ``node`` (its name has the prefix)."""
    if node is None:
        return None
    matches = [(len(prefix), field) for prefix, field in layers if node.startswith(prefix)]
    return max(matches)[1] if matches else None

