"""Adaptive occlusion: occlude, then shrink the occluded area while the prediction stays changed, to find the
smallest region whose occlusion changes the prediction.

The search starts with the whole image hidden (by the `fill`). Each step tries four smaller rectangles, the
current one with its top, bottom, left or right side moved in by `cut` of its height or width, and keeps the one
that leaves the target the least probability among those that still change the prediction (the target's
probability at most `keep` times its value on the unoccluded image). When none does, the cut is halved (down to
one pixel) and the step is spent. The number of steps is fixed, so one call's model passes are known beforehand:
per input 1 unoccluded, 1 fully occluded and 4 per step (the speed benchmark and its pass-count test read them).

The map: each pixel gets the target's probability drop with the smallest rectangle hidden, times the share of the
search's rectangles (the whole image and every kept one) that contain it; the smallest rectangle is brightest,
the rectangles the search passed through fade outwards. When hiding the whole image does not change the
prediction there is no such region: every pixel gets the drop with the whole image hidden and the diagnostic
`changed` is 0.

The occluding passes are the ones occlusion.py makes (the fill in pixel space, normalised like the input, rows
built on the device and run in shared batched passes by `scored_rows`): captum's `Occlusion` slides a fixed
window and returns per-pixel means, and `FeatureAblation` hides one group of a partition at a time, while the
search scores nested, overlapping rectangles chosen from the previous step's scores. Only the shrinking search
below is written by hand.
"""

from __future__ import annotations

from typing import Any

import torch

from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.explainers.segmentation import fill

SIDES = 4  # candidates per step: the top, bottom, left or right side moved in


def _passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return 0, n * (2 + SIDES * int(params["steps"]))


def box_masks(boxes: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """(..., H, W) float masks of boxes (..., 4) given as [top, bottom, left, right) in pixels."""
    rows = torch.arange(hw[0], device=boxes.device)
    cols = torch.arange(hw[1], device=boxes.device)
    r = (rows >= boxes[..., 0:1]) & (rows < boxes[..., 1:2])  # (..., H)
    c = (cols >= boxes[..., 2:3]) & (cols < boxes[..., 3:4])  # (..., W)
    return (r[..., :, None] & c[..., None, :]).float()


def candidates(boxes: torch.Tensor, cut: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The four shrunk boxes of each box (N, 4) -> (N, 4, 4), cutting `cut` (N,) of the height or width (at least
    one pixel), and whether each leaves at least one pixel (N, 4)."""
    height, width = boxes[:, 1] - boxes[:, 0], boxes[:, 3] - boxes[:, 2]
    dh = torch.clamp((cut * height).floor().long(), min=1)
    dw = torch.clamp((cut * width).floor().long(), min=1)
    out = boxes[:, None, :].repeat(1, SIDES, 1)
    out[:, 0, 0] += dh  # top side down
    out[:, 1, 1] -= dh  # bottom side up
    out[:, 2, 2] += dw  # left side right
    out[:, 3, 3] -= dw  # right side left
    valid = (out[..., 1] > out[..., 0]) & (out[..., 3] > out[..., 2])
    return out, valid


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    n, _, h, w = ctx.x.shape
    device = ctx.x.device
    baselines = ctx.bundle.prepare(fill(ctx.raw.to(device), params["fill"]))

    def score(boxes: torch.Tensor) -> torch.Tensor:
        """The target's probability with each box (N, K, 4) hidden: (N, K); a box of zero size hides nothing."""
        k = boxes.shape[1]

        def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            i = index // k
            m = box_masks(boxes.view(-1, 4)[index], (h, w)).unsqueeze(1).to(ctx.x.dtype)
            return ctx.x[i] + m * (baselines[i] - ctx.x[i]), ctx.targets[i]

        probs, used[0] = scored_rows(ctx, n * k, build, probability=True, what="Adaptive occlusion")
        return probs.view(n, k)

    used = [0]
    nothing = torch.zeros(n, 1, 4, dtype=torch.long, device=device)
    whole = torch.tensor([0, h, 0, w], device=device).repeat(n, 1)
    p0 = score(nothing)[:, 0]
    bar = params["keep"] * p0  # at or below this, the prediction counts as changed
    current, p_current = whole.clone(), score(whole[:, None])[:, 0]
    changed = p_current <= bar
    history = [whole.clone()]  # every kept box per step (unchanged rows repeat theirs)
    kept = torch.ones(n, device=device)  # how many boxes each input's search kept, the whole image included
    cut = torch.full((n,), float(params["cut"]), device=device)
    for _ in range(int(params["steps"])):
        boxes, valid = candidates(current, cut)
        p = score(boxes)
        ok = valid & (p <= bar[:, None]) & changed[:, None]  # inputs with no changing region do not search
        best = torch.where(ok, p, torch.inf).argmin(1)
        took = ok.any(1)
        current = torch.where(took[:, None], boxes[torch.arange(n, device=device), best], current)
        p_current = torch.where(took, p.gather(1, best[:, None])[:, 0], p_current)
        cut = torch.where(took, cut, cut / 2)
        kept += took.float()
        history.append(torch.where(took[:, None], current, torch.zeros_like(current)))  # zero boxes hide nothing
    inside = box_masks(torch.stack(history, 1), (h, w)).sum(1)  # (N, H, W): kept boxes containing each pixel
    drop = p0 - p_current
    attr = drop[:, None, None] * inside / kept[:, None, None]
    area = (current[:, 1] - current[:, 0]) * (current[:, 3] - current[:, 2])
    diagnostics = {
        "changed": changed.float().tolist(),
        "region_share": (area.float() / (h * w)).tolist(),
        "probability_hidden": p_current.tolist(),
        "batch_size": [float(used[0])] * n,
    }
    return MethodOutput(attributions=attr.detach(), diagnostics=diagnostics)


register(
    MethodSpec(
        id="adaptive_occlusion",
        label="Adaptive occlusion",
        modalities=("image",),  # rectangles of pixels: a 2-D grid
        compute=_compute,
        params=(
            Param("steps", "int", 24, "Shrinking steps; each tries 4 smaller rectangles (4 passes).", min=1, max=200),
            Param(
                "keep",
                "float",
                0.5,
                "The prediction counts as changed when the target's probability falls to at most this share of "
                "its value on the unoccluded image.",
                min=0.01,
                max=0.99,
            ),
            Param(
                "cut",
                "float",
                0.5,
                "First cut: the share of a side moved in per step (halved when none helps).",
                min=0.05,
                max=0.9,
            ),
            Param(
                "fill",
                "choice",
                "blur",
                "What the hidden rectangle shows: a blurred copy (the default: it found the object best on shapes), "
                "the image's mean colour, or black pixels.",
                choices=("blur", "mean", "zero"),
            ),
        ),
        signed=True,
        family="perturbation",
        output="probability",
        passes=_passes,
        description=(
            "Hides the whole image, then shrinks the hidden rectangle side by side while hiding it still changes "
            "the prediction, to the smallest region that does; brightest there, fading over the larger rectangles "
            "the search passed through."
        ),
    )
)
