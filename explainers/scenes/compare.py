"""Scene methods compared over a sample of test scenes: every true object the model finds (a detector's box that
matches it, or a segmenter's class region) explained by every chosen method, each map scored against the exact
ground truth, and per (method, metric) the mean with its 95% interval, the best method per metric, and how much the
methods' maps agree (Spearman rank correlation of |map|, per target, averaged).

The Compare page's scene view and `xaidash scenes compare` come here; so does `bench/scenes_truth.py`. Sampling,
scoring and the statistics are the classifier Compare's (`metrics.spread`, `metrics.agreement`); what a scene adds
is what one target is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd
import torch

from xaidash.data.errors import ExplainError
from xaidash.data.scenes.types import SceneSplit, SceneTarget
from xaidash.explainers.metrics.agreement import agreement_matrix
from xaidash.explainers.metrics.spread import spread
from xaidash.explainers.scenes.api import DEFAULT_MIN_SCORE, detection_targets, explain_scene, region_targets
from xaidash.explainers.scenes.metrics import SCENE_METRICS, score_map, truth_object
from xaidash.explainers.scenes.registry import TASK_WORDS, SceneModelLike, SceneProgress, get_scene_method
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget
from xaidash.models.scenes.predictions import Detections, ScenePrediction

DEFAULT_SCENES = 8  # about 20 boxes on `scenes`: intervals a few hundredths wide for the hit shares' means
SUMMARY_COLUMNS = ("method", "metric", "mean", "low", "high", "minimum", "maximum", "n", "valid", "undefined")


class PredictingSceneModel(SceneModelLike, Protocol):
    """A scene model that also predicts (its targets come from what it finds): `SceneBundle` is one."""

    def predict(self, images: list[torch.Tensor]) -> list[ScenePrediction]: ...


@dataclass
class SceneTargets:
    """What one scene contributes: the targets scored (boxes that match a true object, or the regions of classes
    the scene holds), the detections that match no true object, and the true objects no detection found."""

    targets: list[BoxTarget | RegionTarget]
    false_detections: int = 0
    missed: int = 0


@dataclass
class SceneComparison:
    """The methods over the sample. `values[method]`: one dict of metric values per target (empty where its map
    failed), aligned with `targets` (one description each: 'scene 3 · box 1: circle at …'); `summary`: one row per
    (method, metric) with mean, 95% interval (low, high), range, n and valid; `best[metric]`: the best method(s) by
    the metric's direction; `agreement`: methods x methods mean Spearman correlation of |map| (None with one
    method); `errors[method]`: the first failure of a method, in one line."""

    task: str
    methods: list[str]
    scenes: list[int]
    targets: list[str]
    values: dict[str, list[dict[str, float]]]
    summary: pd.DataFrame
    best: dict[str, list[str]]
    agreement: pd.DataFrame | None
    errors: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    false_detections: int = 0
    missed: int = 0
    curves: bool = False

    def to_json(self) -> dict[str, Any]:
        """Everything but the maps, as plain JSON values (NaN as null)."""
        return {
            "task": self.task,
            "methods": self.methods,
            "scenes": self.scenes,
            "targets": self.targets,
            "values": self.values,
            "summary": [{k: _plain(v) for k, v in row.items()} for row in self.summary.to_dict("records")],
            "best": self.best,
            "agreement": None if self.agreement is None else _matrix_json(self.agreement),
            "errors": self.errors,
            "seconds": self.seconds,
            "false_detections": self.false_detections,
            "missed": self.missed,
            "curves": self.curves,
        }


def _plain(value: Any) -> Any:
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _matrix_json(frame: pd.DataFrame) -> dict[str, dict[str, float | None]]:
    return {str(r): {str(c): _plain(frame.loc[r, c]) for c in frame.columns} for r in frame.index}


def scene_targets(
    bundle: PredictingSceneModel, image: torch.Tensor, truth: SceneTarget, min_score: float = DEFAULT_MIN_SCORE
) -> SceneTargets:
    """The targets of one test scene: a detector's boxes (score >= `min_score`) that match a true object (false
    detections and missed objects counted, not scored); a segmenter's predicted regions of the classes the scene
    holds."""
    with torch.no_grad():
        prediction = bundle.predict([image])[0]
    if isinstance(prediction, Detections):
        boxes = detection_targets(prediction, min_score)
        found = [truth_object(b, truth) for b in boxes]
        matched = [b for b, f in zip(boxes, found, strict=True) if f is not None]
        missed = len(truth) - len({f for f in found if f is not None})
        return SceneTargets(list(matched), len(boxes) - len(matched), missed)
    present = {int(v) for v in truth.labels}
    return SceneTargets([r for r in region_targets(prediction) if r.label in present])


def compare_scene_methods(
    bundle: PredictingSceneModel,
    split: SceneSplit,
    indices: Sequence[int],
    methods: Sequence[str],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    curves: bool = False,
    min_score: float = DEFAULT_MIN_SCORE,
    progress: SceneProgress | None = None,
    batch_size: int = 32,
) -> SceneComparison:
    """Every method in `methods` on the targets of test scenes `indices` of `split`, scored against their truth;
    deletion and insertion too with `curves` (2 x 17 model passes per map). One failing method is one line in
    `errors`, the others go on; a method of the other task or an index outside the split is refused at once."""
    for m in methods:
        spec = get_scene_method(m)
        if not spec.applies(bundle.task):
            what = " or ".join(TASK_WORDS.get(t, t) for t in spec.tasks)
            raise ExplainError(
                f"{spec.label} explains a {what}; this model is a {TASK_WORDS.get(bundle.task, 'model')}."
            )
    if not methods:
        raise ExplainError("Pick at least one method.")
    bad = [i for i in indices if not 0 <= i < len(split)]
    if bad or not indices:
        raise ExplainError(f"Test scenes are numbered 0 to {len(split) - 1}; got {bad or 'none'}.")
    state = _Collected(list(methods))
    for step, i in enumerate(indices):
        inner = _part(progress, step, len(indices), f"scene {i}")
        _one_scene(bundle, split, int(i), state, dict(params or {}), curves, min_score, inner, batch_size)
    if progress is not None:
        progress(1.0, "Done")
    return state.result(bundle.task, [int(i) for i in indices], curves)


def _part(progress: SceneProgress | None, step: int, total: int, name: str) -> SceneProgress | None:
    if progress is None:
        return None
    return lambda f, text: progress((step + min(max(f, 0.0), 1.0)) / total, f"{name} ({step + 1}/{total}): {text}")


@dataclass
class _Collected:
    methods: list[str]
    targets: list[str] = field(default_factory=list)
    values: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    maps: dict[str, list[np.ndarray]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    false_detections: int = 0
    missed: int = 0

    def result(self, task: str, scenes: list[int], curves: bool) -> SceneComparison:
        summary, best = summarise({m: self.values.get(m, []) for m in self.methods})
        agreement = None
        if len(self.methods) > 1 and self.targets:
            agreement = agreement_matrix({m: self.maps.get(m, []) for m in self.methods})
        return SceneComparison(
            task, self.methods, scenes, self.targets, {m: self.values.get(m, []) for m in self.methods}, summary,
            best, agreement, self.errors, self.seconds, self.false_detections, self.missed, curves,
        )  # fmt: skip


def _one_scene(
    bundle: PredictingSceneModel,
    split: SceneSplit,
    i: int,
    state: _Collected,
    params: dict[str, Any],
    curves: bool,
    min_score: float,
    progress: SceneProgress | None,
    batch_size: int,
) -> None:
    image, truth = split.images[i], split.targets[i]
    found = scene_targets(bundle, image, truth, min_score)
    state.false_detections += found.false_detections
    state.missed += found.missed
    if not found.targets:
        return
    name = split.names[i] if split.names else str(i)
    state.targets.extend(f"scene {i} ({name}) · {t.describe(split.classes)}" for t in found.targets)
    made = explain_scene(
        bundle, image, found.targets, state.methods, params, metrics=False, progress=progress, batch_size=batch_size
    )
    for item in made:
        if item.map is None:
            state.errors.setdefault(item.method, item.error or "no map")
            state.values.setdefault(item.method, []).append({})
            # a constant map: no ranking, so the agreement skips this target for the method
            state.maps.setdefault(item.method, []).append(np.zeros(image.shape[-2:], dtype=np.float32))
            continue
        values, _ = score_map(bundle, image, item.target, item.map, truth, curves=curves, batch_size=batch_size)
        state.values.setdefault(item.method, []).append(values)
        state.maps.setdefault(item.method, []).append(item.map)
        state.seconds[item.method] = state.seconds.get(item.method, 0.0) + item.seconds / len(found.targets)


def summarise(values: Mapping[str, Sequence[Mapping[str, float]]]) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """(one row per (method, metric) of `SCENE_METRICS` with values: mean, 95% interval, range, n, valid; the best
    method(s) per metric by its direction, when at least two methods have a mean)."""
    rows: list[dict[str, Any]] = []
    for method, per_target in values.items():
        for metric in SCENE_METRICS:
            column = [v.get(metric.id, float("nan")) for v in per_target]
            if not any(np.isfinite(column)):
                continue
            s = spread(column)
            low, high = _clipped(s.low, s.high, metric.value_range)
            rows.append(
                {"method": method, "metric": metric.id, "mean": s.mean, "low": low, "high": high}
                | {"minimum": s.minimum, "maximum": s.maximum, "n": s.n, "valid": s.valid, "undefined": s.undefined}
            )
    summary = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    best: dict[str, list[str]] = {}
    for metric in SCENE_METRICS:
        part = summary[summary.metric == metric.id]
        if len(part) < 2:
            continue
        top = part["mean"].min() if metric.lower_is_better else part["mean"].max()
        best[metric.id] = [str(m) for m in part[np.isclose(part["mean"], top, rtol=1e-9, atol=1e-12)].method]
    return summary, best


def _clipped(low: float, high: float, bounds: tuple[float | None, float | None]) -> tuple[float, float]:
    """The t-interval kept inside the metric's range (a share's interval past 1 says nothing a reader can use)."""
    lo, hi = bounds
    if lo is not None and np.isfinite(low):
        low = max(low, lo)
    if hi is not None and np.isfinite(high):
        high = min(high, hi)
    return low, high


def sample_indices(count: int, available: int, seed: int | None = None) -> list[int]:
    """`count` test scenes: the first ones (seed None, the same sample every time), else a random draw."""
    count = max(1, min(count, available))
    if seed is None:
        return list(range(count))
    return sorted(int(i) for i in np.random.default_rng(seed).choice(available, size=count, replace=False))
