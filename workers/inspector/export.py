"""A kept checkpoint as MXNet files (issue 26): the network of the job's spec, made as the
worker makes it, given the checkpoint's parameters and exported as the worker exports a
succeeded job (workers.networks.export_network). No operator runs on data: the parameters'
shapes come from the checkpoint, and the graph is traced on a variable."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import engine.base
import engine.symbol
from core.inspection import Answer, ExportCheckpoint, ExportedNetwork, Refusal
from core.model_forms import UploadedModelRef, ZooModel
from engine.gluon.symbol_block import exported
from workers.build import SpecError, build_network
from workers.networks import UploadedNetwork, uploaded_graph, zoo_network


def export_checkpoint(question: ExportCheckpoint, params: bytes | None
                      ) -> tuple[Answer, bytes | None]:
    """``(answer, the -0000.params file)``; a refusal (and no file) when the checkpoint
    does not fit the spec's network."""
    try:
        net = _network(question)
        # The checkpoint's arrays give every parameter its shape and value (Gluon's
        # load_parameters on a network not initialized yet); allow_pickle stays off.
        net.load_parameters(io.BytesIO(params or b""))
        symbol, blob = exported(net)
    except SpecError as exc:
        return Answer(refused=Refusal(field=exc.field or "model", message=str(exc))), None
    except (KeyError, ValueError, TypeError, RuntimeError, AssertionError, OSError,
            zipfile.BadZipFile, engine.base.MXNetError) as exc:
        return Answer(refused=Refusal(field="step", message=f"the checkpoint does not load "
                                      f"into the job's network: {exc}")), None
    return Answer(exported=ExportedNetwork(symbol=symbol, params_size=len(blob))), blob


def _network(question: ExportCheckpoint) -> Any:
    model = question.model
    if isinstance(model, UploadedModelRef):
        graph = question.uploaded
        if graph is None:
            raise SpecError("the uploaded model's symbol was not sent", field="model.model")
        return UploadedNetwork(uploaded_graph(graph.symbol), [engine.symbol.var(graph.input_name)])
    if isinstance(model, ZooModel):
        return zoo_network(model)
    return build_network(model)
