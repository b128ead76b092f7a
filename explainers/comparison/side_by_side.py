"""Two models side by side: which runs take the same input as a given run (and why the others do not),
loading a run at one epoch's checkpoint, both models' predictions on the same inputs, and the same
method's maps of both on colour scales that compare like with like.

Plain functions for the "Side by side" page (and anyone else): no Streamlit here.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from xaidash.data.modalities import modality_of
from xaidash.data.registry import RegressionTarget, Split
from xaidash.explainers.comparison.across_training import epoch_validation
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.figures.legend import map_legend
from xaidash.explainers.figures.report import (
    ExplainReport,
    MethodSetting,
    ReportInput,
    ReportSettings,
    RunInfo,
    build_report,
    top_predictions,
)
from xaidash.explainers.figures.scales import robust_scale
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.registry import MethodSpec, get_method, list_methods
from xaidash.explainers.session import Cache, Lease, MethodResult, explain_session
from xaidash.models.bundle import ModelBundle
from xaidash.models.runs.quality import run_warning
from xaidash.models.runs.store import USABLE_STATES, WEIGHTS, Run, list_runs, load_bundle, run_liveness

FAINT = 0.2  # on a shared scale, a map whose largest |value| is below this fraction of it is nearly invisible


@dataclass(frozen=True)
class InputSpec:
    """What a run's model reads: images of one shape or texts, from which data set (None: an imported model
    with no data set linked), with which classes."""

    modality: str
    input_shape: tuple[int, ...]
    dataset: str | None
    classes: tuple[str, ...]

    def kind(self) -> str:
        """'3x32x32 images' or 'texts', in the modality's words."""
        return modality_of(self.modality).describe(self.input_shape)

    def describe(self) -> str:
        """'3x32x32 images of shapes', 'texts of cues', '3x224x224 images (no data set)'."""
        return f"{self.kind()} of {self.dataset}" if self.dataset else f"{self.kind()} (no data set)"


def input_spec(run: Run) -> InputSpec:
    """The run's input spec, read from its config alone (no model is built)."""
    config = run.config()
    info = run.info
    return InputSpec(
        modality=str(config.get("modality") or info.modality),
        input_shape=tuple(int(v) for v in info.input_shape),
        dataset=config.get("dataset"),
        classes=tuple(info.classes),
    )


def unusable_reason(run: Run) -> str | None:
    """None when the run holds a model worth opening (`Run.usable`: weights that stay put and are finite, as the
    dashboard's run selection asks); else why not, in a few words."""
    if run.usable:
        return None
    state = run_liveness(run).state  # a 'running' run whose process is gone is interrupted, not training
    if not run.file(WEIGHTS).exists():
        return f"has no weights yet (state: {state})"
    if state not in USABLE_STATES:
        return "is still training" if state == "running" else f"is {state}"
    return "holds NaN or infinite weights"


def _classes_text(classes: Sequence[str]) -> str:
    shown = ", ".join(classes[:6]) + (", ..." if len(classes) > 6 else "")
    return f"{len(classes)} classes ({shown})"


def incompatibility(a: Run, b: Run) -> str | None:
    """None when run `b` takes the same input as run `a`, so both can be fed and compared on the same inputs;
    else one short reason, phrased about `b` ('takes texts, not 3x32x32 images').

    The rules: the same modality; for images the same input shape; the same data set when both have one (its
    gallery and true labels must mean the same to both); without a data set on one side, the same classes in
    the same order. `b` must hold weights that stay put (see `unusable_reason`)."""
    try:
        sa, sb = input_spec(a), input_spec(b)
    except Exception as e:  # noqa: BLE001 - a damaged run is listed with why, never a crash
        return f"is unreadable ({e})"
    if sb.modality != sa.modality:
        return f"takes {sb.kind()}, not {sa.kind()}"
    inputs = modality_of(sa.modality)
    if not inputs.same_inputs(sa.input_shape, sb.input_shape):
        return f"takes {sb.kind()}, not {sa.kind()} ({inputs.label} are never resized behind your back)"
    if sa.dataset and sb.dataset and sa.dataset != sb.dataset:
        return f"was trained on {sb.dataset}, not {sa.dataset}: its classes and test set differ"
    if sb.classes != sa.classes:
        return f"predicts {_classes_text(sb.classes)}, not the same {_classes_text(sa.classes)}"
    return unusable_reason(b)


