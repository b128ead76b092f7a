"""The quality metrics xaidash scores a map with, each one registration with its declared facts and how it is
computed.

Pages, reports and the CLI list metrics from here (through `scoring.METRICS`, its legacy view), never by name:
title, which way is better, what it measures (worded by modality: {unit} / {units}), the values it can take,
what it costs and where it is shown. Cheap metrics (a few operations on the map) are scored wherever a map is
scored; costly ones (more explanations or forward passes per input) only where the page asks for them (Compare).

Each metric computes itself from one explanation (`MetricSpec.compute`, given a `MetricContext`) and says whether
it applies to it (`applies`: the ground truth it needs was given, the method declares completeness). Whether it can
apply to a model at all is its `for_model` (a random other class needs two classes: not a model that predicts a
number); `metrics_for(page, modality, bundle)` leaves out those that cannot, so Compare does not offer them. Which
metrics apply to a modality at all is declared by its adapter (`ExplainingModality.metrics`), which also gives what differs
between modalities (its deletion curve, how two maps are compared); `scoring.input_metrics` is a loop over them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import ExplainError
from xaidash.data.modalities import GroundTruth
from xaidash.data.specs import Registry, Spec
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.metrics.completeness import completeness_gap
from xaidash.explainers.metrics.complexity import complexity, sparseness
from xaidash.explainers.metrics.graph_truth import (
    FIDELITY_SHARE,
    characterization,
    edge_auc,
    graph_fidelity,
    has_edge_truth,
)
from xaidash.explainers.metrics.ground_truth import energy_in_mask, pointing_game, rationale_energy, rationale_pointing
from xaidash.explainers.metrics.random_logit import random_logit
from xaidash.explainers.metrics.road import ROAD_STEPS, road_curve
from xaidash.explainers.metrics.robustness import infidelity_score
from xaidash.explainers.metrics.stability import COMPARE_NEIGHBOURS, Stability, stability
from xaidash.explainers.metrics.truth_columns import truth_recall
from xaidash.explainers.modalities import ExplainingModality, adapter_of
from xaidash.explainers.perturbation_curves import CURVE_STEPS
from xaidash.explainers.registry import MethodSpec
from xaidash.models.bundle import ModelBundle

# Where a metric is scored: "explain" (the Explain page, `xaidash explain --metrics`, the whole-data-set run and
# its report, which all score through `scoring.explain_and_score`) and "compare" (the Compare page).
PAGES = ("explain", "compare")


@dataclass(frozen=True)
class MetricContext:
    """One explanation as the metrics score it: the model, its modality's `adapter`, the inputs `raw` explained,
    the `explanation` and its `method`'s spec, the ground truth given (masks, rationales), the `background` and
    `seed` `explain` got (None: the default background, as `explain` loads it), the curves' `steps`, and `shared`:
    what one scoring call computes once for several metrics (both robustness scores come from one recomputation
    on the same neighbours)."""

    bundle: ModelBundle
    adapter: ExplainingModality
    raw: Any
    explanation: Explanation
    method: MethodSpec
    truth: GroundTruth = field(default_factory=GroundTruth)
    background: torch.Tensor | None = None
    steps: int = CURVE_STEPS
    seed: int = 0
    batch_size: int = 256
    shared: dict[str, Any] = field(default_factory=dict)


def _always(ctx: MetricContext) -> bool:
    return True


def _any_model(bundle: ModelBundle) -> bool:
    return True


@dataclass(frozen=True)
class MetricPasses:
    """What scoring one input costs beyond its map, declared per input: `forward` rows through the model without
    gradients, `backward` rows with them (forward + backward), `imputed` images filled by ROAD's noisy linear
    imputation, and `maps` explanations of the input recomputed with the map's own method (each costs what the
    method's map did, so IG's cost scales them). `shared`: metrics with the same key compute their recomputed maps
    once between them (max-sensitivity and local Lipschitz read the same neighbours). Compare prices these with
    the model's measured time per row (`comparison.estimate`)."""

    forward: float = 0.0
    backward: float = 0.0
    imputed: float = 0.0
    maps: float = 0.0
    shared: str = ""


def _map_only(steps: int) -> MetricPasses:
    return MetricPasses()


