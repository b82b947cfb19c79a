"""Job spec -> engine objects: network, loss, metrics, trainer, data loaders.

Every name in a spec goes through an engine registry (``engine.*.create``); nothing from a
spec is ever imported, exec'd or eval'd. Built-in data sets come from packages that ship
them, uploaded ones from object storage as npz (``allow_pickle=False``) or CSV.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

import engine
import engine.gluon
import engine.gluon.data
import engine.gluon.nn
import engine.lr_scheduler
import engine.metric
from core.jobspec import (
    BUILTIN_DATASETS,
    IMAGE_BUILTINS,
    BuiltinSource,
    DatasetSource,
    JobSpec,
    Layer,
    MetricSpec,
    NamedComponent,
    TrainerSpec,
)
from engine.ndarray.creation import array
from engine.ndarray.nn_ops import softmax
from workers.synthetic_data import synthetic_images

T = TypeVar("T")

# A deterministic split of a built-in set: the same rows on every worker, forever.
BUILTIN_SPLIT_SEED = 0
BUILTIN_SPLITS = {"train": (0.0, 0.7), "val": (0.7, 0.85), "test": (0.85, 1.0)}


class SpecError(ValueError):
    """The spec names something the engine cannot build; the job fails with this reason.
    ``field`` names the part of the spec at fault, when known (``model.2``)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def create_component(factory: Callable[..., T], what: str, component: NamedComponent) -> T:
    """``factory(type, **params)`` for a validated spec component; engine refusals (which
    the spec tables should have caught at submit) become a :class:`SpecError`."""
    try:
        return factory(component.type, **component.engine_kwargs())
    except (KeyError, ValueError, TypeError) as exc:
        raise SpecError(f"{what} {component.type!r}: {exc}") from exc


# ------------------------------------------------------------------------ data