# ---- which runs to offer first -------------------------------------------------------------------------------
GOOD, UNMEASURED, POOR = 0, 1, 2  # a run's quality rank: measured and fine; no accuracy measured here; flagged
POOR_FLAG = "⚠ poor"
UNMEASURED_FLAG = "accuracy not measured"


@dataclass(frozen=True)
class RankedRun:
    """A run as a partner of another: whether it reads the same data set and modality and is the same model spec,
    whether it holds weights worth opening (`Run.usable`), and its quality (rank and measured accuracy)."""

    run: Run
    same_data: bool
    quality: int  # GOOD, UNMEASURED or POOR
    warning: str | None  # models/runs/quality.run_warning's sentence for a POOR run
    same_model: bool = False
    usable: bool = True
    accuracy: float | None = None  # the test accuracy (validation when no test was run), None when never measured
    facts: tuple[str | None, str | None, str | None] = (None, None, None)  # (data set, modality, model spec)

    @property
    def flag(self) -> str:
        """'⚠ poor' / 'accuracy not measured' / '': what a label offering this run adds."""
        return {POOR: POOR_FLAG, UNMEASURED: UNMEASURED_FLAG}.get(self.quality, "")

    def beside(self, anchor: tuple[str | None, str | None, str | None] | None) -> RankedRun:
        """This run as a partner of a run with `anchor`'s facts (None: no anchor, every run counts as the same data)."""
        same = anchor is None or (anchor[0] is not None and self.facts[:2] == anchor[:2])
        same_model = anchor is not None and same and self.facts[2] is not None and self.facts[2] == anchor[2]
        return replace(self, same_data=same, same_model=same_model)

    def preference(self) -> tuple[bool, bool, int, bool, float]:
        """The sort key of `rank_partners` (smaller first): the same data set and modality; usable; good before
        unmeasured before poor; the same model spec; the higher measured accuracy."""
        acc = self.accuracy if self.accuracy is not None and math.isfinite(self.accuracy) else -1.0
        return (not self.same_data, not self.usable, self.quality, not self.same_model, -acc)


def _facts(run: Run) -> tuple[str | None, str | None, str | None]:
    """(data set, modality, model spec) from the run's config; (None, None, None) for a damaged run."""
    try:
        config = run.config()
    except Exception:  # noqa: BLE001 - a damaged run matches nothing
        return None, None, None
    return config.get("dataset"), config.get("modality"), config.get("model")


def _accuracy(summary: dict[str, Any]) -> float | None:
    acc = summary.get("test_acc")
    acc = summary.get("val_acc") if acc is None else acc
    return float(acc) if isinstance(acc, int | float) else None


def run_quality(run: Run) -> tuple[int, str | None]:
    """(rank, warning): POOR with `quality.run_warning`'s sentence (near chance, far below its recipe, failed,
    NaN weights); UNMEASURED for a run with no accuracy measured here (an import), GOOD otherwise."""
    warning = run_warning(run)
    if warning:
        return POOR, warning
    try:
        summary = run.summary()
    except Exception:  # noqa: BLE001 - unreadable: nothing known about it
        return UNMEASURED, None
    return (GOOD if _accuracy(summary) is not None else UNMEASURED), None


def ranked_run(run: Run) -> RankedRun:
    """Everything `rank_partners` weighs about one run, read once (as the partner of no run in particular)."""
    quality, warning = run_quality(run)
    try:
        accuracy = _accuracy(run.summary())
    except Exception:  # noqa: BLE001 - unreadable: never measured as far as we know
        accuracy = None
    return RankedRun(run, True, quality, warning, usable=run.usable, accuracy=accuracy, facts=_facts(run))


def rank_partners(anchor: Run | None, runs: Sequence[Run]) -> list[RankedRun]:
    """`runs` (less `anchor`) in the order to offer them beside `anchor`, by `RankedRun.preference`: those of the
    same data set and modality first; within them the usable runs (`Run.usable`); then the runs measured good,
    then those never measured (imports), then the poor ones; within each, the same model spec as `anchor` first
    and the higher measured accuracy first; newest first otherwise (the order of `runs`, as `list_runs` gives it).
    With no anchor every run counts as the same data. The one ranking Side by side's Model B and Train's Compare
    runs use for their defaults."""
    key = _facts(anchor) if anchor is not None else None
    ranked = [ranked_run(r).beside(key) for r in runs if anchor is None or r.path.resolve() != anchor.path.resolve()]
    return sorted(ranked, key=RankedRun.preference)  # stable: newest first among equals


