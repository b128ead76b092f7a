"""Completeness (Sundararajan et al. 2017; "efficiency" for Shapley values): attributions of a path or
Shapley method should add up to the change of the explained output between reference and input.

gap = |sum(attr) - (f(x) - f(ref))| / |f(x) - f(ref)|. For an Explanation every term comes from its
method's spec: f is the output it explains (`spec.output`: the target's logit or probability), the
sum takes one value per unit (`spec.completeness.unit`: per pixel, per superpixel, per word) and the
reference is the one the method declares (`spec.completeness.reference`). The reference output is
computed here from the model, not read from the method's own diagnostics, so the check is
independent of the method's arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.explainers.api import predicted_targets
from xaidash.explainers.baselines import (
    BASELINES,
    logits_with_embeddings_of,
    make_baselines,
    padding_ids,
    shap_background,
    stand_in_background,
)
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.metrics._common import Attributions, flat_maps, image_batch, target_tensor
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import Completeness, MethodSpec, get_method
from xaidash.explainers.samples import resolve_background
from xaidash.explainers.segmentation import fill
from xaidash.models.bundle import ModelBundle

_EPS = 1e-6  # below this |f(x) - f(ref)| the relative gap is undefined (NaN)


def relative_gap(attribution_sums: np.ndarray, scores: np.ndarray, reference_scores: np.ndarray) -> np.ndarray:
    """|sum - (f(x) - f(ref))| / |f(x) - f(ref)| elementwise; NaN where the output does not change."""
    delta = np.asarray(scores, dtype=np.float64) - np.asarray(reference_scores, dtype=np.float64)
    gap = np.abs(np.asarray(attribution_sums, dtype=np.float64) - delta)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.abs(delta) > _EPS, gap / np.abs(delta), np.nan).astype(np.float32)


@dataclass
class CompletenessTerms:
    """Per input: the attributions' sum (one value per unit), f(x) and f(reference)."""

    sums: np.ndarray
    scores: np.ndarray
    reference_scores: np.ndarray

    def absolute_gaps(self) -> np.ndarray:
        """|sum - (f(x) - f(ref))|: what a method's own additivity or convergence diagnostic reports."""
        return np.abs(self.sums - (self.scores - self.reference_scores))

    def relative_gaps(self) -> np.ndarray:
        return relative_gap(self.sums, self.scores, self.reference_scores)


def _outputs(bundle: ModelBundle, x: torch.Tensor, t: torch.Tensor, output: str, batch_size: int) -> np.ndarray:
    """The explained output of each input: its target's logit or softmax probability, as float64."""
    logits = bundle.logits(x, batch_size)
    values = torch.softmax(logits, dim=1) if output == "probability" else logits
    return values.gather(1, t.view(-1, 1).to(values.device))[:, 0].double().cpu().numpy()


def _unit_sums(e: Explanation, completeness: Completeness) -> np.ndarray:
    if completeness.unit != "superpixel":
        return np.array([float(np.sum(m, dtype=np.float64)) for m in flat_maps(e)])
    if e.segments is None:
        raise ExplainError(f"{e.method} attributes superpixels but its explanation carries no segment labels.")
    sums = []
    for i in range(len(e)):
        labels, values = np.asarray(e.segments[i]).ravel(), e.item(i).astype(np.float64).ravel()
        totals = np.bincount(labels, weights=values)
        sizes = np.bincount(labels)
        present = sizes > 0
        sums.append(float((totals[present] / sizes[present]).sum()))  # each superpixel's value once
    return np.array(sums)


def _background_reference(
    bundle: ModelBundle,
    raw: torch.Tensor,
    t: torch.Tensor,
    params: dict[str, Any],
    background: torch.Tensor | None,
    seed: int,
    output: str,
    batch_size: int,
) -> np.ndarray:
    """The mean explained output over the background the SHAP explainer used (each input's stand-in without one)."""
    bg = shap_background(bundle, background, int(params["background_size"]), seed)
    refs = []
    for i in range(len(raw)):
        own = bg if bg is not None else stand_in_background(bundle, raw[i : i + 1])
        refs.append(_outputs(bundle, own, t[i].expand(len(own)), output, batch_size).mean())
    return np.array(refs)