def _load_builtin(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    if name in IMAGE_BUILTINS:
        # As a table (pixels in [0, 1], flattened); jobs read them as images instead.
        train, labels = synthetic_images(name, "train")
        test, test_labels = synthetic_images(name, "test")
        pixels = np.concatenate([train, test]).reshape(len(train) + len(test), -1)
        return (pixels / np.float32(255)).astype(np.float32), np.concatenate(
            [labels, test_labels]).astype(np.float32)
    if name not in BUILTIN_DATASETS:
        raise SpecError(f"unknown built-in data set {name!r}; available: "
                        f"{sorted(BUILTIN_DATASETS)}")
    bunch = getattr(datasets, f"load_{name}")()
    data = np.asarray(bunch.data, dtype=np.float64)
    # Scale features to [0, 1] per column so every built-in set trains with default lrs.
    low, high = data.min(axis=0), data.max(axis=0)
    data = (data - low) / np.where(high > low, high - low, 1.0)
    return data.astype(np.float32), np.asarray(bunch.target, dtype=np.float32)


def builtin_arrays(name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a built-in data set (sklearn ships them; nothing is downloaded)."""
    if split not in BUILTIN_SPLITS:
        raise SpecError(f"unknown split {split!r}; use one of {sorted(BUILTIN_SPLITS)}")
    data, label = _load_builtin(name)
    order = np.random.default_rng(BUILTIN_SPLIT_SEED).permutation(len(data))
    begin, end = BUILTIN_SPLITS[split]
    rows = order[int(round(begin * len(data))) : int(round(end * len(data)))]
    return data[rows], label[rows]


def arrays_from_upload(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """An uploaded data set: the api stores every upload as npz with ``data`` and ``label``."""
    with np.load(io.BytesIO(raw), allow_pickle=False) as archive:
        return (
            np.asarray(archive["data"], dtype=np.float32),
            np.asarray(archive["label"], dtype=np.float32),
        )


def source_arrays(
    source: BuiltinSource | DatasetSource | None,
    load_upload: Callable[[str], bytes],
) -> tuple[np.ndarray, np.ndarray]:
    """One split's arrays: a built-in set's rows, or an upload (``load_upload(id)``)."""
    if isinstance(source, BuiltinSource):
        return builtin_arrays(source.builtin, source.split)
    if source is None:
        raise SpecError("a data split needs 'builtin' or 'dataset'")
    return arrays_from_upload(load_upload(source.dataset))


def make_loader(
    data: np.ndarray, label: np.ndarray, batch_size: int, shuffle: bool, seed: int, ctx: Any
) -> Any:
    dataset = engine.gluon.data.ArrayDataset(
        array(data, ctx=ctx), array(label, ctx=ctx)
    )
    return engine.gluon.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=shuffle, last_batch="keep", seed=seed
    )


# ------------------------------------------------------------------------ model


def build_network(layers: list[Layer]) -> Any:
    # A fixed prefix, and the layers made inside its scope: the parameter names, whose
    # sorted order is the order of the trainer's saved states, are then the same in every
    # worker process however many networks it built before (a resumed job's checkpoint
    # must load into the same order: with process-wide counters, dense10_ sorts before
    # dense8_).
    net = engine.gluon.nn.HybridSequential(prefix="net_")
    with net.name_scope():
        for index, layer in enumerate(layers):
            params = layer.model_dump(exclude={"type"})
            try:
                net.add(engine.gluon.nn.create(layer.type, **params))
            except (KeyError, ValueError, TypeError) as exc:
                raise SpecError(f"layer {index} {layer.type!r}: {exc}",
                                field=f"model.{index}") from exc
    # Every spec layer is a HybridBlock: train through the traced static program (reused
    # buffers, fused Dense+activation kernels), bit-identical to the imperative path on CPU.
    net.hybridize(static_alloc=True, static_shape=True)
    return net


def pick_context(device: str) -> Any:
    """``auto`` means the first GPU when cupy sees one, else the CPU."""
    if device == "cpu":
        return engine.cpu()
    has_gpu = engine.context.num_gpus() > 0
    if device == "gpu" and not has_gpu:
        raise SpecError("device: gpu was asked for but this worker has no usable GPU")
    return engine.gpu(0) if has_gpu else engine.cpu()


def build_optimizer_params(spec: JobSpec) -> tuple[str, dict[str, Any]]:
    """The Trainer's ``(optimizer, optimizer_params)``, the schedule built in."""
    params: dict[str, Any] = spec.optimizer.engine_kwargs()
    if spec.lr_scheduler is not None:
        schedule = spec.lr_scheduler.engine_kwargs()
        # MXNet silently overwrites a scheduler's base_lr with the optimizer's lr; saying
        # it explicitly keeps the schedule and the spec in agreement.
        schedule.setdefault("base_lr", params.get("learning_rate", 0.01))
        name = spec.lr_scheduler.type
        try:
            params["lr_scheduler"] = engine.lr_scheduler.create(name, **schedule)
        except (KeyError, ValueError, TypeError) as exc:
            raise SpecError(f"lr_scheduler {name!r}: {exc}") from exc
    return spec.optimizer.type, params


def build_trainer(spec: JobSpec, net: Any) -> Any:
    name, params = build_optimizer_params(spec)
    trainer_spec: TrainerSpec = spec.trainer
    compression = trainer_spec.compression
    try:
        return engine.gluon.Trainer(
            net.collect_params(),
            name,
            params,
            kvstore=trainer_spec.kvstore or "device",
            update_on_kvstore=trainer_spec.update_on_kvstore,
            compression_params=compression.model_dump() if compression else None,
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise SpecError(f"optimizer {name!r}: {exc}") from exc


class _SoftmaxFirst(engine.metric.EvalMetric):
    """Feed probabilities to a metric that needs them: networks end in logits."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner.name)
        self.inner = inner

    def update(self, labels: Any, preds: Any) -> None:
        preds = preds if isinstance(preds, (list, tuple)) else [preds]
        self.inner.update(labels, [softmax(p, axis=-1) for p in preds])

    def reset(self) -> None:
        if hasattr(self, "inner"):
            self.inner.reset()

    def get(self) -> Any:
        # Our own name: the estimator renames its metrics ("training ...").
        return self.name, self.inner.get()[1]


_NEEDS_PROBABILITIES = {"ce", "cross-entropy", "crossentropy", "nll_loss", "perplexity"}


def build_metrics(entries: list[str | MetricSpec]) -> list[Any]:
    """Metrics named as strings or as ``{type, **params}`` (e.g. ``top_k``)."""
    metrics = []
    for entry in entries:
        name = entry if isinstance(entry, str) else entry.type
        params = {} if isinstance(entry, str) else entry.engine_kwargs()
        try:
            metric = engine.metric.create(name, **params)
        except (KeyError, ValueError, TypeError) as exc:
            raise SpecError(f"metric {name!r}: {exc}") from exc
        if name.lower() in _NEEDS_PROBABILITIES:
            metric = _SoftmaxFirst(metric)
        metrics.append(metric)
    return metrics
