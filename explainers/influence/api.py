"""Training-data attribution behind one call: `explain_influence` (the training samples that most support and most
oppose one prediction), and the whole-set self-influence job (self_influence.py, re-exported here)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from xaidash.explainers.influence import fast as _fast  # noqa: F401  (registers the methods)
from xaidash.explainers.influence import projected as _projected  # noqa: F401
from xaidash.explainers.influence import similar as _similar  # noqa: F401
from xaidash.explainers.influence.cache import FeatureCache
from xaidash.explainers.influence.registry import get_influence_method
from xaidash.explainers.influence.self_influence import (
    SelfInfluenceStatus,
    run_self_influence,
    self_influence_status,
    self_influence_table,
)
from xaidash.explainers.influence.training_set import TrainingData, training_data
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.runs.store import Run

__all__ = [
    "InfluenceResult",
    "SelfInfluenceStatus",
    "TrainingSample",
    "explain_influence",
    "run_self_influence",
    "self_influence_status",
    "self_influence_table",
]

MAX_K = 200


@dataclass
class TrainingSample:
    index: int  # index into the data set's *train* split (what `?sample=train:N` opens on Explain)
    label: int  # the label the model was trained with (after label noise, if the run had any)
    dataset_label: int  # the data set's own label (differs from `label` for a flipped sample)
    predicted: int  # the final model's prediction for it
    probability: float  # of `predicted`
    score: float  # influence on the query (proponents > 0, opponents < 0) or self-influence


@dataclass
class InfluenceResult:
    method: str
    label: str
    units: str
    target: int  # the class explained
    proponents: list[TrainingSample]  # most supporting first
    opponents: list[TrainingSample]  # most opposing first
    checkpoints: list[int]  # epochs used
    layer: str  # the layer(s) whose gradients were used, in words
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _samples(
    bundle: ModelBundle, data: TrainingData, positions: list[int], scores: torch.Tensor
) -> list[TrainingSample]:
    if not positions:
        return []
    with torch.no_grad():
        probs = bundle.predict_proba(data.raw(positions))
    s = data.samples
    return [
        TrainingSample(
            index=int(s.indices[p]),
            label=int(s.labels[p]),
            dataset_label=int(s.dataset_labels[p]),
            predicted=int(probs[i].argmax()),
            probability=float(probs[i].max()),
            score=float(scores[p]),
        )
        for i, p in enumerate(positions)
    ]


def _prepared(bundle: ModelBundle, raw: torch.Tensor | str) -> torch.Tensor:
    """One input as the model reads it; ExplainError when `raw` is not one input of the model's kind."""
    adapter = adapter_of(bundle.modality)
    what = f"Give one {adapter.sample} to find its influential training samples"
    try:
        batch = adapter.checked(
            bundle, adapter.as_batch(raw if isinstance(raw, str | torch.Tensor) else torch.as_tensor(raw))
        )
    except (ExplainError, TypeError, ValueError, RuntimeError) as err:
        raise ExplainError(f"{what} ({err}).") from None
    if adapter.count(batch) != 1:
        raise ExplainError(f"{what}, not {adapter.count(batch)}.")
    return bundle.prepare(batch)


def explain_influence(
    bundle: ModelBundle,
    run: Run,
    raw: torch.Tensor | str,
    target: int | None = None,
    method: str = "tracin_fast",
    k: int = 8,
    progress: Callable[[float, str], None] | None = None,
) -> InfluenceResult:
    """The k training samples that most support and the k that most oppose `bundle`'s prediction of class `target`
    (None: the predicted class) for one input `raw` (an image (C, H, W) in [0, 1] or a text), by `method`.
    The training samples' features are computed once per run and snapshot and cached under `<run>/influence/`."""
    started = time.perf_counter()
    spec = get_influence_method(method)
    if why := spec.applies(run):
        raise ExplainError(why)
    if not 1 <= int(k) <= MAX_K:
        raise ExplainError(f"k must be between 1 and {MAX_K}.")
    x = _prepared(bundle, raw)
    classes = bundle.info.num_classes
    if target is None:
        target = int(bundle.logits(x).argmax(1)[0])
    elif not 0 <= int(target) < classes:
        raise ExplainError(f"Target class {target} is out of range: the model has classes 0..{classes - 1}.")
    data = training_data(run)
    cache = FeatureCache(run, spec, data, bundle.device, bundle=bundle)
    computing = not all(cache.chunk_path(s, a, b).exists() for s in cache.snapshots for a, b in cache.chunks())
    scores = cache.query_scores(x, int(target), progress)
    n = min(int(k), len(scores))
    top = [int(i) for i in torch.topk(scores, n).indices if scores[i] > 0]
    bottom = [int(i) for i in torch.topk(-scores, n).indices if scores[i] < 0]
    seconds = time.perf_counter() - started
    notes = list(cache.notes) + ([data.note] if data.note else [])
    verb = "computed and cached" if computing else "read the cached"
    notes.append(f"{verb} features of {len(data):,} training samples under {cache.root} ({seconds:.1f} s)")
    if not bottom:
        notes.append("no training sample scored below 0: no opponents")
    snaps = cache.snapshots
    layer = cache.model(snaps[-1])[1]
    return InfluenceResult(
        method=spec.id,
        label=spec.label,
        units=spec.units,
        target=int(target),
        proponents=_samples(bundle, data, top, scores),
        opponents=_samples(bundle, data, bottom, scores),
        checkpoints=[s.epoch for s in snaps if s.epoch is not None],
        layer=spec.layer.format(
            layer=cache.layer(),
            inputs=layer.in_features,
            outputs=layer.out_features,
            params=sum(p.numel() for p in cache.model(snaps[-1])[0].parameters() if p.requires_grad),
        ),
        notes=notes,
        seconds=time.perf_counter() - started,
    )
