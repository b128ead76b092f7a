"""The attack's pictures in the one presentation model (`figures.map_figure.MapFigure`): the perturbation as a
signed map whose colour bar reads in grey levels (/255 of the pixel range), and each method's map before and
after the attack on one shared colour scale, so a change of colour is a change of value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xaidash.explainers.figures import render
from xaidash.explainers.figures.legend import MapLegend
from xaidash.explainers.figures.map_figure import Caption, MapFigure, explanation_figures, map_figure
from xaidash.explainers.figures.scales import robust_scale
from xaidash.explainers.registry import Completeness
from xaidash.explainers.robust.attack import AttackResult
from xaidash.explainers.robust.explanation_change import MapChange

PERTURBATION_LEGEND = MapLegend(
    units="Δ pixel value in grey levels (/255), mean over colour channels",
    group="perturbation",
    signed=True,
    meaning="red = the attack made the pixel brighter, blue = darker, white = unchanged; the bar's ends are the budget ε",
)


@dataclass(frozen=True)
class _PerturbationFacts:
    """The legend facts (`legend.LegendFacts`) of a perturbation map: not a method, so declared here."""

    id: str = "perturbation"
    label: str = "Perturbation"
    output: str = "pixel value"
    family: str = "attack"
    signed: bool = True
    completeness: Completeness | None = None


def perturbation_figure(result: AttackResult, upscale: int = render.DEFAULT_UPSCALE) -> MapFigure:
    """The perturbation (perturbed − original, averaged over channels) in grey levels, on a colour scale of ±ε."""
    scale = result.epsilon * 255.0
    # Within the budget by construction; clipped to it so float rounding (8.0000001) does not read as saturation.
    values = np.clip(result.perturbation.mean(0) * 255.0, -scale, scale)
    caption = Caption(
        f"{result.classes[result.pred_after]} after {result.label}",
        result.seconds,
        note=f"L∞ {result.linf * 255:.1f}/255, L2 {result.l2:.3f} (pixel units)",
    )
    return map_figure(
        _PerturbationFacts(label=f"{result.label} perturbation"),
        values,
        target=result.pred_after,
        classes=result.classes,
        scale=scale,
        scale_mode="budget",
        display="heatmap",
        caption=caption,
        upscale=upscale,
        legend=PERTURBATION_LEGEND,
    )


def change_figures(
    change: MapChange, result: AttackResult, classes: Sequence[str], display: str = "overlay"
) -> tuple[MapFigure, MapFigure] | None:
    """One method's map of the original and of the perturbed input, drawn on one shared colour scale (the larger of
    their 99th percentiles of |value|); None when the method failed."""
    if change.before is None or change.after is None:
        return None
    a, b = change.before.item(0), change.after.item(0)
    scale = robust_scale(np.concatenate([np.ravel(a), np.ravel(b)]))
    scale = scale if scale > 0 else 1.0
    m = change.method
    note = "scale shared by the maps before and after"
    before, after = (
        explanation_figures(
            {m: values}, 0, classes=classes, image=image, display=display, scales={m: scale}, notes={m: note}
        )[m]
        for values, image in ((change.before, result.original), (change.after, result.perturbed))
    )
    return before, after
