"""Deletion and insertion AUC (Petsiuk et al. 2018, RISE): the areas under the curves of
`explainers/perturbation_curves.py` (low deletion and high insertion AUC mean the map found what the model uses)."""

from __future__ import annotations

from typing import Any

from xaidash.explainers.map_arrays import Attributions
from xaidash.explainers.perturbation_curves import (
    CURVE_STEPS,
    CurveResult,
    Mode,
    perturbation_curve,
    text_perturbation_curve,
)
from xaidash.models.bundle import ModelBundle

__all__ = [
    "CURVE_STEPS",
    "CurveResult",
    "Mode",
    "deletion_auc",
    "insertion_auc",
    "perturbation_curve",
    "text_perturbation_curve",
]


def deletion_auc(
    bundle: ModelBundle, images: Any, attributions: Attributions, targets: Any = None, **kw: Any
) -> CurveResult:
    """Deletion curves and AUCs (lower is better); see `perturbation_curve` for the options."""
    return perturbation_curve(bundle, images, attributions, targets, mode="deletion", **kw)


def insertion_auc(
    bundle: ModelBundle, images: Any, attributions: Attributions, targets: Any = None, **kw: Any
) -> CurveResult:
    """Insertion curves and AUCs (higher is better); see `perturbation_curve` for the options."""
    return perturbation_curve(bundle, images, attributions, targets, mode="insertion", **kw)
