"""Explanations across training: one input explained with the weights of every saved epoch, each
with that epoch's validation accuracy, through `explainers.explain`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaidash.data.registry import RegressionTarget
from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.figures.legend import map_legend
from xaidash.explainers.figures.map_figure import Caption, MapFigure, completeness_of, map_figure
from xaidash.explainers.figures.scales import is_clipped, robust_scale
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import featured_methods, get_method
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run, load_bundle, resolve_run

Progress = Callable[[int, int], None]


@dataclass
class EpochExplanations:
    epoch: int
    val_acc: float | None
    predicted: int
    probability: float  # of the explained target class
    explanations: dict[str, Explanation]


@dataclass
class TrainingExplanations:
    target: int
    epochs: list[EpochExplanations] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # method -> why it does not apply to this model

    def methods(self) -> list[str]:
        return list(self.epochs[0].explanations) if self.epochs else []

    def scale(self, method: str) -> float:
        """The largest |value| of one method over every epoch: one colour scale for its row."""
        return max((e.explanations[method].max_abs() for e in self.epochs if method in e.explanations), default=0.0)

    def shared_scale(self, method: str) -> float:
        """One colour scale for a method's row, as the Explain page picks one: the high percentile of |value|
        (`scales.robust_scale`) over the maps of every epoch together (1.0 when they are all zero); values
        beyond it saturate (see `clipped`)."""
        values = [np.asarray(e.explanations[method].item(0)).ravel() for e in self.epochs if method in e.explanations]
        return (robust_scale(np.concatenate(values)) if values else 0.0) or 1.0

    def clipped(self, method: str) -> bool:
        """Whether some value of the method's row lies beyond `shared_scale` (its end colours are '≥'/'≤'):
        `scales.is_clipped`, the one rule."""
        values = [np.asarray(e.explanations[method].item(0)).ravel() for e in self.epochs if method in e.explanations]
        return bool(values) and is_clipped(np.concatenate(values), self.shared_scale(method))

    def figures(
        self,
        method: str,
        classes: Sequence[str],
        image: Any | None = None,
        epochs: Sequence[EpochExplanations] | None = None,
        regression: RegressionTarget | None = None,
    ) -> list[tuple[EpochExplanations, MapFigure]]:
        """The method's map at each epoch (`epochs`: a subset of `self.epochs`) as `MapFigure`s on the row's one
        `shared_scale`; `image` is the input for overlays. Each caption carries what that epoch's completeness check
        found (`map_figure.completeness_of`: the steps IG raised, or '⚠ values do not add up ...'), as on Explain.
        `regression`: the number the model predicts (the legends name it, in its units)."""
        scale = self.shared_scale(method)
        out = []
        for at_epoch in self.epochs if epochs is None else epochs:
            e = at_epoch.explanations.get(method)
            if e is None:
                continue
            name = classes[self.target] if 0 <= self.target < len(classes) else str(self.target)
            spec = get_method(method, e.modality)
            promise, broken = completeness_of(spec, e, 0)
            caption = Caption(
                name,
                e.seconds if e.seconds >= 0 else None,
                1,
                note="one scale for every epoch shown",
                completeness=promise,
                incomplete=broken,
            )
            out.append(
                (
                    at_epoch,
                    map_figure(
                        spec,
                        e.item(0),
                        target=self.target,
                        classes=classes,
                        scale=scale,
                        modality=e.modality,
                        image=image,
                        words=adapter_of(e.modality).map_labels(e.tokens, 0),
                        caption=caption,
                        legend=map_legend(spec, e.modality, target=regression),
                    ),
                )
            )
        return out


def default_methods(modality: str) -> tuple[str, ...]:
    """The two top featured methods (`MethodSpec.featured`): each is computed once per checkpoint."""
    return tuple(featured_methods(modality, limit=2))


def epoch_validation(run: Run) -> dict[int, float]:
    """epoch -> validation accuracy from the run's epoch records (the last record of an epoch wins); a number to
    predict has no accuracy: its validation R² instead."""
    out: dict[int, float] = {}
    for r in run.metrics():
        score = r.get("val_acc") if r.get("val_acc") is not None else r.get("val_r2")
        if r.get("kind") == "epoch" and score is not None:
            out[int(r["epoch"])] = float(score)
    return out


def explanations_across_training(
    run: str | Run,
    raw: torch.Tensor | str,
    methods: Sequence[str] | None = None,
    target: int | None = None,
    device: str = "auto",
    method_params: dict[str, dict[str, Any]] | None = None,
    epochs: Sequence[int] | None = None,
    progress: Progress | None = None,
) -> TrainingExplanations:
    """One input (an image (C, H, W) in [0, 1] or a text) explained with the weights of every saved
    epoch (or the `epochs` given). The target is the same class at every epoch: `target`, else the
    final model's prediction. Methods that do not apply to the model are listed in `skipped`."""
    r = run if isinstance(run, Run) else resolve_run(run)
    saved = [e for e, _ in r.checkpoints()]
    if not saved:
        raise ExplainError(f"Run {r.id} has no per-epoch checkpoints: train it with this version to get one per epoch.")
    wanted = list(saved if epochs is None else epochs)
    missing = sorted(set(wanted) - set(saved))
    if missing:
        raise ExplainError(f"Run {r.id} has no checkpoint for epoch {', '.join(map(str, missing))} (has {saved}).")
    try:
        final = load_bundle(r, device=device)
    except ModelError as e:
        raise ExplainError(str(e)) from e
    methods = list(methods or default_methods(final.modality))
    params = method_params or {}
    usable, skipped = [], {}
    for m in methods:
        spec = get_method(m, final.modality)
        reason = None
        try:
            spec.check(final)
        except ExplainError as e:
            reason = str(e)
        if reason:
            skipped[m] = reason
        else:
            usable.append(m)
    if target is None:
        target = int(final.predict_proba([raw] if isinstance(raw, str) else raw).argmax(1)[0])
    elif not 0 <= int(target) < final.info.num_classes:
        raise ExplainError(f"Target class must lie in 0..{final.info.num_classes - 1}.")
    val = epoch_validation(r)
    out = TrainingExplanations(target=int(target), skipped=skipped)
    for i, epoch in enumerate(wanted):
        bundle = load_bundle(r, device=device, epoch=epoch)
        proba = bundle.predict_proba([raw] if isinstance(raw, str) else raw)[0]
        explanations = {m: explain(bundle, raw, int(target), method=m, **params.get(m, {})) for m in usable}
        out.epochs.append(
            EpochExplanations(epoch, val.get(epoch), int(proba.argmax()), float(proba[int(target)]), explanations)
        )
        if progress:
            progress(i + 1, len(wanted))
    return out