def default_comparison(
    runs: Sequence[Run], anchor: Run | None = None, ranked: Sequence[RankedRun] | None = None
) -> list[Run]:
    """The two runs to compare by default: `anchor` (any run, a stopped or interrupted one too; else the best-ranked
    run that has a partner of its own data set and modality) and its best partner by `rank_partners`' order among
    the usable runs of the same data set and modality (a usable good run of the same model spec with the highest
    accuracy, then other models by quality and accuracy); just the anchor when it has none (a text run is never
    paired with an image run), [] when there are no runs. `ranked`: `rank_partners(None, runs)` when the caller
    has it already (each run's quality is read once either way)."""
    ranked = list(rank_partners(None, runs) if ranked is None else ranked)
    known = {r.run.path.resolve(): r for r in ranked}

    def best_partner(run: Run) -> Run | None:
        own = known[run.path.resolve()].facts if run.path.resolve() in known else _facts(run)
        if own[0] is None:
            return None
        beside = [r.beside(own) for p, r in known.items() if p != run.path.resolve()]
        best = min(beside, key=RankedRun.preference, default=None)
        return best.run if best is not None and best.same_data and best.usable else None

    if anchor is None:
        for candidate in ranked:
            if candidate.quality == POOR or not candidate.usable:
                break
            partner = best_partner(candidate.run)
            if partner is not None:
                return [candidate.run, partner]
        anchor = runs[0] if runs else None
    if anchor is None:
        return []
    partner = best_partner(anchor)
    return [anchor] if partner is None else [anchor, partner]


@dataclass(frozen=True)
class ModelChoice:
    """A model to compare: a run's final weights (`epoch` None) or its weights after one epoch."""

    run: Run
    epoch: int | None = None
    note: str = ""  # e.g. 'val acc 83.0%' for an epoch checkpoint
    flag: str = ""  # a run's RankedRun.flag: '⚠ poor', 'accuracy not measured' or ''
    warning: str | None = None  # a poor run's sentence (models/runs/quality.run_warning)

    @property
    def key(self) -> str:
        """Unique per run folder and weights: 'path@final' or 'path@epoch3'."""
        return f"{self.run.path.resolve()}@{'final' if self.epoch is None else f'epoch{self.epoch}'}"


@dataclass
class Partners:
    """The models that can stand beside a run: the run at its saved epochs (other than its final weights),
    the other runs that take the same input, and the runs that cannot, each with why."""

    epochs: list[ModelChoice]
    runs: list[ModelChoice]
    incompatible: list[tuple[Run, str]]

    @property
    def choices(self) -> list[ModelChoice]:
        return [*self.runs, *self.epochs]


def epoch_choices(run: Run) -> list[ModelChoice]:
    """The run at each saved epoch (checkpoints/epoch_NNN.safetensors), newest first, leaving out the epoch whose
    weights are the final ones (the last complete epoch of a run that did not stop inside an epoch)."""
    summary = run.summary()
    done = summary.get("epochs_done")
    final_epoch = done if done and not summary.get("partial_steps") else None
    val = epoch_validation(run)
    out = []
    for epoch, _ in reversed(run.checkpoints()):
        if epoch == final_epoch:
            continue
        note = f"val acc {100 * val[epoch]:.1f}%" if epoch in val else ""
        out.append(ModelChoice(run, epoch, note))
    return out


def partners(run: Run, runs: Sequence[Run] | None = None) -> Partners:
    """Who can be compared with `run` (see `incompatibility`); `runs` defaults to every run under the runs root.
    The runs that can are ranked by `rank_partners` (same data set first, good before unmeasured before poor),
    each flagged when poor or unmeasured, so the first choice is the best partner."""
    others = [r for r in (list_runs() if runs is None else runs) if r.path.resolve() != run.path.resolve()]
    bad: list[tuple[Run, str]] = []
    compatible = []
    for r in others:
        reason = incompatibility(run, r)
        if reason is None:
            compatible.append(r)
        else:
            bad.append((r, reason))
    ok = [ModelChoice(r.run, flag=r.flag, warning=r.warning) for r in rank_partners(run, compatible)]
    try:
        epochs = epoch_choices(run)
    except Exception:  # noqa: BLE001 - unreadable metrics or checkpoints: no epochs to offer
        epochs = []
    return Partners(epochs=epochs, runs=ok, incompatible=bad)


def load_choice(choice: ModelChoice, device: str | None = "auto") -> ModelBundle:
    """The chosen model as a bundle: the run's final weights, or those after `choice.epoch`."""
    return load_bundle(choice.run, device=device, epoch=choice.epoch)


