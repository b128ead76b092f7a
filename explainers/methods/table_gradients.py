"""Gradient attributions for table models (captum): Integrated Gradients, gradient x input and saliency, all on
the row as the model reads it (numeric columns standardised, categories one-hot), each column's positions summed
by the table adapter (`to_columns`), so a category column gets one value for its whole one-hot group. A model that
predicts a number is explained by its one output, the predicted value in the target's units (no softmax anywhere).

IG's baseline is a reference row (`_table.references`): the training split's mean or median row, or several
background rows, IG averaged over them (its values then add up to f(row) minus the mean of f over those rows, what
SHAP's expected gradients promise). An input whose values miss that total by more than 1% is integrated again on
an adaptively split path (`_path.refined_path`), as for images."""

from __future__ import annotations

from typing import Any

import torch
from captum.attr import IntegratedGradients

from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.methods._common import batch_slices, grad_leaf, quiet_hook_notices
from xaidash.explainers.methods._path import IG_TOLERANCE, refined_line
from xaidash.explainers.methods._table import background_size_param, baseline_param, references, uses_background
from xaidash.explainers.methods.gradients import input_x_gradient_compute, saliency_compute
from xaidash.explainers.params import Param
from xaidash.explainers.registry import (
    OUTPUT_CHANGE,
    STEPS_USED,
    Completeness,
    MethodContext,
    MethodOutput,
    MethodSpec,
    register,
    relative_gap,
)


def _pairs_ig(
    ctx: MethodContext, xs: torch.Tensor, bases: torch.Tensor, targets: torch.Tensor, steps: int
) -> tuple[tuple[torch.Tensor, torch.Tensor], int]:
    """captum's IG of every (row, reference) pair, slices of pairs sized so a pass holds about `batch_size` path
    points; (attributions (P, D), signed deltas (P,)) and the batch that ran."""
    ig = IntegratedGradients(ctx.model)

    def run(size: int) -> tuple[torch.Tensor, torch.Tensor]:
        attrs, deltas = [], []
        for s in batch_slices(len(xs), max(1, size // steps)):
            with quiet_hook_notices():
                attr, delta = ig.attribute(
                    grad_leaf(xs[s]),
                    baselines=bases[s],
                    target=targets[s],
                    n_steps=steps,
                    method="gausslegendre",
                    internal_batch_size=max(size, s.stop - s.start),
                    return_convergence_delta=True,
                )
            attrs.append(attr.detach())
            deltas.append(delta.detach().flatten())
        return torch.cat(attrs), torch.cat(deltas)

    return run_halving(run, rows_per_pass(ctx.batch_size, ctx.x.device), what="Integrated Gradients")


def _refined(
    ctx: MethodContext, x: torch.Tensor, base: torch.Tensor, target: int, change: float, steps: int, rows: int
) -> tuple[torch.Tensor, int]:
    """One pair's IG integrated again on an adaptively split path, the same straight line from `base` to `x`."""
    diff = (x - base).unsqueeze(0)

    return refined_line(ctx.model, base.unsqueeze(0), diff, target, change, steps, rows)


def _integrated_gradients(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    bases = ctx.bundle.prepare(references(ctx, params))  # (B, D)
    n, b, steps = len(ctx.x), len(bases), int(params["steps"])
    xs = ctx.x.detach().repeat_interleave(b, 0)
    base_rows = bases.repeat(n, 1)
    targets = ctx.targets.repeat_interleave(b)
    (attr, delta), used = _pairs_ig(ctx, xs, base_rows, targets, steps)
    change = attr.sum(1).float() - delta.float()  # captum's delta is signed: sum - (f(x) - f(baseline))
    steps_used = torch.full((len(xs),), steps)
    # The promise is the row's (its pairs averaged): only a row that misses it has its missing pairs refined.
    row_gap, row_change = delta.view(n, b).mean(1), change.view(n, b).mean(1)
    for i in range(n):
        if relative_gap(float(row_gap[i]), float(row_change[i])) <= IG_TOLERANCE:
            continue
        for k in range(i * b, (i + 1) * b):
            if relative_gap(float(delta[k]), float(change[k])) > IG_TOLERANCE:
                attr[k], used_k = _refined(ctx, xs[k], base_rows[k], int(targets[k]), float(change[k]), steps, used)
                steps_used[k] = used_k
    attr = attr.view(n, b, -1).mean(1)
    change = change.view(n, b).mean(1)
    return MethodOutput(
        attr,
        {
            "convergence_delta": [float(d) for d in (attr.sum(1).float() - change).cpu()],
            OUTPUT_CHANGE: [float(c) for c in change.cpu()],
            STEPS_USED: [int(s) for s in steps_used.view(n, b).max(1).values],
            "batch_size": [float(used)] * n,
        },
    )


register(
    MethodSpec(
        id="saliency",
        label="Saliency",
        modalities=("table",),
        compute=saliency_compute,
        signed=False,
        family="gradient",
        description="Absolute gradient of the target logit with respect to each standardised column (a category "
        "column: summed over its one-hot positions): how sensitive the score is to the column, not which way.",
        output="logit",
    )
)

register(
    MethodSpec(
        id="inputxgrad",
        label="Input x Gradient",
        modalities=("table",),
        compute=input_x_gradient_compute,
        signed=True,
        family="gradient",
        description="Gradient times the standardised value (a category column: the gradient of its hot position): "
        "a first-order estimate of each column's contribution against the training mean.",
        output="logit",
        featured=3,
    )
)

register(
    MethodSpec(
        id="ig",
        label="Integrated Gradients",
        modalities=("table",),
        compute=_integrated_gradients,
        params=(
            baseline_param("mean"),
            Param(
                "steps",
                "int",
                50,
                "Points on the path from the reference row to the row (Gauss-Legendre); raised automatically (up "
                "to 8x) for a path whose attributions miss f(row) - f(reference) by more than 1%.",
                min=2,
                max=1000,
            ),
            background_size_param(),
        ),
        signed=True,
        family="gradient",
        description="Gradients integrated along the straight path from a reference row to the row, summed per "
        "column; the values add up to f(row) - f(reference) (with the background baseline: the mean over its rows). "
        "Diagnostic: the convergence delta, the gap to that sum.",
        output="logit",
        needs_background=uses_background,
        completeness=Completeness(
            reference="reference_rows", unit="column", diagnostic="convergence_delta", tolerance=IG_TOLERANCE
        ),
        featured=1,
    )
)
