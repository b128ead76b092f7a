"""The quality metrics xaidash scores a map with, each one registration with its declared facts.

Pages, reports and the CLI list metrics from here (through `scoring.METRICS`, its legacy view), never by name:
title, which way is better, what it measures (worded by modality: {unit} / {units}), the values it can take,
what it costs and where it is shown. Cheap metrics (a few operations on the map) are scored wherever a map is
scored; costly ones (more explanations or forward passes per input) only where the page asks for them (Compare).
"""

from __future__ import annotations

from dataclasses import dataclass

# Where a metric is scored: "explain" (the Explain page, `xaidash explain --metrics`, the whole-data-set run and
# its report, which all score through `scoring.explain_and_score`) and "compare" (the Compare page).
PAGES = ("explain", "compare")


@dataclass(frozen=True)
class MetricSpec:
    """One metric's declared facts. `better`: 'lower is better' / 'higher is better'; `meaning`: what one value
    says, with {unit}/{units} for the modality's word; `unit`: the unit of a value ('' when a share or
    probability); `value_range`: (lowest, highest), None where open; `cost`: 'cheap' (from the map alone) or
    'costly' (recomputes maps or runs the model); `pages`: where it is scored."""

    id: str
    title: str
    better: str
    meaning: str
    family: str
    value_range: tuple[float | None, float | None] = (None, None)
    unit: str = ""
    cost: str = "cheap"
    modalities: tuple[str, ...] = ("image", "text")
    pages: tuple[str, ...] = PAGES

    @property
    def lower_is_better(self) -> bool:
        return self.better.startswith("lower")


LOWER, HIGHER = "lower is better", "higher is better"
_COMPARE = ("compare",)

# The order is every table's order.
_SPECS = (
    MetricSpec(
        "deletion_auc",
        "Deletion AUC",
        LOWER,
        "area under the target's probability as the most relevant {units} are removed",
        "faithfulness",
        (0.0, 1.0),
        cost="costly",
    ),
    MetricSpec(
        "insertion_auc",
        "Insertion AUC",
        HIGHER,
        "area under the target's probability as the most relevant {units} are put back",
        "faithfulness",
        (0.0, 1.0),
        cost="costly",
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
        modalities=("image",),
        pages=_COMPARE,
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
        modalities=("image",),
        pages=_COMPARE,
    ),
    MetricSpec(
        "pointing_game",
        "Pointing game",
        HIGHER,
        "whether the top-scoring {unit} lies on the object",
        "localisation",
        (0.0, 1.0),
        modalities=("image",),
    ),
    MetricSpec(
        "energy_in_mask",
        "Energy in mask",
        HIGHER,
        "share of the positive attribution that lies on the object",
        "localisation",
        (0.0, 1.0),
        modalities=("image",),
    ),
    MetricSpec(
        "rationale_pointing",
        "Rationale pointing",
        HIGHER,
        "whether the top-scoring {unit} lies in the rationale",
        "localisation",
        (0.0, 1.0),
        modalities=("text",),
    ),
    MetricSpec(
        "rationale_energy",
        "Rationale energy",
        HIGHER,
        "share of the positive attribution that lies on the rationale",
        "localisation",
        (0.0, 1.0),
        modalities=("text",),
    ),
    MetricSpec(
        "completeness_gap",
        "Completeness gap",
        LOWER,
        "|sum of attributions − (f(x) − f(reference))| / |f(x) − f(reference)|",
        "faithfulness",
        (0.0, None),
        cost="costly",
    ),
    MetricSpec(
        "sparseness",
        "Sparseness",
        HIGHER,
        "Gini index of |attribution| over the {units}: 0 when spread evenly, near 1 when on one {unit}",
        "complexity",
        (0.0, 1.0),
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
        modalities=("image",),
        pages=_COMPARE,
    ),
    MetricSpec(
        "max_sensitivity",
        "Max-sensitivity",
        LOWER,
        "largest ||map(x') − map(x)|| / ||map(x)|| over a few x' within ±0.02 of x per {unit}",
        "robustness",
        (0.0, None),
        cost="costly",
        modalities=("image",),
        pages=_COMPARE,
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
        modalities=("image",),
        pages=_COMPARE,
    ),
    MetricSpec(
        "random_logit",
        "Random-logit similarity",
        LOWER,
        "similarity of the map for the target to the map for a random other class (SSIM of |map| on images, "
        "Spearman on texts): low when the map depends on the class",
        "randomisation",
        (-1.0, 1.0),
        cost="costly",
        pages=_COMPARE,
    ),
    MetricSpec("seconds", "Runtime (s)", LOWER, "time the method took", "cost", (0.0, None), unit="s"),
)

REGISTRY: dict[str, MetricSpec] = {s.id: s for s in _SPECS}


def get_metric(metric: str) -> MetricSpec | None:
    """The registered metric `metric`, or None when it is not one."""
    return REGISTRY.get(metric)


def metrics_for(page: str, modality: str) -> list[MetricSpec]:
    """The metrics scored on `page` ('explain' or 'compare') for maps of `modality`, in table order."""
    return [s for s in _SPECS if page in s.pages and modality in s.modalities]
