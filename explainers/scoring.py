"""Per-input quality metrics of one explanation: what the Explain page shows under each map, the
Compare page averages and `xaidash explain --metrics` writes.

Every metric computes itself (explainers/metrics/registry.py): scoring is a loop over those the page scores and the
modality's adapter lists, keeping those that apply to the data at hand (masks, rationales) and the method's spec
(completeness where the method declares what its attributions add up to).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import error_text
from xaidash.data.modalities import GroundTruth
from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.guard import evaluating
from xaidash.explainers.metrics.registry import REGISTRY, MetricContext, metrics_for
from xaidash.explainers.modalities import ADAPTERS, adapter_of
from xaidash.explainers.perturbation_curves import CURVE_STEPS
from xaidash.explainers.registry import get_method
from xaidash.models.bundle import ModelBundle

# Metric column -> (title, which way is better); the order is the table's. A view of the metric registry
# (explainers/metrics/registry.py, where each metric declares its facts), kept in this shape for its readers.
METRICS: dict[str, tuple[str, str]] = {m.id: (m.title, m.better) for m in REGISTRY}

# Metric column -> what it measures, with {unit} / {units} for the modality's word (`metric_meaning`).
METRIC_MEANING: dict[str, str] = {m.id: m.meaning for m in REGISTRY}


def unit_words(modality: str) -> tuple[str, str]:
    """(singular, plural) of what one value of a map of this modality scores, as its adapter declares it: ('pixel',
    'pixels'), ('word', 'words'): text maps score words (word pieces are merged back, and the text curves remove or
    put back whole words). The one place metric wordings take it from."""
    adapter = ADAPTERS.find(modality)
    return (adapter.unit, adapter.units) if adapter is not None else ("feature", "features")


def metric_meaning(metric: str, modality: str) -> str:
    """What `metric` measures, worded for `modality` ('... the most relevant words are removed' for text)."""
    unit, units = unit_words(modality)
    return METRIC_MEANING.get(metric, metric).format(unit=unit, units=units)


def curves_legend(modality: str, steps: int = CURVE_STEPS, regression: bool = False) -> str:
    """The sentence under a metrics table that has deletion / insertion AUC, worded for `modality` (and, for a model
    that predicts a number, for what its curves follow: the prediction's change, not a probability)."""
    unit, units = unit_words(modality)
    followed = (
        "the share of the prediction's difference from the average row's that is still there"
        if regression
        else "the target's probability"
    )
    return (
        f"Deletion / insertion AUC: {followed} as the most relevant {units} "
        f"are removed / added ({steps} steps). Sparseness: Gini index of |attribution| (0 spread evenly over the "
        f"{units}, near 1 on one {unit}); complexity: its entropy in nats (0 on one {unit})."
    )


def input_metrics(
    bundle: ModelBundle,
    raw: torch.Tensor | Sequence[str],
    explanation: Explanation,
    *,
    masks: np.ndarray | None = None,
    rationales: Sequence[Sequence[int] | None] | None = None,
    background: torch.Tensor | None = None,
    steps: int = CURVE_STEPS,
    seed: int = 0,
    page: str = "explain",
    batch_size: int = 256,
    only: Collection[str] | None = None,
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Per-input quality metrics of one explanation of `raw` ({metric: one value per input}) and
    {metric: error} for those that could not be computed; a metric that does not apply is left out.
    `background` and `seed` are what `explain` got (None: the default background, as `explain` loads it).
    `page`: which page's metrics ('explain': the cheap ones and the curves; 'compare': the costly ones too, as
    the metric registry declares them); `only`: just these of them (None: all). The model runs in eval mode; its
    train/eval flags are restored after."""
    truth = GroundTruth(masks, None if rationales is None else [None if r is None else list(r) for r in rationales])
    ctx = MetricContext(
        bundle=bundle,
        adapter=adapter_of(bundle.modality),
        raw=raw,
        explanation=explanation,
        method=get_method(explanation.method, bundle.modality),
        truth=truth,
        background=background,
        steps=steps,
        seed=seed,
        batch_size=batch_size,
    )
    values: dict[str, list[float]] = {}
    errors: dict[str, str] = {}
    with evaluating(bundle.model):
        for metric in metrics_for(page, bundle.modality):
            if (only is not None and metric.id not in only) or not metric.applies(ctx):
                continue
            try:
                values[metric.id] = metric.compute(ctx)
            except Exception as err:  # noqa: BLE001 - one metric failing must not hide the others
                errors[metric.id] = error_text(err, metric.title, then="the other metrics went on")
    return values, errors


@dataclass
class ScoredExplanation:
    """One method's explanation of some inputs with their per-input metrics (see `input_metrics`)."""

    explanation: Explanation
    metrics: dict[str, list[float]] = field(default_factory=dict)
    metric_errors: dict[str, str] = field(default_factory=dict)


def explain_and_score(
    bundle: ModelBundle,
    raw: torch.Tensor | Sequence[str],
    method: str,
    params: dict[str, Any] | None = None,
    target: int | Sequence[int] | None = None,
    *,
    with_metrics: bool = True,
    masks: np.ndarray | None = None,
    rationales: Sequence[Sequence[int] | None] | None = None,
    background: torch.Tensor | None = None,
    steps: int = CURVE_STEPS,
    batch_size: int = 256,
    seed: int = 0,
    page: str = "explain",
    metrics: Collection[str] | None = None,
) -> ScoredExplanation:
    """`explain` with one method, then (with_metrics) its per-input metrics, those the metric registry declares for
    `page` ('explain', or 'compare' with the costly ones; `metrics`: only these of them): what every session runs
    per method."""
    e = explain(bundle, raw, target, method, batch_size=batch_size, background=background, seed=seed, **(params or {}))
    if not with_metrics:
        return ScoredExplanation(e)
    values, errors = input_metrics(
        bundle,
        raw,
        e,
        masks=masks,
        rationales=rationales,
        background=background,
        steps=steps,
        seed=seed,
        page=page,
        batch_size=batch_size,
        only=metrics,
    )
    return ScoredExplanation(e, values, errors)
