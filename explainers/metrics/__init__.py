"""Explanation quality metrics: faithfulness (deletion/insertion, infidelity, completeness),
ground truth (pointing game, energy), robustness (max-sensitivity), sanity checks and agreement."""

from xaidash.explainers.metrics.agreement import agreement_matrix
from xaidash.explainers.metrics.completeness import CompletenessTerms, completeness_gap, declared_terms, relative_gap
from xaidash.explainers.metrics.deletion import (
    CURVE_STEPS,
    CurveResult,
    deletion_auc,
    insertion_auc,
    perturbation_curve,
    text_perturbation_curve,
)
from xaidash.explainers.metrics.ground_truth import energy_in_mask, pointing_game, rationale_energy, rationale_pointing
from xaidash.explainers.metrics.robustness import infidelity_score, sensitivity_max_score
from xaidash.explainers.metrics.sanity import SanityResult, cascading_randomization, weight_layers
from xaidash.explainers.metrics.spread import Spread, is_constant, spread

__all__ = [
    "CURVE_STEPS",
    "CompletenessTerms",
    "CurveResult",
    "SanityResult",
    "Spread",
    "agreement_matrix",
    "cascading_randomization",
    "completeness_gap",
    "declared_terms",
    "deletion_auc",
    "energy_in_mask",
    "infidelity_score",
    "insertion_auc",
    "is_constant",
    "perturbation_curve",
    "pointing_game",
    "rationale_energy",
    "rationale_pointing",
    "relative_gap",
    "sensitivity_max_score",
    "spread",
    "text_perturbation_curve",
    "weight_layers",
]