def declared_terms(
    bundle: ModelBundle,
    inputs: torch.Tensor | np.ndarray | str | Sequence[str],
    explanation: Explanation,
    *,
    background: torch.Tensor | None = None,
    seed: int = 0,
    batch_size: int = 256,
) -> CompletenessTerms:
    """The completeness terms of an explanation, each as its method's spec declares it. `background`
    and `seed` are what `explain` got (None: the default background, as `explain` loads it)."""
    spec: MethodSpec = get_method(explanation.method, bundle.modality)
    c = spec.completeness
    if c is None:
        raise ExplainError(f"{spec.label} declares nothing its attributions add up to: completeness does not apply.")
    sums = _unit_sums(explanation, c)
    t = torch.as_tensor(np.asarray(explanation.targets), dtype=torch.long, device=bundle.device)
    params = explanation.params
    with torch.no_grad():
        if bundle.modality == "text":
            texts = [inputs] if isinstance(inputs, str) else [str(v) for v in inputs]
            ids = bundle.prepare(texts)
            _check_count(len(ids), len(sums))
            scores = _outputs(bundle, ids, t, spec.output, batch_size)
            padded = padding_ids(bundle, texts, ids)
            if c.reference == "padding_embedding":
                logits = logits_with_embeddings_of(bundle, ids, padded, batch_size)
                ref = (torch.softmax(logits, 1) if spec.output == "probability" else logits).gather(1, t.view(-1, 1))
                reference = ref[:, 0].double().cpu().numpy()
            elif c.reference == "padding_tokens":
                reference = _outputs(bundle, padded, t, spec.output, batch_size)
            else:
                raise ExplainError(f"{spec.id}: reference {c.reference!r} is not one a text model has.")
            return CompletenessTerms(sums, scores, reference)
        raw = image_batch(bundle, inputs)
        _check_count(len(raw), len(sums))
        x = bundle.prepare(raw)
        scores = _outputs(bundle, x, t, spec.output, batch_size)
        used = resolve_background(bundle, spec.needs_background(params), background)
        if c.reference == "baseline":
            ref_x = make_baselines(params["baseline"], bundle, x, background=used, seed=seed)
            reference = _outputs(bundle, ref_x, t, spec.output, batch_size)
        elif c.reference == "background":
            reference = _background_reference(bundle, raw, t, params, used, seed, spec.output, batch_size)
        elif c.reference == "hidden":
            if explanation.segments is None:
                raise ExplainError(f"{spec.id} hides superpixels but its explanation carries no segment labels.")
            masks = torch.as_tensor(explanation.segments, device=bundle.device)
            hidden = bundle.prepare(fill(raw, params["hide"], masks))
            reference = _outputs(bundle, hidden, t, spec.output, batch_size)
        elif c.reference == "zero":
            reference = np.zeros_like(scores)  # relevance conserves the output itself (LRP)
        else:
            raise ExplainError(f"{spec.id}: reference {c.reference!r} is not one an image model has.")
    return CompletenessTerms(sums, scores, reference)


def _check_count(inputs: int, maps: int) -> None:
    if inputs != maps:
        raise ExplainError(f"Got {inputs} inputs and {maps} attribution maps.")


@torch.no_grad()
def completeness_gap(
    bundle: ModelBundle,
    inputs: torch.Tensor | np.ndarray | str | Sequence[str],
    attributions: Attributions,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    *,
    baselines: str | torch.Tensor | np.ndarray | None = None,
    background: torch.Tensor | None = None,
    reference_scores: float | Sequence[float] | np.ndarray | None = None,
    batch_size: int = 256,
    seed: int = 0,
) -> np.ndarray:
    """Relative completeness gap per input (0 = attributions sum exactly to the output change).

    For an Explanation of a method that declares completeness, its spec gives the output, the unit
    and the reference (see `declared_terms`); `background` and `seed` are what `explain` got.
    Otherwise, or to check against another reference, f is the target's logit, the sum runs over
    every value, and the reference is, in order of precedence:
    - `reference_scores`: the target logit(s) at the reference, given directly (one or one per input);
    - `baselines`: a kind from explainers.baselines.BASELINES, or images in [0, 1] like `inputs`
      ((N, C, H, W) or one (C, H, W));
    - `background`: prepared model inputs; the reference is the mean target logit over them.
    """
    explicit = reference_scores is not None or baselines is not None
    if (
        isinstance(attributions, Explanation)
        and not explicit
        and get_method(attributions.method, bundle.modality).completeness is not None
    ):
        terms = declared_terms(bundle, inputs, attributions, background=background, seed=seed, batch_size=batch_size)
        return terms.relative_gaps()
    t = target_tensor(
        targets if targets is not None else (attributions if isinstance(attributions, Explanation) else None),
        len(flat_maps(attributions)),
        bundle.device,
    )
    sums = np.array([float(np.sum(a, dtype=np.float64)) for a in flat_maps(attributions)])
    if bundle.modality == "text":
        x = bundle.prepare([inputs] if isinstance(inputs, str) else list(inputs))
    else:
        x = bundle.prepare(image_batch(bundle, inputs))
    _check_count(len(x), len(sums))
    t = predicted_targets(bundle, x, batch_size) if t is None else t
    scores = _outputs(bundle, x, t, "logit", batch_size)

    if reference_scores is not None:
        ref = np.broadcast_to(np.asarray(reference_scores, dtype=np.float64).reshape(-1), scores.shape)
        return relative_gap(sums, scores, ref)
    if bundle.modality == "text":
        raise ExplainError("For text models pass reference_scores: the baseline lives in embedding space.")
    if isinstance(baselines, str):
        if baselines not in BASELINES:
            raise ExplainError(f"Unknown baseline {baselines!r}: choose one of {', '.join(BASELINES)}.")
        ref_x = make_baselines(baselines, bundle, x, background=background, seed=seed)
    elif baselines is not None:
        b = torch.as_tensor(baselines, dtype=torch.float32)
        ref_x = bundle.prepare(b.to(bundle.device)).expand_as(x)
    elif background is not None:
        bg = torch.as_tensor(background, dtype=torch.float32).to(bundle.device)
        mean = bundle.logits(bg, batch_size).mean(0)
        return relative_gap(sums, scores, mean[t].double().cpu().numpy())
    else:
        raise ExplainError("Completeness needs a reference: pass baselines, background or reference_scores.")
    return relative_gap(sums, scores, _outputs(bundle, ref_x, t, "logit", batch_size))
