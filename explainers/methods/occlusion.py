"""Occlusion: slide a patch over the image and record how much the target logit drops (captum)."""

from __future__ import annotations

import math
from typing import Any

from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.explainers.segmentation import fill


def window_size(hw: tuple[int, int], window: int) -> int:
    """0 = automatic: about a seventh of the shorter side (4 px on 28x28, 5 px on 32x32), at least 1."""
    side = min(hw)
    w = window or max(1, round(side / 7))
    if w > side:
        raise ExplainError(f"Occlusion window {w} is larger than the {hw[0]}x{hw[1]} image; pick at most {side}.")
    return w


def _stride(params: dict[str, Any], window: int) -> int:
    return int(params["stride"]) or max(1, window // 2)


def _passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    win = window_size(hw, params["window"])
    stride = _stride(params, win)
    windows = math.prod(math.ceil((side - win) / stride) + 1 for side in hw)  # captum's shift counts
    return 0, (windows + 1) * n  # + the unoccluded input


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    from captum.attr import Occlusion

    c, h, w = ctx.x.shape[1:]
    win = window_size((h, w), params["window"])
    stride = _stride(params, win)
    if stride > win:
        raise ExplainError(
            f"Occlusion stride {stride} is larger than the window {win}: some pixels would never be covered."
        )
    # The fill is built in pixel space, then normalised like the input ("zero" = black, not 0 after normalising).
    baselines = ctx.bundle.prepare(fill(ctx.raw.to(ctx.x.device), params["fill"]))
    attr = Occlusion(ctx.model).attribute(
        ctx.x,
        sliding_window_shapes=(c, win, win),
        strides=(c, stride, stride),
        baselines=baselines,
        target=ctx.targets,
        perturbations_per_eval=max(1, ctx.batch_size // len(ctx.x)),  # captum multiplies it by the batch
    )
    # The window spans all channels, so every channel holds the same value: keep one, not C copies summed.
    return MethodOutput(attributions=attr[:, 0].detach())


register(
    MethodSpec(
        id="occlusion",
        label="Occlusion",
        modalities=("image",),
        compute=_compute,
        params=(
            Param("window", "int", 0, "Patch side in pixels; 0 = about a seventh of the image side.", min=0, max=512),
            Param("stride", "int", 0, "Step between patches in pixels; 0 = half the window.", min=0, max=512),
            Param(
                "fill",
                "choice",
                "zero",
                "What the patch shows: black pixels, the image's mean colour, or a blurred copy.",
                choices=("zero", "mean", "blur"),
            ),
        ),
        signed=True,
        family="perturbation",
        output="logit",
        passes=_passes,
        description=(
            "Covers the image patch by patch and records the drop of the target logit; "
            "each pixel gets the mean drop over the patches that cover it."
        ),
    )
)