@dataclass(frozen=True)
class MetricSpec(Spec):
    """One metric's declared facts. `better`: 'lower is better' / 'higher is better'; `meaning`: what one value
    says, with {unit}/{units} for the modality's word; `unit`: the unit of a value ('' when a share or
    probability); `value_range`: (lowest, highest), None where open; `cost`: 'cheap' (from the map alone) or
    'costly' (recomputes maps or runs the model); `pages`: where it is scored. `score(ctx)`: its values for
    the explanation of a `MetricContext`, one per input; `when(ctx)`: whether it applies to that explanation;
    `for_model(bundle)`: whether it can apply to the model at all (what Compare offers)."""

    id: str
    title: str
    better: str
    meaning: str
    family: str
    value_range: tuple[float | None, float | None] = (None, None)
    unit: str = ""
    cost: str = "cheap"
    pages: tuple[str, ...] = PAGES
    score: Callable[[MetricContext], Any] = field(kw_only=True)
    when: Callable[[MetricContext], bool] = field(default=_always, kw_only=True)
    for_model: Callable[[ModelBundle], bool] = field(default=_any_model, kw_only=True)
    # the curves' steps -> what it costs per input beyond the map
    passes: Callable[[int], MetricPasses] = field(default=_map_only, kw_only=True)

    @property
    def lower_is_better(self) -> bool:
        return self.better.startswith("lower")

    @property
    def recomputes_maps(self) -> bool:
        """Whether scoring a map explains its input again with the map's method: its cost is a multiple of the
        method's own (IG's max-sensitivity took 23 s where Grad-CAM's took 0.3 s), so Compare offers it unticked."""
        return self.passes(CURVE_STEPS).maps > 0

    def applies(self, ctx: MetricContext) -> bool:
        """Whether this metric can score `ctx`'s explanation (its model's outputs fit, its ground truth given, its
        method's promise made)."""
        return self.for_model(ctx.bundle) and self.when(ctx)

    def compute(self, ctx: MetricContext) -> list[float]:
        """One value per explained input (NaN where it is undefined for that input)."""
        values = np.asarray(self.score(ctx), dtype=np.float64).reshape(-1)
        return [float(v) for v in values][: len(ctx.explanation)]


# ---- how each metric is computed -------------------------------------------------------------------------------
def _deletion(ctx: MetricContext) -> Any:
    return ctx.adapter.perturbation_curve(ctx.bundle, ctx.raw, ctx.explanation, mode="deletion", steps=ctx.steps).aucs


def _insertion(ctx: MetricContext) -> Any:
    return ctx.adapter.perturbation_curve(ctx.bundle, ctx.raw, ctx.explanation, mode="insertion", steps=ctx.steps).aucs


def _road_morf(ctx: MetricContext) -> Any:
    return road_curve(ctx.bundle, ctx.raw, ctx.explanation, order="morf", seed=ctx.seed).scores


def _road_lerf(ctx: MetricContext) -> Any:
    return road_curve(ctx.bundle, ctx.raw, ctx.explanation, order="lerf", seed=ctx.seed).scores


def _has_masks(ctx: MetricContext) -> bool:
    return ctx.truth.masks is not None


def _pointing_game(ctx: MetricContext) -> Any:
    return pointing_game(ctx.explanation, ctx.truth.masks)


def _energy_in_mask(ctx: MetricContext) -> Any:
    return energy_in_mask(ctx.explanation, ctx.truth.masks)


def _has_rationales(ctx: MetricContext) -> bool:
    return ctx.truth.rationales is not None and any(r for r in ctx.truth.rationales)


def _rationales(ctx: MetricContext) -> list[list[int]]:
    return [list(r or []) for r in ctx.truth.rationales or []]


def _rationale_pointing(ctx: MetricContext) -> Any:
    return rationale_pointing(ctx.explanation, _rationales(ctx))


def _rationale_energy(ctx: MetricContext) -> Any:
    return rationale_energy(ctx.explanation, _rationales(ctx))


def _has_truth_columns(ctx: MetricContext) -> bool:
    return bool(ctx.bundle.info.truth_columns)


def _truth_recall(ctx: MetricContext) -> Any:
    info = ctx.bundle.info
    return truth_recall(ctx.explanation, [c.name for c in info.columns], info.truth_columns)