# ---- methods and scales ------------------------------------------------------------------------------


def common_methods(a: ModelBundle, b: ModelBundle) -> tuple[list[MethodSpec], dict[str, str]]:
    """The methods that apply to both models (registry order), and {label: why not} for those that apply to
    one model at most ('A: ...', 'B: ...' or 'neither: ...' when the reason is the same)."""
    both: list[MethodSpec] = []
    skipped: dict[str, str] = {}
    for spec in list_methods(a.modality):
        why = {
            name: (spec.applies(m) or "not supported").rstrip(".")
            for name, m in (("A", a), ("B", b))
            if not spec.supports(m)
        }
        if not why:
            both.append(spec)
        elif len(why) == 2 and why["A"] == why["B"]:
            skipped[spec.label] = f"neither: {why['A']}"
        else:
            skipped[spec.label] = "; ".join(f"{name}: {text}" for name, text in why.items())
    return both, skipped


def shares_units(spec: MethodSpec) -> bool:
    """Whether one method's maps of two models that take the same input are in the same units, so one colour
    scale compares like with like: values that add up to the explained output (IG, DeepLift, SHAP), changes of
    that output when a region is hidden (occlusion, LIME), its sensitivity to each input element (saliency), a
    fitted mask's weights (GNNExplainer, 0-1) or attention weights. Maps in relative units (the CAM family's weighted activations of each model's own
    layer; signed gradient heuristics) get one scale per model: `legend.map_legend` says 'relative units'."""
    if spec.output == "attention" or spec.completeness is not None or spec.family in ("perturbation", "mask"):
        return True
    return spec.family == "gradient" and not spec.signed


@dataclass(frozen=True)
class RowScale:
    """The colour scale of one (input, method) row: the value that gets the strongest colour for model A's map
    and for model B's (as the Explain page: a map's 99th percentile of |value|, so a few extreme values do not
    wash out the rest), whether they share it, and a sentence stating it."""

    a: float
    b: float
    shared: bool
    statement: str


def _own_scale(values: np.ndarray | None) -> float:
    return 0.0 if values is None or not np.size(values) else robust_scale(values)


def row_scale(
    spec: MethodSpec,
    map_a: np.ndarray | None,
    map_b: np.ndarray | None,
    want_shared: bool,
    modality: str = "image",
    target: RegressionTarget | None = None,
) -> RowScale:
    """One scale for both maps when asked and their units match (`shares_units`), else one per model (a map
    that failed is None). A zero scale (an all-zero map) is returned as 0; renderers draw such a map in the
    centre colour."""
    sa, sb = _own_scale(map_a), _own_scale(map_b)
    units = map_legend(spec, modality, target=target).units  # a number to predict: in its units
    if want_shared and shares_units(spec):
        s = max(sa, sb)
        statement = f"one scale for both models ({units}, ±{s:.3g})"
        weaker, small = ("B", sb) if sb < sa else ("A", sa)
        if s > 0 and small < FAINT * s:
            statement += f"; model {weaker}'s map reaches {small / s:.0%} of it (per model shows its pattern)"
        return RowScale(s, s, True, statement)
    why = f" ({units}: not comparable between models)" if want_shared and not shares_units(spec) else ""
    return RowScale(sa, sb, False, f"each model on its own scale{why}")


# ---- predictions and explanations ---------------------------------------------------------------------


def top_classes(probs: np.ndarray, classes: Sequence[str], k: int = 3) -> list[tuple[str, float]]:
    """The k most probable classes of one input with their probabilities (`report.top_predictions`)."""
    return [(t.name, t.probability or 0.0) for t in top_predictions(probs, classes, k)]


def disagreements(probs_a: np.ndarray, probs_b: np.ndarray) -> np.ndarray:
    """(N,) bool: where the two models predict different classes."""
    return np.asarray(probs_a).argmax(1) != np.asarray(probs_b).argmax(1)


