"""Several methods on one sample of inputs, compared: what the dashboard's Compare page shows.

A plain function (no Streamlit) that explains the sample with every method and scores each explanation per input
as one session (`session.explain_session`, with the metrics the registry declares for Compare), averages the scores
into a table with their spread over the inputs (`metrics.spread`), counts the maps that are constant (they rank
nothing), says why a cell has no value, marks the best method per metric, measures how much the methods agree and
runs the sanity check, reporting progress through a callback.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from PIL import Image

from xaidash.data.modalities import GroundTruth
from xaidash.explainers.comparison.ranking import comparison_ranking, ranking_notes
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.figures import render
from xaidash.explainers.figures.html_parts import scaled_tokens_html
from xaidash.explainers.figures.report import ExplainReport, MethodSetting, ReportSettings, session_report
from xaidash.explainers.figures.scales import ColourScale, is_clipped, robust_scale
from xaidash.explainers.metrics.deletion import CURVE_STEPS
from xaidash.explainers.metrics.registry import REGISTRY
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import get_method
from xaidash.explainers.samples import Sample
from xaidash.explainers.scoring import METRICS, ScoredExplanation
from xaidash.explainers.session import MethodResult, Outcome, Scoring, explain_session
from xaidash.models.bundle import ModelBundle

Progress = Callable[[float, str], None]

# The values each metric can take, (lowest, highest), None where a side is open, as each metric declares them in
# the metric registry (explainers/metrics/registry.py): areas, shares and probabilities lie in [0, 1]; gaps,
# runtimes and robustness ratios are >= 0 and unbounded above. A mean's 95% interval, which the t distribution may
# stretch past these ends on a few inputs, is drawn clipped to them (`metric_range`).
METRIC_RANGES: dict[str, tuple[float | None, float | None]] = {m.id: m.value_range for m in REGISTRY}


def metric_range(metric: str) -> tuple[float | None, float | None]:
    """The (lowest, highest) value `metric` can take, None where it is open or undeclared."""
    return METRIC_RANGES.get(metric, (None, None))


# Inputs the Compare page and `compare_methods` run the sanity check on by default: every input of the sample
# (resnet_small on shapes, six random draws: with 2 inputs Grad-CAM's correlation after the first randomised
# layer ranged from -0.82 to 0.69; on 16 inputs from -0.24 to 0.17).
SANITY_INPUTS: int | None = None
# A sanity-check map and its colour bar, drawn at least this wide and shown at their own width (never stretched to
# the column: stretched, a 160 px drawing put 24 px text under a map at 1440 px); narrower columns shrink them.
SANITY_MAP_PX = 200
SANITY_FONT_PX = 13  # its bar's text, as the Explain page's colour bars: 13 px wherever the map is shown whole


@dataclass
class Comparison:
    """methods x metrics (means over the inputs), the per-input values, the agreement matrix and the sanity check.

    `summary` has one row per (method, metric): mean, low/high (95% interval of the mean), minimum/maximum
    over the inputs, n, valid, undefined (inputs without a value) and `reason` (why a cell is n/a, or a note
    such as how many inputs had no value). `constant_maps[method]`: how many of its maps were constant.
    `best[metric]`: the method(s) with the best mean, by the metric's direction."""

    methods: list[str]
    explanations: dict[str, Explanation]
    per_input: dict[str, dict[str, list[float]]]
    metrics: pd.DataFrame
    agreement: pd.DataFrame | None
    sanity: Any  # explainers.metrics.SanityResult or None
    errors: dict[str, str]
    sample: Sample
    seconds: float = 0.0
    summary: pd.DataFrame | None = None
    constant_maps: dict[str, int] = field(default_factory=dict)
    best: dict[str, list[str]] = field(default_factory=dict)
    probabilities: np.ndarray | None = None  # (N, classes): the model's class probabilities of the sample
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    steps: int = CURVE_STEPS
    seed: int = 0

    def reason(self, method: str, metric: str) -> str:
        """Why (method, metric) has no value, or a note on its inputs; '' when there is nothing to say."""
        if self.summary is None:
            return ""
        hit = self.summary[(self.summary.method == method) & (self.summary.metric == metric)]
        return str(hit.iloc[0]["reason"]) if len(hit) else ""


