"""Occlusion: slide a patch over the image and record how much the target logit drops (captum's definition)."""

from __future__ import annotations

import math
from typing import Any

import torch

from xaidash.explainers.methods._common import scored_rows
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


def window_masks(hw: tuple[int, int], win: int, stride: int, device: torch.device) -> torch.Tensor:
    """(P, H, W) float masks of the windows captum's Occlusion slides: starts 0, stride, 2 stride, ...
    (ceil((side - win) / stride) + 1 per side), the last ones clipped at the image border."""
    axes = []
    for side in hw:
        starts = torch.arange(math.ceil((side - win) / stride) + 1, device=device) * stride
        pos = torch.arange(side, device=device)
        axes.append(((pos >= starts[:, None]) & (pos < starts[:, None] + win)).float())  # (P_side, side)
    rows, cols = axes
    return (rows[:, None, :, None] * cols[None, :, None, :]).flatten(0, 1)


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    # What captum's Occlusion computes (each pixel: the mean drop of the target logit over the windows
    # covering it), but captum builds every window's mask in a Python loop and batches one input's
    # windows at a time; here the masks are one tensor and the windows of all inputs share one stream
    # of model passes on the device (tests check the maps against captum's).
    n, _, h, w = ctx.x.shape
    win = window_size((h, w), params["window"])
    stride = _stride(params, win)
    if stride > win:
        raise ExplainError(
            f"Occlusion stride {stride} is larger than the window {win}: some pixels would never be covered."
        )
    device = ctx.x.device
    # The fill is built in pixel space, then normalised like the input ("zero" = black, not 0 after normalising).
    baselines = ctx.bundle.prepare(fill(ctx.raw.to(device), params["fill"]))
    masks = window_masks((h, w), win, stride, device).to(ctx.x.dtype)  # (P, H, W)
    p = len(masks)

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row r < n: input r unoccluded; then row n + i * P + k: input i with window k filled.
        plain = index < n
        k = torch.where(plain, 0, (index - n) % p)
        i = torch.where(plain, index, (index - n) // p)
        m = masks[k].unsqueeze(1) * (~plain).to(masks.dtype).view(-1, 1, 1, 1)
        return ctx.x[i] + m * (baselines[i] - ctx.x[i]), ctx.targets[i]

    scores, used = scored_rows(ctx, n + n * p, build, what="Occlusion")
    drops = scores[:n, None] - scores[n:].view(n, p)  # (N, P)
    flat = masks.flatten(1).to(drops.dtype)
    attr = (drops @ flat) / flat.sum(0)  # every pixel lies in at least one window (stride <= window)
    return MethodOutput(attributions=attr.view(n, h, w).detach(), diagnostics={"batch_size": [float(used)] * n})


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
        featured=6,
    )
)