def _declares_completeness(ctx: MetricContext) -> bool:
    return ctx.method.completeness is not None


def _completeness_gap(ctx: MetricContext) -> Any:
    return completeness_gap(ctx.bundle, ctx.raw, ctx.explanation, background=ctx.background, seed=ctx.seed)


def _sparseness(ctx: MetricContext) -> Any:
    return sparseness(ctx.explanation, ctx.bundle.device)


def _complexity(ctx: MetricContext) -> Any:
    return complexity(ctx.explanation, ctx.bundle.device)


INFIDELITY_SAMPLES = 16  # noisy copies per input (captum's infidelity), declared as its passes below


def _infidelity(ctx: MetricContext) -> Any:
    return infidelity_score(
        ctx.bundle,
        ctx.raw,
        ctx.explanation,
        n_perturb_samples=INFIDELITY_SAMPLES,
        batch_size=ctx.batch_size,
        seed=ctx.seed,
    )


def _stability(ctx: MetricContext) -> Stability:
    """Max-sensitivity and local Lipschitz from one recomputation of the map on the same neighbours."""
    if "stability" not in ctx.shared:
        ctx.shared["stability"] = stability(
            ctx.bundle,
            ctx.raw,
            ctx.explanation.method,
            ctx.explanation,
            params=dict(ctx.explanation.params),
            samples=COMPARE_NEIGHBOURS,
            background=ctx.background,
            batch_size=ctx.batch_size,
            seed=ctx.seed,
        )
    return ctx.shared["stability"]


def _max_sensitivity(ctx: MetricContext) -> Any:
    return _stability(ctx).max_sensitivity


def _local_lipschitz(ctx: MetricContext) -> Any:
    return _stability(ctx).lipschitz


def _has_other_classes(bundle: ModelBundle) -> bool:
    """A random other class to explain needs two outputs at least: a model that predicts a number has one."""
    return bundle.regression is None and bundle.info.num_classes >= 2


def _random_logit(ctx: MetricContext) -> Any:
    e = ctx.explanation
    return random_logit(ctx.bundle, ctx.raw, e, background=ctx.background, batch_size=ctx.batch_size, seed=ctx.seed)


def _has_edge_truth(ctx: MetricContext) -> bool:
    return has_edge_truth(ctx.adapter.as_batch(ctx.raw))


def _edge_auc(ctx: MetricContext) -> Any:
    return edge_auc(ctx.bundle, ctx.adapter.checked(ctx.bundle, ctx.raw), ctx.explanation)


def _fidelity(ctx: MetricContext) -> tuple[np.ndarray, np.ndarray]:
    """fid+ and fid- from one pass over the inputs, shared by the three fidelity metrics."""
    if "graph_fidelity" not in ctx.shared:
        raws, e = ctx.adapter.checked(ctx.bundle, ctx.raw), ctx.explanation
        ctx.shared["graph_fidelity"] = graph_fidelity(ctx.bundle, raws, e, [int(t) for t in e.targets])
    return ctx.shared["graph_fidelity"]


def _seconds(ctx: MetricContext) -> Any:
    return [ctx.explanation.seconds] * len(ctx.explanation)  # one timing for the whole batch


def _curve_passes(steps: int) -> MetricPasses:
    return MetricPasses(forward=steps + 1)  # the curve's points, 0% to 100% of the {units}


def _road_passes(steps: int) -> MetricPasses:
    return MetricPasses(forward=ROAD_STEPS + 1, imputed=ROAD_STEPS + 1)  # 0% to 90%, each point an imputed image


def _completeness_passes(steps: int) -> MetricPasses:
    return MetricPasses(forward=2)  # f(x) and f(reference)


def _infidelity_passes(steps: int) -> MetricPasses:
    return MetricPasses(forward=INFIDELITY_SAMPLES + 1)  # the noisy copies and the input


def _stability_passes(steps: int) -> MetricPasses:
    return MetricPasses(maps=COMPARE_NEIGHBOURS, shared="stability")  # the map of every neighbour


def _fidelity_passes(steps: int) -> MetricPasses:
    return MetricPasses(forward=2, shared="graph_fidelity")  # the explanation's edges alone, and without them