def sanity_figure(values: Any, image: Any = None) -> Image.Image:
    """One image map of the sanity check as the Compare page draws it: its |values| on its own scale (the 99th
    percentile, '≥' when brighter pixels are clipped) over a grey copy of `image`, with the colour bar below."""
    mag = np.abs(np.asarray(values, dtype=np.float32))
    top = robust_scale(mag) or 1.0
    label = "|attribution|, own scale"
    scale = ColourScale(0.0, top, label, clipped=is_clipped(mag, top))
    return render.scaled_map(
        mag, scale, image=image, upscale=SANITY_MAP_PX, bar_width=SANITY_MAP_PX, font_size=SANITY_FONT_PX
    )


def sanity_tokens_html(values: Any, words: Sequence[str]) -> str:
    """One text map of the sanity check: the words coloured by its signed values on its own scale (the 99th
    percentile of |value|), with the colour bar below."""
    v = np.asarray(values, dtype=np.float32).reshape(-1)
    top = robust_scale(v) or 1.0
    scale = ColourScale(-top, top, "attribution, this map's own scale", True, clipped=is_clipped(v, top))
    return scaled_tokens_html(list(words), v, scale)


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def _na_reason(bundle: ModelBundle, method: str, metric: str, errors: dict[str, str]) -> str:
    """Why `metric` was not computed for `method`."""
    if f"{method}: {metric}" in errors:
        return "n/a: it failed (see the message above)"
    if metric == "completeness_gap":
        return "n/a: no declared total"
    if metric in ("pointing_game", "energy_in_mask"):
        return "n/a: no object masks"
    if metric in ("rationale_pointing", "rationale_energy"):
        return "n/a: no rationales"
    return f"n/a: does not apply to {method} on {bundle.modality} inputs"


def _undefined_reason(metric: str, undefined: int, n: int, constant: int) -> str:
    if metric == "energy_in_mask" or metric == "rationale_energy":
        why = "no positive attribution"
    elif metric == "completeness_gap":
        why = "f(x) equals f(reference)"
    else:
        why = "undefined"
    tail = f"; {constant} of {n} maps constant" if constant else ""
    if undefined == n:
        return f"n/a: {why} for every input{tail}"
    return f"{undefined} of {n} inputs without a value ({why}){tail}"


