"""Explaining one scene: the chosen methods on one image for the chosen boxes or regions, as one `run_session` (one
failing method is one line, the others go on), each map scored against the ground truth when the caller has it.

Importing this module registers every scene method (each module registers its own): whoever lists `SCENE_METHODS`
with its entries imports this module first. The pages and `xaidash scenes explain` come here; so does the
benchmark."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import ExplainError
from xaidash.data.scenes.types import SceneTarget
from xaidash.explainers.scenes import attribution, cams, drise  # noqa: F401 - each registers its methods
from xaidash.explainers.scenes import metrics as scene_metrics
from xaidash.explainers.scenes.registry import (
    SceneMethodContext,
    SceneModelLike,
    SceneProgress,
    get_scene_method,
)
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget
from xaidash.explainers.session import Outcome, error_line, run_session
from xaidash.models.scenes.predictions import Detections, Segmentation

DEFAULT_MIN_SCORE = 0.5  # the detections explained by default: those the model is at least this sure of


@dataclass
class SceneExplanation:
    """One method's map of one target: `map` (H, W) float32 in the method's units (None when the method failed, and
    `error` says why in one line), the method's wall time for all the targets of its call together (`seconds`: one
    forward pass serves every box), and the map's metrics with the sentence of each that could not be computed."""

    method: str
    target: BoxTarget | RegionTarget
    map: np.ndarray | None
    seconds: float
    metrics: dict[str, float] = field(default_factory=dict)
    metric_errors: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.map is not None


def explain_scene(
    bundle: SceneModelLike,
    image: torch.Tensor,
    targets: Sequence[BoxTarget | RegionTarget],
    methods: Sequence[str],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    truth: SceneTarget | None = None,
    metrics: bool = True,
    progress: SceneProgress | None = None,
    *,
    batch_size: int = 32,
    seed: int = 0,
    done: Callable[[Outcome[torch.Tensor]], None] | None = None,
) -> list[SceneExplanation]:
    """Every method in `methods` (ids of `SCENE_METHODS`, with `params[id]` its parameters) on `image` (3, H, W)
    float in [0, 1] for each of `targets`: one `SceneExplanation` per (method, target), methods in the order given,
    targets in theirs. With `metrics`, each map is scored (`metrics.score_map`: the truth metrics against `truth`
    when given, deletion and insertion of the target's score always). An unknown method id is refused at once."""
    if not targets:
        raise ExplainError("Nothing to explain: pick a box or a region.")
    specs = {m: get_scene_method(m) for m in methods}
    image = image.detach().to(bundle.device, torch.float32)
    given = dict(params or {})
    total = max(len(specs), 1)
    # The maps take the first 70% of the bar when they are scored after (the curves run the model again).
    shown = _scaled(progress, 0.0, 0.7 if metrics else 1.0)

    def compute(method: str) -> torch.Tensor:
        j = list(specs).index(method)
        inner = None if shown is None else _within(shown, j, total, specs[method].label)
        ctx = SceneMethodContext(bundle, image, list(targets), batch_size, inner, seed)
        return specs[method].run(ctx, dict(given.get(method, {})))

    outcomes = run_session(list(specs), compute, label=lambda m: specs[m].label, progress=shown, done=done)
    out: list[SceneExplanation] = []
    for outcome in outcomes:
        out.extend(_explanations(outcome, targets))
    if metrics:
        scoring = _scaled(progress, 0.7, 1.0)
        for j, item in enumerate(out):
            if scoring is not None:
                scoring(j / len(out), f"Scoring map {j + 1} of {len(out)}…")
            if item.map is not None:
                item.metrics, item.metric_errors = _scored(bundle, image, item, truth, batch_size)
        if scoring is not None:
            scoring(1.0, "Done")
    return out


def _within(progress: SceneProgress, j: int, total: int, label: str) -> SceneProgress:
    """A method's own progress (0..1 within it) as the session's fraction."""
    return lambda fraction, message: progress((j + min(max(fraction, 0.0), 1.0)) / total, f"{label}: {message}")


def _scaled(progress: SceneProgress | None, start: float, end: float) -> SceneProgress | None:
    if progress is None:
        return None
    return lambda fraction, message: progress(start + (end - start) * fraction, message)


def _explanations(
    outcome: Outcome[torch.Tensor], targets: Sequence[BoxTarget | RegionTarget]
) -> list[SceneExplanation]:
    if outcome.value is None:
        return [SceneExplanation(outcome.method, t, None, outcome.seconds, error=outcome.error) for t in targets]
    maps = outcome.value.detach().float().cpu().numpy()
    return [SceneExplanation(outcome.method, t, maps[k], outcome.seconds) for k, t in enumerate(targets)]


def _scored(
    bundle: SceneModelLike, image: torch.Tensor, item: SceneExplanation, truth: SceneTarget | None, batch_size: int
) -> tuple[dict[str, float], dict[str, str]]:
    assert item.map is not None
    try:
        return scene_metrics.score_map(bundle, image, item.target, item.map, truth, batch_size=batch_size)
    except Exception as err:  # noqa: BLE001 - a metric that fails must not lose the map
        return {}, {"metrics": error_line(err, "the metrics")}


def detection_targets(prediction: Detections, min_score: float = DEFAULT_MIN_SCORE) -> list[BoxTarget]:
    """One `BoxTarget` per detection scoring at least `min_score`, `index` its place in `prediction`."""
    return [
        BoxTarget(_box(prediction.boxes[i]), int(prediction.labels[i]), i)
        for i in range(len(prediction))
        if float(prediction.scores[i]) >= min_score
    ]


def _box(row: torch.Tensor) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = (float(v) for v in row.tolist())
    return x0, y0, x1, y1


def region_targets(prediction: Segmentation) -> list[RegionTarget]:
    """One `RegionTarget` per object class the predicted mask holds: the class's predicted pixels."""
    return [RegionTarget(label, prediction.region(label)) for label in prediction.classes_present()]


def truth_object(target: BoxTarget | RegionTarget, truth: SceneTarget) -> int | None:
    """The index in `truth` of the true object a box explains (same class, best IoU, at least 0.5); None for a false
    detection, and for a region, which is explained against its class's every pixel, not one object."""
    if isinstance(target, RegionTarget):
        return None
    return scene_metrics.truth_object(target, truth)