def _random_logit_passes(steps: int) -> MetricPasses:
    return MetricPasses(maps=1)  # the map for another class


LOWER, HIGHER = "lower is better", "higher is better"
_COMPARE = ("compare",)

# The order is every table's order.
_SPECS = (
    MetricSpec(
        "deletion_auc",
        "Deletion AUC",
        LOWER,
        "area under the target's probability as the most relevant {units} are removed (a model that predicts a "
        "number: under its predicted value rescaled per input to the share of f(input) - f(reference) still present, "
        "1 at its own prediction, 0 at the reference's)",
        "faithfulness",
        (0.0, 1.0),
        cost="costly",
        score=_deletion,
        passes=_curve_passes,
    ),
    MetricSpec(
        "insertion_auc",
        "Insertion AUC",
        HIGHER,
        "area under the target's probability as the most relevant {units} are put back (a model that predicts a "
        "number: under its predicted value rescaled per input to the share of f(input) - f(reference) present, "
        "0 at the reference's prediction, 1 at its own)",
        "faithfulness",
        (0.0, 1.0),
        cost="costly",
        score=_insertion,
        passes=_curve_passes,
    ),
    MetricSpec(
        "road_morf",
        "ROAD MoRF",
        LOWER,
        "mean target probability as the most relevant {units} are replaced by noisy linear imputation "
        "from their neighbours (up to 90%)",
        "faithfulness",
        (0.0, 1.0),
        cost="costly",
        pages=_COMPARE,
        score=_road_morf,
        passes=_road_passes,
    ),
    MetricSpec(
        "road_lerf",
        "ROAD LeRF",
        HIGHER,
        "mean target probability as the least relevant {units} are replaced by noisy linear imputation "
        "from their neighbours (up to 90%)",
        "faithfulness",
        (0.0, 1.0),
        cost="costly",
        pages=_COMPARE,
        score=_road_lerf,
        passes=_road_passes,
    ),
    MetricSpec(
        "pointing_game",
        "Pointing game",
        HIGHER,
        "whether the top-scoring {unit} lies on the object",
        "localisation",
        (0.0, 1.0),
        score=_pointing_game,
        when=_has_masks,
    ),
    MetricSpec(
        "energy_in_mask",
        "Energy in mask",
        HIGHER,
        "share of the positive attribution that lies on the object",
        "localisation",
        (0.0, 1.0),
        score=_energy_in_mask,
        when=_has_masks,
    ),
    MetricSpec(
        "rationale_pointing",
        "Rationale pointing",
        HIGHER,
        "whether the top-scoring {unit} lies in the rationale (the {units} known to set the label)",
        "localisation",
        (0.0, 1.0),
        score=_rationale_pointing,
        when=_has_rationales,
    ),
    MetricSpec(
        "rationale_energy",
        "Rationale energy",
        HIGHER,
        "share of the positive attribution that lies on the rationale (the {units} known to set the label)",
        "localisation",
        (0.0, 1.0),
        score=_rationale_energy,
        when=_has_rationales,
    ),
    MetricSpec(
        "truth_recall",
        "Truth columns found (top-k)",
        HIGHER,
        "share of the {units} that set the label (known for a generated table) among the k {units} of largest "
        "|attribution|, k the number of those {units}",
        "localisation",
        (0.0, 1.0),
        score=_truth_recall,
        when=_has_truth_columns,
    ),
    MetricSpec(
        "edge_auc",
        "Edge AUC (motif)",
        HIGHER,
        "ROC AUC of the map's |edge values| against the ground-truth motif's edges of the explained subgraph "
        "(0.5: no better than chance; nodes outside a motif are not scored)",
        "localisation",
        (0.0, 1.0),
        score=_edge_auc,
        when=_has_edge_truth,
    ),
    MetricSpec(
        "fidelity_plus",
        "Fidelity+",
        HIGHER,
        f"PyG's fid+: whether the prediction leaves the target once the map's top {FIDELITY_SHARE:.0%} of the "
        "explained edges are masked out",
        "faithfulness",
        (0.0, 1.0),
        cost="costly",
        score=lambda ctx: _fidelity(ctx)[0],
        passes=_fidelity_passes,
    ),
    MetricSpec(
        "fidelity_minus",
        "Fidelity−",
        LOWER,
        f"PyG's fid-: whether the prediction leaves the target when the map's top {FIDELITY_SHARE:.0%} of the "
        "explained edges are kept alone",
        "faithfulness",
        (0.0, 1.0),
        cost="costly",
        score=lambda ctx: _fidelity(ctx)[1],
        passes=_fidelity_passes,
    ),
    MetricSpec(
        "characterization",
        "Characterization",
        HIGHER,
        "PyG's characterization score: the weighted harmonic mean of fid+ and 1 − fid- (0.5 each)",
        "faithfulness",
        (0.0, 1.0),
        cost="costly",
        score=lambda ctx: characterization(*_fidelity(ctx)),
        passes=_fidelity_passes,
    ),
    MetricSpec(
        "completeness_gap",
        "Completeness gap",
        LOWER,
        "|sum of attributions − (f(x) − f(reference))| / |f(x) − f(reference)|",
        "faithfulness",
        (0.0, None),
        cost="costly",
        score=_completeness_gap,
        passes=_completeness_passes,
        when=_declares_completeness,
    ),
    MetricSpec(
        "sparseness",
        "Sparseness",
        HIGHER,
        "Gini index of |attribution| over the {units}: 0 when spread evenly, near 1 when on one {unit}",
        "complexity",
        (0.0, 1.0),
        score=_sparseness,
    ),
    MetricSpec(
        "complexity",
        "Complexity (nats)",
        LOWER,
        "entropy of |attribution| normalised to sum 1 over the {units}, in nats: 0 on one {unit}, "
        "log(number of {units}) when spread evenly",
        "complexity",
        (0.0, None),
        unit="nats",
        score=_complexity,
    ),
    MetricSpec(
        "infidelity",
        "Infidelity",
        LOWER,
        "mean squared error between map · noise and the target logit's drop under that noise (captum, "
        "map rescaled optimally)",
        "faithfulness",
        (0.0, None),
        unit="logit²",
        cost="costly",
        pages=_COMPARE,
        score=_infidelity,
        passes=_infidelity_passes,
    ),
    MetricSpec(
        "max_sensitivity",
        "Max-sensitivity",
        LOWER,
        "largest ||map(x') − map(x)|| / ||map(x)|| over a few x' within ±0.02 of x per {unit}",
        "robustness",
        (0.0, None),
        cost="costly",
        pages=_COMPARE,
        score=_max_sensitivity,
        passes=_stability_passes,
    ),
    MetricSpec(
        "local_lipschitz",
        "Local Lipschitz",
        LOWER,
        "largest ||map(x') − map(x)|| / ||x' − x|| over a few x' within ±0.02 of x per {unit} "
        "(map units per input unit)",
        "robustness",
        (0.0, None),
        unit="map units per input unit",
        cost="costly",
        pages=_COMPARE,
        score=_local_lipschitz,
        passes=_stability_passes,
    ),
    MetricSpec(
        "random_logit",
        "Random-logit similarity",
        LOWER,
        "similarity of the map for the target to the map for a random other class (SSIM of |map| on images, "
        "Spearman rank correlation on texts, table rows and series): low when the map depends on the class",
        "randomisation",
        (-1.0, 1.0),
        cost="costly",
        pages=_COMPARE,
        score=_random_logit,
        passes=_random_logit_passes,
        for_model=_has_other_classes,
    ),
    MetricSpec(
        "seconds",
        "Runtime (s)",
        LOWER,
        "time the method took",
        "cost",
        (0.0, None),
        unit="s",
        pages=_COMPARE,  # a column where methods are ranked against each other
        score=_seconds,
    ),
)
REGISTRY: Registry[MetricSpec] = Registry("metric", error=ExplainError)
for _spec in _SPECS:
    REGISTRY.register(_spec)


def metrics_for(page: str, modality: str, bundle: ModelBundle | None = None) -> list[MetricSpec]:
    """The metrics scored on `page` ('explain' or 'compare') for maps of `modality` (those its adapter lists), in
    table order; with `bundle`, only those that can apply to its model (`MetricSpec.for_model`)."""
    listed = set(adapter_of(modality).metrics)
    return REGISTRY.all(lambda s: page in s.pages and s.id in listed and (bundle is None or s.for_model(bundle)))