def summarise(
    bundle: ModelBundle,
    per_input: dict[str, dict[str, list[float]]],
    columns: Sequence[str],
    constant_maps: dict[str, int],
    errors: dict[str, str],
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """The long (method, metric) table of spreads with reasons, and the best method(s) per metric."""
    from xaidash.explainers.metrics.spread import spread

    rows: list[dict[str, Any]] = []
    for m, values in per_input.items():
        for c in columns:
            if c not in values:
                rows.append({"method": m, "metric": c, **_empty(0), "reason": _na_reason(bundle, m, c, errors)})
                continue
            if c == "seconds":  # one timing for the whole batch: no spread
                v = float(values[c][0])
                rows.append({"method": m, "metric": c, **_empty(1), "mean": v, "valid": 1, "reason": ""})
                continue
            s = spread(values[c])
            reason = _undefined_reason(c, s.undefined, s.n, constant_maps.get(m, 0)) if s.undefined else ""
            rows.append(
                {
                    "method": m,
                    "metric": c,
                    "mean": s.mean,
                    "low": s.low,
                    "high": s.high,
                    "minimum": s.minimum,
                    "maximum": s.maximum,
                    "n": s.n,
                    "valid": s.valid,
                    "undefined": s.undefined,
                    "reason": reason,
                }
            )
    summary = pd.DataFrame(rows, columns=["method", "metric", *_empty(0), "reason"])
    best: dict[str, list[str]] = {}
    for c in columns:
        part = summary[(summary.metric == c) & summary["mean"].notna()]
        if len(part) < 2:
            continue
        lower = METRICS.get(c, ("", "higher is better"))[1].startswith("lower")
        target = part["mean"].min() if lower else part["mean"].max()
        best[c] = [str(m) for m in part[np.isclose(part["mean"], target, rtol=1e-9, atol=1e-12)].method]
    return summary, best


def _empty(n: int) -> dict[str, Any]:
    nan = float("nan")
    return {"mean": nan, "low": nan, "high": nan, "minimum": nan, "maximum": nan, "n": n, "valid": 0, "undefined": n}


class _Ticker:
    """Compare's progress as a fraction of its units of work: two per method (explained, scored), one per method for
    the sanity check, and one for the agreement."""

    def __init__(self, report: Progress | None, units: int) -> None:
        self.report = report or (lambda fraction, message: None)
        self.units, self.done = units, 0

    def at(self, done: int, message: str) -> None:
        self.done = done
        self.report(min(1.0, done / self.units), message)

    def tick(self, message: str) -> None:
        self.at(self.done + 1, message)


@dataclass
class _Scored:
    """Each method's explanation of the sample, its per-input scores, and what failed."""

    explanations: dict[str, Explanation] = field(default_factory=dict)
    per_input: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    constant_maps: dict[str, int] = field(default_factory=dict)


def _explain_and_score(
    bundle: ModelBundle,
    sample: Sample,
    methods: Sequence[str],
    params: dict[str, dict[str, Any]],
    how: Scoring,
    ticker: _Ticker,
    **explain: Any,
) -> _Scored:
    """Every method explained and scored as one session (targets: the predicted classes); a method that fails is
    kept as its error and the others go on. `explain`: the background, batch size and seed."""
    from xaidash.explainers import metrics as M

    index = {m: j for j, m in enumerate(methods)}

    def started(fraction: float, message: str) -> None:
        if fraction < 1.0:  # the session's closing call: the steps after it say their own
            m = methods[round(fraction * len(methods))]
            ticker.at(2 * index[m], f"Explaining with {m}…")

    def finished(outcome: Outcome[ScoredExplanation]) -> None:
        ticker.done = 2 * index[outcome.method] + 2
        if outcome.ok:
            ticker.at(ticker.done, f"Scored {outcome.method}")

    results = explain_session(
        bundle,
        sample.raw,
        {m: params.get(m, {}) for m in methods},
        scoring=how,
        progress=started,
        done=finished,
        **explain,
    )
    out = _Scored()
    for r in results:
        e = r.explanation
        if e is None:
            out.errors[r.method] = r.error or ""
            continue
        out.explanations[r.method] = e
        out.constant_maps[r.method] = sum(1 for i in range(len(e)) if M.is_constant(e.item(i)))
        out.per_input[r.method] = {k: list(v) for k, v in r.metrics.items()} | {"seconds": [e.seconds] * len(e)}
        out.errors.update({f"{r.method}: {name}": msg for name, msg in r.metric_errors.items()})
    return out


def _means(per_input: dict[str, dict[str, list[float]]]) -> pd.DataFrame:
    """methods x metrics: each metric's mean over the inputs (the one timing of the batch for seconds)."""
    columns = [c for c in METRICS if any(c in v for v in per_input.values())]
    rows = {
        m: {c: (_mean(v[c]) if c != "seconds" else float(v[c][0])) if c in v else float("nan") for c in columns}
        for m, v in per_input.items()
    }
    table = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    table.index.name = "method"
    return table


def _sanity(
    bundle: ModelBundle,
    sample: Sample,
    scored: _Scored,
    params: dict[str, dict[str, Any]],
    background: torch.Tensor | None,
    inputs: int | None,
    steps: int,
    **explain: Any,
) -> Any:
    """The cascading randomisation test on the first `inputs` inputs (None: all of them, and then the trained
    model's maps are reused); its failures join `scored.errors`."""
    from xaidash.explainers import metrics as M

    k = len(sample) if inputs is None else max(1, min(inputs, len(sample)))
    result = M.cascading_randomization(
        bundle,
        sample.raw[:k],
        list(scored.explanations),
        params={m: params.get(m, {}) for m in scored.explanations},
        max_steps=steps,
        trained=scored.explanations if k == len(sample) and background is None else None,
        **explain,
    )
    for m, msg in result.errors.items():
        scored.errors[f"{m}: sanity check"] = msg
    return result


def compare_methods(
    bundle: ModelBundle,
    sample: Sample,
    methods: Sequence[str],
    *,
    params: dict[str, dict[str, Any]] | None = None,
    background: torch.Tensor | None = None,
    steps: int = CURVE_STEPS,
    sanity: bool = True,
    sanity_inputs: int | None = SANITY_INPUTS,
    sanity_steps: int = 3,
    batch_size: int = 256,
    seed: int = 0,
    progress: Progress | None = None,
    metrics: Collection[str] | None = None,
) -> Comparison:
    """Explain `sample` with every method (targets: the predicted classes), score each explanation, measure
    how much the methods agree, and (optionally) run the cascading randomisation test on the first
    `sanity_inputs` inputs (None: all of them; the trained model's maps are then reused). `metrics`: which of the
    metrics the registry declares for Compare to score (None: every one).

    A method that fails is reported in `errors` and left out of the tables; the others go on.
    """
    from xaidash.explainers import metrics as M

    if not methods:
        raise ExplainError("Pick at least one method to compare.")
    for m in methods:
        get_method(m, bundle.modality).check(bundle)
    params = params or {}
    ticker = _Ticker(progress, 2 * len(methods) + (len(methods) if sanity else 0) + 1)
    t0 = time.perf_counter()
    probabilities = bundle.predict_proba(sample.raw).numpy()
    # page="compare": the costly metrics too (robustness, ROAD, random logit), as the metric registry declares them
    chosen = None if metrics is None else frozenset(metrics)
    how = Scoring(page="compare", truth=GroundTruth(sample.masks, sample.rationales), steps=steps, metrics=chosen)
    scored = _explain_and_score(
        bundle, sample, methods, params, how, ticker, background=background, batch_size=batch_size, seed=seed
    )
    table = _means(scored.per_input)
    summary, best = summarise(bundle, scored.per_input, list(table.columns), scored.constant_maps, scored.errors)
    agreement = M.agreement_matrix(scored.explanations) if len(scored.explanations) >= 2 else None
    ticker.tick("Agreement computed")
    sanity_result = None
    if sanity and scored.explanations:
        ticker.at(ticker.done, "Sanity check: randomising the model's layers…")
        sanity_result = _sanity(
            bundle, sample, scored, params, background, sanity_inputs, sanity_steps, batch_size=batch_size, seed=seed
        )
        ticker.done += len(methods) - 1
        ticker.tick("Sanity check done")
    ticker.report(1.0, "Done")
    return Comparison(
        list(methods),
        scored.explanations,
        scored.per_input,
        table,
        agreement,
        sanity_result,
        scored.errors,
        sample,
        seconds=time.perf_counter() - t0,
        summary=summary,
        constant_maps=scored.constant_maps,
        best=best,
        probabilities=probabilities,
        params={m: dict(params.get(m, {})) for m in methods},
        steps=steps,
        seed=seed,
    )


def comparison_report(
    bundle: ModelBundle, run_id: str, result: Comparison, extra: dict[str, str] | None = None
) -> ExplainReport:
    """The comparison as an explain report: every input of the sample with the model's predictions, every
    method's map of it (each on its own scale, as the Explain page's default) with its metrics, the settings and
    the run. Methods that failed keep their error."""
    sample = result.sample
    names = [f"test #{i}" for i in sample.indices] or [f"input {j + 1}" for j in range(len(sample))]
    inputs = [(names[j], sample.raw[j], sample.labels[j]) for j in range(len(sample))]
    probs = result.probabilities if result.probabilities is not None else bundle.predict_proba(sample.raw).numpy()
    results = []
    for m in result.methods:
        e = result.explanations.get(m)
        errors = {k.split(": ", 1)[1]: v for k, v in result.errors.items() if k.startswith(f"{m}: ")}
        results.append(
            MethodResult(
                m, e, result.per_input.get(m, {}), errors, error=None if e is not None else result.errors.get(m)
            )
        )
    settings = ReportSettings(
        methods=[
            MethodSetting(
                m,
                get_method(m, bundle.modality).label,
                result.explanations[m].params if m in result.explanations else result.params.get(m, {}),
            )
            for m in result.methods
        ],
        target=None,
        target_name="predicted class",
        display=adapter_of(bundle.modality).display(),
        metrics=True,
        steps=result.steps,
        seed=result.seed,
        extra=dict(extra or {}),
    )
    labels = {m.id: m.label for m in settings.methods}
    ranking = comparison_ranking(result.per_input, result.summary, labels=labels, seed=result.seed)
    notes = ranking_notes(ranking, labels)
    return session_report(bundle, run_id, inputs, probs, results, settings, notes=notes, source="Compare")
