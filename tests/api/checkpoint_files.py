"""Real checkpoints of a layer-list spec, as a worker writes them (issue 26: export)."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import numpy as np

from core import repositories
from core.jobspec import parse_spec
from core.storage import CHECKPOINT_FILES, checkpoint_prefix, open_store
from tests.conftest import ApiHarness


def trained_network(spec: dict[str, Any], seed: int) -> Any:
    """The spec's network as the worker builds it, initialized from ``seed`` and run
    once (its shapes known)."""
    import engine
    import engine.initializer
    from workers.build import build_network

    net = build_network(parse_spec(spec).model)
    engine.random.seed(seed)
    net.initialize(engine.initializer.Xavier())
    net(engine.nd.array(np.zeros((2, 64), dtype="float32")))
    return net


def mxnet_files(net: Any) -> dict[str, bytes]:
    """What the worker's export of ``net`` writes (workers.networks.export_network)."""
    from engine.gluon.symbol_block import exported

    symbol, params = exported(net)
    return {"model-symbol.json": symbol.encode(), "model-0000.params": params}


def write_checkpoint(api: ApiHarness, job_id: str, step: int, net: Any) -> None:
    """A worker's checkpoint of ``net`` at ``step`` (bytes: as its params.npz): files,
    meta.json last, then the row."""
    buffer = io.BytesIO()
    if isinstance(net, bytes):
        buffer.write(net)
    else:
        net.save_parameters(buffer)
    blobs = {"params.npz": buffer.getvalue(), "trainer.npz": b"trainer state",
             "meta.json": json.dumps({"step": step, "epoch": 1}).encode()}
    settings = api.settings
    store = open_store(settings.storage_url, endpoint_url=settings.s3_endpoint_url)
    prefix = checkpoint_prefix(job_id, step)
    files = {}
    for name in CHECKPOINT_FILES:
        store.put(prefix + name, blobs[name])
        files[name] = {"sha256": hashlib.sha256(blobs[name]).hexdigest(),
                       "size": len(blobs[name])}
    with api.sessions() as session:
        repositories.add_checkpoint(session, job_id=job_id, step=step, epoch=1,
                                    key_prefix=prefix, files=files)
        session.commit()
