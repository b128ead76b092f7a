"""LIME over time segments for series models: the series is cut into `segments` equal stretches of steps, random
sets of segments are hidden (their values from the chosen baseline, as for KernelSHAP: `series_baselines`), and a
weighted linear surrogate of the target probability is fitted on which segments were shown, as lime's own `LimeBase`
fits it with lime_image's kernel on the cosine distance to the unperturbed series (the surrogate image LIME fits here
too: `lime_image`), for all series of the call in one multi-output ridge fit (a test checks it against one LimeBase
call per series). A segment spans every channel; its weight is repeated over its steps ((N, 1, T)).

captum's `Lime` fits the same surrogate when given these coalitions, this kernel and a ridge model (a test checks
it); its defaults (a Lasso on an exponential kernel of the euclidean distance in input space, width 1) weigh a
perturbed series of a hundred standardised steps by about exp(-d^2) ~ 0, so they are not the default here. Every
sample of every series of the call is built on the device and scored in one stream of shared passes."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from xaidash.explainers.methods.lime_image import coalitions, lime_kernel
from xaidash.explainers.methods.series_baselines import (
    baseline_param,
    resolved_segments,
    scored_coalitions,
    segment_fill,
    segments_param,
)
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register


def surrogates(on: np.ndarray, probs: np.ndarray, kernel_width: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """lime's `LimeBase.explain_instance_with_data` fit (feature_selection 'none': every segment) of the (N, S)
    probabilities of N series on their shared (S, k) coalitions: its kernel on the cosine distance to the first
    (unperturbed) sample, its Ridge(alpha=1) with intercept weighted by it, and its weighted R^2. One multi-output
    fit: ridge fits each output on its own, so the weights equal one LimeBase call per series. ((N, k), (N,))."""
    from sklearn.linear_model import Ridge
    from sklearn.metrics import pairwise_distances, r2_score

    distances = pairwise_distances(on, on[:1], metric="cosine").ravel()
    weights = lime_kernel(distances, kernel_width)
    model = Ridge(alpha=1, fit_intercept=True, random_state=seed).fit(on, probs.T, sample_weight=weights)
    r2 = r2_score(probs.T, model.predict(on), sample_weight=weights, multioutput="raw_values")
    return np.asarray(model.coef_, dtype=np.float32).reshape(len(probs), -1), np.asarray(r2, dtype=np.float64)


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    n, samples = len(ctx.x), int(params["samples"])
    labels = resolved_segments(ctx, params)
    on = coalitions(samples, int(labels.max()) + 1, ctx.seed)  # the first shows every segment (lime's convention)
    fill = segment_fill(str(params["baseline"]), ctx.bundle, ctx.x, labels)
    # a forecaster's outputs are values in the series' units: explained as they are (no softmax across steps ahead)
    probability = ctx.bundle.regression is None
    probs, used = scored_coalitions(ctx, fill, on, labels, probability=probability, what="LIME")
    probs_np = probs.double().cpu().numpy()
    weights, r2 = surrogates(on.numpy(), probs_np, float(params["kernel_width"]), ctx.seed)
    return MethodOutput(
        torch.as_tensor(weights)[:, labels].unsqueeze(1),
        {"surrogate_r2": r2.tolist(), "segments": [float(on.shape[1])] * n, "batch_size": [float(used)] * n},
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
