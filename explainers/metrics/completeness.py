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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.explainers.baselines import (
    BASELINES,
    logits_with_embeddings_of,
    make_baselines,
    padding_ids,
    shap_background,
    stand_in_background,
)
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.guard import evaluating
from xaidash.explainers.map_arrays import Attributions, target_tensor
from xaidash.explainers.methods.series_baselines import fixed_baseline, segment_fill
from xaidash.explainers.metrics.maps import flat_maps
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.modalities.table_values import background_reference
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import GROUPED_UNITS, Completeness, MethodSpec, get_method
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
    """The explained output of each input: its target's logit or softmax probability (a regression model's
    predicted value: `bundle.scores`), as float64."""
    logits = bundle.logits(x, batch_size)
    values = bundle.scores(logits) if output == "probability" else logits
    return values.gather(1, t.view(-1, 1).to(values.device))[:, 0].double().cpu().numpy()


def _unit_sums(e: Explanation, completeness: Completeness) -> np.ndarray:
    if completeness.unit not in GROUPED_UNITS:
        return np.array([float(np.sum(m, dtype=np.float64)) for m in flat_maps(e)])
    if e.segments is None:
        raise ExplainError(f"{e.method} attributes {completeness.unit}s but its explanation carries no segment labels.")
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


@dataclass(frozen=True)
class _Scored:
    """What a declared reference's output is computed from: the inputs as the metrics take them (`raw`) and
    prepared (`x`), their targets `t`, the explanation and its method, and the background and seed `explain` used."""

    bundle: ModelBundle
    raw: Any
    x: torch.Tensor
    t: torch.Tensor
    spec: MethodSpec
    explanation: Explanation
    background: torch.Tensor | None
    seed: int
    batch_size: int

    def outputs(self, x: torch.Tensor) -> np.ndarray:
        return _outputs(self.bundle, x, self.t, self.spec.output, self.batch_size)


def _baseline(s: _Scored) -> np.ndarray:
    kind = s.explanation.params["baseline"]
    return s.outputs(make_baselines(kind, s.bundle, s.x, background=s.background, seed=s.seed))


def _background(s: _Scored) -> np.ndarray:
    params, output = s.explanation.params, s.spec.output
    return _background_reference(s.bundle, s.raw, s.t, params, s.background, s.seed, output, s.batch_size)


def _hidden(s: _Scored) -> np.ndarray:
    if s.explanation.segments is None:
        raise ExplainError(f"{s.spec.id} hides superpixels but its explanation carries no segment labels.")
    masks = torch.as_tensor(s.explanation.segments, device=s.bundle.device)
    return s.outputs(s.bundle.prepare(fill(s.raw, s.explanation.params["hide"], masks)))


def _zero(s: _Scored) -> np.ndarray:
    return np.zeros(len(s.t), dtype=np.float64)  # relevance conserves the output itself (LRP)


def _padding_embedding(s: _Scored) -> np.ndarray:
    logits = logits_with_embeddings_of(s.bundle, s.x, padding_ids(s.bundle, s.raw, s.x), s.batch_size)
    ref = (torch.softmax(logits, 1) if s.spec.output == "probability" else logits).gather(1, s.t.view(-1, 1))
    return ref[:, 0].double().cpu().numpy()


def _padding_tokens(s: _Scored) -> np.ndarray:
    return s.outputs(padding_ids(s.bundle, s.raw, s.x))


def _reference_rows(s: _Scored) -> np.ndarray:
    """The explained output at a table's reference rows, averaged over them (one row: the mean or median row)."""
    params = s.explanation.params
    size = int(params.get("background_size", 1))
    refs = background_reference(str(params["baseline"]), s.bundle.info, s.background, size, s.seed)
    logits = s.bundle.logits(s.bundle.prepare(refs), s.batch_size)
    values = s.bundle.scores(logits) if s.spec.output == "probability" else logits
    return values[:, s.t.to(values.device)].mean(0).double().cpu().numpy()


def _series_baseline(s: _Scored) -> np.ndarray:
    return s.outputs(fixed_baseline(str(s.explanation.params["baseline"]), s.bundle, s.x))


def _series_hidden(s: _Scored) -> np.ndarray:
    if s.explanation.segments is None:
        raise ExplainError(f"{s.spec.id} hides segments but its explanation carries no segment labels.")
    labels = torch.as_tensor(np.asarray(s.explanation.segments[0]).reshape(-1), device=s.bundle.device)
    return s.outputs(segment_fill(str(s.explanation.params["baseline"]), s.bundle, s.x, labels.long()))


# f(reference) of each reference a classifier's method may declare (explainers/registry.py `Reference`).
_REFERENCES: dict[str, Callable[[_Scored], np.ndarray]] = {
    "baseline": _baseline,
    "background": _background,
    "hidden": _hidden,
    "zero": _zero,
    "padding_embedding": _padding_embedding,
    "padding_tokens": _padding_tokens,
    "reference_rows": _reference_rows,
    "series_baseline": _series_baseline,
    "series_hidden": _series_hidden,
}


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
    reference = _REFERENCES.get(c.reference)
    if reference is None:
        raise ExplainError(f"{spec.id}: reference {c.reference!r} is not one a classifier's maps are checked against.")
    sums = _unit_sums(explanation, c)
    t = torch.as_tensor(np.asarray(explanation.targets), dtype=torch.long, device=bundle.device)
    raw = adapter_of(bundle.modality).metric_inputs(bundle, inputs)
    _check_count(len(raw), len(sums))
    with torch.no_grad(), evaluating(bundle.model):
        x = bundle.prepare(raw)
        scores = _outputs(bundle, x, t, spec.output, batch_size)
        used = resolve_background(bundle, spec.needs_background(explanation.params), background)
        return CompletenessTerms(
            sums, scores, reference(_Scored(bundle, raw, x, t, spec, explanation, used, seed, batch_size))
        )


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
    x = bundle.prepare(adapter_of(bundle.modality).metric_inputs(bundle, inputs))
    _check_count(len(x), len(sums))
    t = bundle.predicted(x, batch_size) if t is None else t
    scores = _outputs(bundle, x, t, "logit", batch_size)

    if reference_scores is not None:
        ref = np.broadcast_to(np.asarray(reference_scores, dtype=np.float64).reshape(-1), scores.shape)
        return relative_gap(sums, scores, ref)
    if bundle.adapter.tokenized:  # its inputs are token ids: no input to mix a baseline with
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
