"""Occlusion by column for table models: each column in turn is hidden (its raw value replaced by the baseline's:
the training split's mean or median, a category column's most frequent category, or each of several background
rows' values, the output averaged over them) and the drop of the target logit is the column's value:
f(row) - mean over references of f(row with the column hidden). A category column is hidden as one one-hot group.
A model that predicts a number has one output, its predicted value in the target's units: the drop of that value.

What captum's `FeatureAblation` computes with `feature_mask=feature_mask(info)` for one reference row, but every
hidden column of every row and reference is built as a tensor on the device and scored in one stream of shared
passes (`_common.scored_rows`); tests check it against captum and against a hand computation."""

from __future__ import annotations

from typing import Any

import torch

from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.methods._table import (
    background_size_param,
    baseline_param,
    positions,
    references,
    uses_background,
)
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    rows, refs = ctx.x.detach(), ctx.bundle.prepare(references(ctx, params))  # prepared once
    n, f = len(rows), len(ctx.bundle.info.columns)
    b = len(refs)
    hidden_at = positions(ctx, torch.eye(f, dtype=torch.bool, device=rows.device))  # (F, D): column j's positions

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row r < n: row r as it is; then row n + (i * F + j) * B + k: row i with column j from reference k.
        plain = index < n
        rest = (index - n).clamp(min=0)
        i = torch.where(plain, index, rest // (f * b))
        j, k = (rest // b) % f, rest % b
        hide = hidden_at[j] & ~plain.view(-1, 1)
        return torch.where(hide, refs[k], rows[i]), ctx.targets[i]

    scores, used = scored_rows(ctx, n + n * f * b, build, what="Occlusion")
    hidden = scores[n:].view(n, f, b).mean(2)
    return MethodOutput(scores[:n, None] - hidden, {"batch_size": [float(used)] * n})


register(
    MethodSpec(
        id="occlusion",
        label="Occlusion",
        modalities=("table",),
        compute=_compute,
        params=(baseline_param("mean"), background_size_param()),
        signed=True,
        family="perturbation",
        output="logit",
        needs_background=uses_background,
        description="Hides one column at a time (replaced by the baseline: the training mean or median, a category "
        "column's most frequent category, or several training rows' values, averaged) and records the drop of "
        "the target logit.",
        featured=2,
    )
)
