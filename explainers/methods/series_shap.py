"""KernelSHAP over time segments for series models: the series is cut into `segments` equal stretches of steps, a
hidden segment takes its values from the chosen baseline (the raw value 0, the channel's training mean, the series'
own mean, a smoothed copy, or a straight line across the segment between the values just outside it), and the target
logit over coalitions of segments is fitted as captum's KernelShap fits it (`_common.kernel_coalitions` and
`kernel_shap_fit`). A segment spans every channel; its value is repeated over its steps ((N, 1, T)), as image
KernelSHAP repeats a superpixel's over its pixels, so the values (each segment's once) add up to f(series) -
f(every segment hidden), which is f(baseline series).

Every coalition of every series of the call is built on the device and scored in one stream of shared passes
(`_common.scored_rows`); tests check the values against captum's KernelShap with the segments as its feature mask."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from xaidash.explainers.methods._common import kernel_coalitions, kernel_shap_fit
from xaidash.explainers.methods.series_baselines import (
    baseline_param,
    resolved_segments,
    scored_coalitions,
    segment_fill,
    segments_param,
)
from xaidash.explainers.params import Param
from xaidash.explainers.registry import OUTPUT_CHANGE, Completeness, MethodContext, MethodOutput, MethodSpec, register


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    n, samples = len(ctx.x), int(params["samples"])
    labels = resolved_segments(ctx, params)
    k = int(labels.max()) + 1
    on, weights = kernel_coalitions(samples, k, ctx.seed)  # the same coalitions for every series of the call
    fill = segment_fill(str(params["baseline"]), ctx.bundle, ctx.x, labels)
    scores, used = scored_coalitions(ctx, fill, torch.as_tensor(on), labels, what="KernelSHAP")
    f = scores.double().cpu().numpy()
    # one weighted least-squares fit for every series: they share the coalitions and weights, and sklearn fits each
    # column of a 2-D target on its own (the same values as one fit per series, without its per-call cost)
    phi = torch.as_tensor(kernel_shap_fit(on, f.T, weights)).view(n, k)
    changes = f[:, 0] - f[:, 1]  # rows 0 and 1: every segment shown, every one hidden
    gaps = np.abs(phi.double().sum(1).numpy() - changes)
    return MethodOutput(
        phi[:, labels].unsqueeze(1),
        {
            "additivity_gap": gaps.tolist(),
            OUTPUT_CHANGE: changes.tolist(),
            "segments": [float(k)] * n,
            "batch_size": [float(used)] * n,
        },
        segments=labels.expand(n, -1).numpy().copy(),
    )


def _passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    # at most (a coalition drawn twice is scored once); f(x) and f(every segment hidden) are its first two samples
    return 0, params["samples"] * n


register(
    MethodSpec(
        id="shap_kernel",
        label="KernelSHAP (time segments)",
        modalities=("series",),
        compute=_compute,
        params=(
            segments_param(),
            Param("samples", "int", 300, "Coalitions of segments evaluated.", min=10, max=100000),
            baseline_param("interpolation", hide=True),
        ),
        signed=True,
        family="shap",
        description="Model-agnostic Shapley values of equal time segments (captum KernelShap, batched): the target "
        "logit on random coalitions of segments, the hidden ones from the baseline (zero, the training mean, the "
        "series' mean, a smoothed copy, or a straight line across the segment), fitted with the Shapley kernel. "
        "Diagnostic additivity_gap: |sum - (f(x) - f(every segment hidden))|.",
        output="logit",
        completeness=Completeness(reference="series_hidden", unit="segment", diagnostic="additivity_gap"),
        passes=_passes,
        featured=4,
    )
)
