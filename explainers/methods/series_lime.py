"""LIME over time segments for series models: the series is cut into `segments` equal stretches of steps, random
sets of segments are hidden (their values from the chosen baseline, as for KernelSHAP: `series_baselines`), and a
weighted linear surrogate of the target probability is fitted on which segments were shown, by lime's own `LimeBase`
with lime_image's kernel on the cosine distance to the unperturbed series and its ridge regressor (the surrogate image
LIME fits here too: `lime_image`). A segment spans every channel; its weight is repeated over its steps ((N, 1, T)).

captum's `Lime` fits the same surrogate when given these coalitions, this kernel and a ridge model (a test checks
it); its defaults (a Lasso on an exponential kernel of the euclidean distance in input space, width 1) weigh a
perturbed series of a hundred standardised steps by about exp(-d^2) ~ 0, so they are not the default here. Every
sample of every series of the call is built on the device and scored in one stream of shared passes."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch

from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.methods.lime_image import coalitions, lime_kernel
from xaidash.explainers.methods.series_baselines import (
    baseline_param,
    coalition_builder,
    resolved_segments,
    segment_fill,
    segments_param,
)
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register


def surrogate(on: np.ndarray, probs: np.ndarray, kernel_width: float, seed: int) -> tuple[np.ndarray, float]:
    """lime's `LimeBase` fit of one series' probabilities (S,) on the (S, k) coalitions: (k weights, weighted R^2)."""
    from lime.lime_base import LimeBase
    from sklearn.metrics import pairwise_distances

    k = on.shape[1]
    distances = pairwise_distances(on, on[:1], metric="cosine").ravel()
    base = LimeBase(partial(lime_kernel, kernel_width=kernel_width), random_state=seed)
    _, coefs, score, _ = base.explain_instance_with_data(on, probs[:, None], distances, 0, k, feature_selection="none")
    weights = np.zeros(k, dtype=np.float32)
    for feature, w in coefs:
        weights[int(feature)] = w
    return weights, float(score)


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    n, samples = len(ctx.x), int(params["samples"])
    labels = resolved_segments(ctx, params)
    on = coalitions(samples, int(labels.max()) + 1, ctx.seed)  # the first shows every segment (lime's convention)
    fill = segment_fill(ctx, str(params["baseline"]), labels)
    probs, used = scored_rows(ctx, n * samples, coalition_builder(ctx, fill, on, labels), probability=True, what="LIME")
    probs_np = probs.view(n, samples).double().cpu().numpy()
    maps, r2 = [], []
    for i in range(n):
        weights, score = surrogate(on.numpy(), probs_np[i], float(params["kernel_width"]), ctx.seed)
        maps.append(torch.as_tensor(weights)[labels])
        r2.append(score)
    return MethodOutput(
        torch.stack(maps).unsqueeze(1),
        {"surrogate_r2": r2, "segments": [float(on.shape[1])] * n, "batch_size": [float(used)] * n},
        segments=labels.expand(n, -1).numpy().copy(),
    )


def _passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return 0, params["samples"] * n


register(
    MethodSpec(
        id="lime",
        label="LIME (time segments)",
        modalities=("series",),
        compute=_compute,
        params=(
            segments_param(),
            Param("samples", "int", 1000, "Perturbed series the surrogate is fitted on.", min=10, max=100000),
            Param(
                "kernel_width",
                "float",
                0.25,
                "Width of lime's kernel on the cosine distance to the unperturbed series.",
                min=1e-3,
                max=100.0,
            ),
            baseline_param("interpolation", hide=True),
        ),
        signed=True,
        family="perturbation",
        output="probability",
        description="Hides random sets of time segments (the baseline: zero, the training mean, the series' mean, a "
        "smoothed copy, or a straight line across the segment), fits a weighted linear model of the target-class "
        "probability on which were shown, and paints each segment with its weight. Diagnostic surrogate_r2: how well "
        "that linear model fits.",
        passes=_passes,
        featured=5,
    )
)
