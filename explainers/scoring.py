"""Per-input quality metrics of one explanation: what the Explain page shows under each map, the
Compare page averages and `xaidash explain --metrics` writes.

Which metrics apply is read from the data at hand (masks, rationales) and the method's spec
(completeness where the method declares what its attributions add up to).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch

from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.metrics.deletion import CURVE_STEPS
from xaidash.explainers.metrics.registry import REGISTRY, metrics_for
from xaidash.explainers.registry import get_method
from xaidash.models.bundle import ModelBundle

# Metric column -> (title, which way is better); the order is the table's. A view of the metric registry
# (explainers/metrics/registry.py, where each metric declares its facts), kept in this shape for its readers.
METRICS: dict[str, tuple[str, str]] = {k: (m.title, m.better) for k, m in REGISTRY.items()}

# What one value of a map scores, by modality, as (singular, plural): the one place metric wordings take it from
# (text maps score words: word pieces are merged back, and the text curves remove or put back whole words).
UNIT_WORDS: dict[str, tuple[str, str]] = {"image": ("pixel", "pixels"), "text": ("word", "words")}

# Metric column -> what it measures, with {unit} / {units} for the modality's word (`metric_meaning`).
METRIC_MEANING: dict[str, str] = {k: m.meaning for k, m in REGISTRY.items()}


def unit_words(modality: str) -> tuple[str, str]:
    """(singular, plural) of what one value of a map of this modality scores: ('pixel', 'pixels'), ('word', 'words')."""
    return UNIT_WORDS.get(modality, ("feature", "features"))


def metric_meaning(metric: str, modality: str) -> str:
    """What `metric` measures, worded for `modality` ('... the most relevant words are removed' for text)."""
    unit, units = unit_words(modality)
    return METRIC_MEANING.get(metric, metric).format(unit=unit, units=units)


def curves_legend(modality: str, steps: int = CURVE_STEPS) -> str:
    """The sentence under a metrics table that has deletion / insertion AUC, worded for `modality`."""
    unit, units = unit_words(modality)
    return (
        f"Deletion / insertion AUC: the target's probability as the most relevant {units} "
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
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Per-input quality metrics of one explanation of `raw` ({metric: one value per input}) and
    {metric: error} for those that could not be computed; a metric that does not apply is left out.
    `background` and `seed` are what `explain` got (None: the default background, as `explain` loads it).
    `page`: which page's metrics ('explain': the cheap ones and the curves; 'compare': the costly ones too, as
    the metric registry declares them)."""
    from xaidash.explainers import metrics as M
    from xaidash.explainers.metrics.complexity import complexity, sparseness
    from xaidash.explainers.metrics.random_logit import random_logit
    from xaidash.explainers.metrics.road import road_curve
    from xaidash.explainers.metrics.stability import COMPARE_NEIGHBOURS, stability

    n = len(explanation)
    wanted = {m.id for m in metrics_for(page, bundle.modality)}
    jobs: dict[str, Callable[[], Any]] = {}
    if bundle.modality == "image":
        images = cast(torch.Tensor, raw)
        jobs["deletion_auc"] = lambda: M.deletion_auc(bundle, raw, explanation, steps=steps).aucs
        jobs["insertion_auc"] = lambda: M.insertion_auc(bundle, raw, explanation, steps=steps).aucs
        jobs["road_morf"] = lambda: road_curve(bundle, images, explanation, order="morf", seed=seed).scores
        jobs["road_lerf"] = lambda: road_curve(bundle, images, explanation, order="lerf", seed=seed).scores
        if masks is not None:
            jobs["pointing_game"] = lambda: M.pointing_game(explanation, masks)
            jobs["energy_in_mask"] = lambda: M.energy_in_mask(explanation, masks)
        jobs["infidelity"] = lambda: M.infidelity_score(bundle, images, explanation, batch_size=batch_size, seed=seed)
        shared: dict[str, Any] = {}  # both robustness scores come from one recomputation on the same neighbours

        def robust() -> Any:
            if "result" not in shared:
                shared["result"] = stability(
                    bundle,
                    images,
                    explanation.method,
                    explanation,
                    params=dict(explanation.params),
                    samples=COMPARE_NEIGHBOURS,
                    background=background,
                    batch_size=batch_size,
                    seed=seed,
                )
            return shared["result"]

        jobs["max_sensitivity"] = lambda: robust().max_sensitivity
        jobs["local_lipschitz"] = lambda: robust().lipschitz
    else:
        texts = list(raw)
        jobs["deletion_auc"] = lambda: (
            M.text_perturbation_curve(bundle, texts, explanation, mode="deletion", steps=steps).aucs
        )
        jobs["insertion_auc"] = lambda: (
            M.text_perturbation_curve(bundle, texts, explanation, mode="insertion", steps=steps).aucs
        )
        if rationales is not None and any(r for r in rationales):
            given = [list(r or []) for r in rationales]
            jobs["rationale_pointing"] = lambda: M.rationale_pointing(explanation, given)
            jobs["rationale_energy"] = lambda: M.rationale_energy(explanation, given)
    if get_method(explanation.method, bundle.modality).completeness is not None:
        jobs["completeness_gap"] = lambda: M.completeness_gap(
            bundle, raw, explanation, background=background, seed=seed
        )
    jobs["sparseness"] = lambda: sparseness(explanation, bundle.device)
    jobs["complexity"] = lambda: complexity(explanation, bundle.device)
    jobs["random_logit"] = lambda: random_logit(
        bundle, raw, explanation, background=background, batch_size=batch_size, seed=seed
    )
    jobs = {k: job for k, job in jobs.items() if k in wanted}
    values: dict[str, list[float]] = {}
    errors: dict[str, str] = {}
    for name, job in jobs.items():
        try:
            values[name] = [float(v) for v in np.asarray(job(), dtype=np.float64).reshape(-1)][:n]
        except Exception as err:  # noqa: BLE001 - one metric failing must not hide the others
            errors[name] = f"{type(err).__name__}: {err}"
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
) -> ScoredExplanation:
    """`explain` with one method, then (with_metrics) its per-input metrics, those the metric registry declares for
    `page` ('explain', or 'compare' with the costly ones): what every session runs per method."""
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
    )
    return ScoredExplanation(e, values, errors)