def predict_both(a: ModelBundle, b: ModelBundle, raw: torch.Tensor | Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities (N, classes) of both models for the same raw inputs."""
    return a.predict_proba(raw).numpy(), b.predict_proba(raw).numpy()


def split_predictions(bundle: ModelBundle, split: Split, limit: int | None = None) -> np.ndarray:
    """Class probabilities (N, classes) of one model for the first `limit` samples of a data set split (model A's
    test split for model B, whose own data set may be none: an imported model that takes the same input)."""
    n = len(split) if limit is None else min(len(split), limit)
    return bundle.predict_proba(bundle.adapter.items(split, range(n))).numpy()


@dataclass
class PairExplanation:
    """One method's explanation of the same inputs by model A and by model B (None with an error where it failed)."""

    method: str
    a: Explanation | None
    b: Explanation | None
    error_a: str | None = None
    error_b: str | None = None


def explain_one(
    bundle: ModelBundle,
    raw: torch.Tensor | Sequence[str],
    method: str,
    target: int | None = None,
    params: dict[str, Any] | None = None,
    seed: int = 0,
    *,
    run: str = "A",
    cache: Cache | None = None,
    key: Hashable | None = None,
    lease: Lease[ModelBundle] | None = None,
) -> MethodResult:
    """One model's maps as a session of one method (`explain_session`, the Explain page's path), without metrics;
    `target` None explains each input's predicted class. A failure is kept as its message (and exception); with a
    `cache`, the maps are kept under `key`, computed on `lease(method)` when given."""
    (result,) = explain_session(
        bundle,
        raw,
        {method: dict(params or {})},
        target=target,
        seed=seed,
        cache=cache,
        key=None if key is None else (lambda _method: key),
        lease=lease,
        run=run,
    )
    return result


def explain_pair(
    a: ModelBundle,
    b: ModelBundle,
    raw: torch.Tensor | Sequence[str],
    method: str,
    target: int | None = None,
    params: dict[str, Any] | None = None,
    seed: int = 0,
) -> PairExplanation:
    """The same method, parameters, seed and inputs on both models; `target` None: each model explains its own
    predicted class. A failure on one model is kept as its message and the other's maps are still returned."""
    ra, rb = (explain_one(bundle, raw, method, target, params, seed, run=k) for k, bundle in (("A", a), ("B", b)))
    return PairExplanation(method, ra.explanation, rb.explanation, ra.error, rb.error)


def pair_report(
    runs: tuple[RunInfo, RunInfo],
    inputs: Sequence[tuple[str, Any, int | float | None]],
    probs: tuple[np.ndarray, np.ndarray],
    pairs: Sequence[PairExplanation],
    *,
    shared: bool,
    display: str = "overlay",
    target: int | None = None,
    upscale: int = 320,
    labels: dict[str, str] | None = None,
    info: Any = None,
) -> ExplainReport:
    """Both models' maps of the same inputs as one report (runs keyed 'A' and 'B'), every (input, method) row on
    the scales `row_scale` picks (one for both models where asked and the units match), each map's colour bar
    naming its model. `inputs`: (name, raw input, true class or None); `probs`: each model's probabilities."""
    run_a, run_b = runs
    classes = run_a.classes
    adapter = adapter_of(run_a.modality)
    rows = [
        ReportInput.of(
            name,
            raw,
            label,
            {
                run_a.key: top_predictions(probs[0][i], classes, target=run_a.regression),
                run_b.key: top_predictions(probs[1][i], classes, target=run_b.regression),
            },
            cells=None if info is None else adapter.input_cells(info, raw),
        )
        for i, (name, raw, label) in enumerate(inputs)
    ]
    modality = run_a.modality
    results: list[MethodResult] = []
    scales: dict[tuple[str, int, str], tuple[float, str]] = {}
    methods = []
    for pair in pairs:
        spec = get_method(pair.method, modality)
        label = (labels or {}).get(pair.method, spec.label)
        params = (pair.a or pair.b).params if (pair.a or pair.b) is not None else {}  # type: ignore[union-attr]
        methods.append(MethodSetting(pair.method, label, dict(params)))
        results.append(MethodResult(pair.method, pair.a, error=pair.error_a, run=run_a.key))
        results.append(MethodResult(pair.method, pair.b, error=pair.error_b, run=run_b.key))
        for i in range(len(rows)):
            rs = row_scale(
                spec,
                None if pair.a is None else pair.a.item(i),
                None if pair.b is None else pair.b.item(i),
                shared,
                modality,
                run_a.regression,
            )
            scales[(run_a.key, i, pair.method)] = (rs.a, f"model {run_a.key}")
            scales[(run_b.key, i, pair.method)] = (rs.b, f"model {run_b.key}")
    settings = ReportSettings(
        methods=methods,
        target=target,
        target_name=run_a.regression.name
        if run_a.regression is not None
        else "each model's own prediction"
        if target is None
        else classes[target],
        scale_mode="percentile",
        display=display,
        extra={"colour scale": "shared where the units match" if shared else "per model"},
    )
    return build_report([run_a, run_b], rows, results, settings, source="Side by side", scales=scales, upscale=upscale)
