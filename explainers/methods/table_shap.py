"""KernelSHAP over a table row's columns: coalitions of columns drawn as captum's KernelShap draws them (the
Shapley kernel, by sampling; the first two: every column shown, every one hidden), a hidden column taking each
reference row's value in turn with the target probability averaged over the references (shap's KernelExplainer
with that background: interventional Shapley values), and captum's weighted linear fit (`_common.kernel_shap_fit`).
A regression model (`bundle.regression`) is explained by its predicted value itself, in the target's units: the
values add up to f(row) - f(every column hidden) in those units.

Every coalition of every row and reference is built on the device and scored in one stream of shared passes
(`_common.scored_rows`), as image and text KernelSHAP are; tests compare the values with shap's KernelExplainer."""

from __future__ import annotations

from typing import Any

import torch

from xaidash.explainers.methods._common import kernel_coalitions, kernel_shap_fit, scored_rows
from xaidash.explainers.methods._table import (
    background_size_param,
    baseline_param,
    positions,
    references,
    uses_background,
)
from xaidash.explainers.params import Param
from xaidash.explainers.registry import OUTPUT_CHANGE, Completeness, MethodContext, MethodOutput, MethodSpec, register


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    rows, refs = ctx.x.detach(), ctx.bundle.prepare(references(ctx, params))  # prepared once
    n, f = len(rows), len(ctx.bundle.info.columns)
    b, samples = len(refs), int(params["samples"])
    coalitions, weights = kernel_coalitions(samples, f, ctx.seed)
    shown = positions(ctx, torch.as_tensor(coalitions, device=rows.device))  # (S, D), spread once

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row (i * S + s) * B + k: row i showing coalition s, its hidden columns from reference k.
        i, s, k = index // (samples * b), (index // b) % samples, index % b
        return torch.where(shown[s], rows[i], refs[k]), ctx.targets[i]

    # a classifier's target probability; a regression model's one output is its predicted value (no softmax)
    probability = ctx.bundle.regression is None
    scores, used = scored_rows(ctx, n * samples * b, build, probability=probability, what="KernelSHAP")
    f_of = scores.view(n, samples, b).mean(2).double().cpu().numpy()
    values, gaps, changes = [], [], []
    for i in range(n):
        phi = kernel_shap_fit(coalitions, f_of[i], weights)
        values.append(torch.from_numpy(phi))
        changes.append(float(f_of[i, 0] - f_of[i, 1]))  # every column shown, every one hidden
        gaps.append(abs(float(phi.sum()) - changes[-1]))
    return MethodOutput(
        torch.stack(values), {"additivity_gap": gaps, OUTPUT_CHANGE: changes, "batch_size": [float(used)] * n}
    )


register(
    MethodSpec(
        id="shap_kernel",
        label="SHAP",
        modalities=("table",),
        compute=_compute,
        params=(
            Param("samples", "int", 400, "Column coalitions evaluated by Kernel SHAP.", min=10, max=20000),
            baseline_param("background"),
            background_size_param(),
        ),
        description="Kernel SHAP over columns for the target probability (a model that predicts a number: its "
        "predicted value, in the target's units): a hidden column takes the baseline's value "
        "(with the background baseline, each background row's in turn, averaged: shap's KernelExplainer). "
        "additivity_gap: |sum of values - (f(row) - f(every column hidden))|.",
        signed=True,
        family="shap",
        output="probability",
        needs_background=uses_background,
        completeness=Completeness(reference="reference_rows", unit="column", diagnostic="additivity_gap"),
        featured=4,
    )
)
