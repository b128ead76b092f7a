"""RISE: randomized input sampling for explanation (Petsiuk, Das and Saenko, BMVC 2018).

Written here by hand: neither captum nor the other libraries this project uses have RISE. As in the
authors' code, N random binary grids of s x s cells (each cell kept with probability p) are upsampled
bilinearly to (s + 1) cells' size and cropped at a random shift, so the soft masks do not all share the
grid's edges; each masked input (the normalised image times the mask: hidden parts show the data set's
mean colour, 0 after normalising) is scored by the target's softmax probability, and

    saliency = sum_i f_target(x * M_i) M_i / (N p),

the expected score given that a pixel was kept. xaidash shows it minus the mean score over all masks (the
expected score of any masked image): a pixel that does not matter is 0, one whose showing raises the target's
probability is positive (red), one whose showing lowers it negative. The shift is the same for every pixel of an
input, so the order of pixels, the paper's map up to that constant and the deletion/insertion curves are
unchanged; the colour bar then reads in Δ probability instead of a band of values near the mean score. The masked inputs of every input and mask share one stream of
model passes (`scored_rows`, halved on out-of-memory). The masks come from the seed alone, on the CPU, and are
rebuilt chunk by chunk, so large images never hold all N full-size masks at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional as F

from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register

_CHUNK = 256  # masks upsampled at a time when the map is accumulated


@dataclass(frozen=True)
class MaskSet:
    """N RISE masks for (H, W) images, kept as their coarse grids and shifts; `masks(index)` builds any of them."""

    grids: torch.Tensor  # (N, s, s) float 0/1
    shifts: torch.Tensor  # (N, 2) long, in [0, cell)
    hw: tuple[int, int]
    cell: tuple[int, int]

    def __len__(self) -> int:
        return len(self.grids)

    def masks(self, index: torch.Tensor) -> torch.Tensor:
        """(len(index), H, W) float masks in [0, 1] on index's device."""
        (h, w), (ch, cw) = self.hw, self.cell
        s = self.grids.shape[1]
        grids = self.grids.to(index.device)[index]
        up = F.interpolate(grids[:, None], size=((s + 1) * ch, (s + 1) * cw), mode="bilinear", align_corners=False)
        shifts = self.shifts.to(index.device)[index]
        rows = shifts[:, :1] + torch.arange(h, device=index.device)  # (n, H)
        cols = shifts[:, 1:] + torch.arange(w, device=index.device)  # (n, W)
        k = torch.arange(len(index), device=index.device)
        return up[k[:, None, None], 0, rows[:, :, None], cols[:, None, :]]


def draw_masks(count: int, grid: int, p: float, hw: tuple[int, int], seed: int) -> MaskSet:
    """The seeded grids and shifts of `count` masks (the same for every input and device)."""
    gen = torch.Generator().manual_seed(int(seed))
    cell = (math.ceil(hw[0] / grid), math.ceil(hw[1] / grid))
    grids = (torch.rand(count, grid, grid, generator=gen) < p).float()
    shifts = torch.stack(
        [torch.randint(0, cell[0], (count,), generator=gen), torch.randint(0, cell[1], (count,), generator=gen)], 1
    )
    return MaskSet(grids, shifts, hw, cell)


def rise_map(scores: torch.Tensor, masks: MaskSet, p: float, device: torch.device) -> torch.Tensor:
    """sum_i scores[:, i] M_i / (N p): (n, N) scores -> (n, H, W) maps, masks rebuilt chunk by chunk."""
    n = len(scores)
    total = torch.zeros(n, masks.hw[0] * masks.hw[1], device=device, dtype=torch.float32)
    for start in range(0, len(masks), _CHUNK):
        index = torch.arange(start, min(start + _CHUNK, len(masks)), device=device)
        total += scores[:, index].float() @ masks.masks(index).flatten(1)
    return (total / (len(masks) * p)).view(n, *masks.hw)


def _passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return 0, params["samples"] * n


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    n, _, h, w = ctx.x.shape
    grid, p, count = int(params["grid"]), float(params["p"]), int(params["samples"])
    if grid > min(h, w):
        raise ExplainError(f"RISE grid {grid} is finer than the {h}x{w} image; pick at most {min(h, w)} cells.")
    device = ctx.x.device
    masks = draw_masks(count, grid, p, (h, w), ctx.seed)

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row i * N + k: input i times mask k.
        i, k = index // count, index % count
        return ctx.x[i] * masks.masks(k).unsqueeze(1).to(ctx.x.dtype), ctx.targets[i]

    scores, used = scored_rows(ctx, n * count, build, probability=True, what="RISE")
    per_mask = scores.view(n, count)
    attr = rise_map(per_mask, masks, p, device) - per_mask.float().mean(1)[:, None, None]
    return MethodOutput(attributions=attr, diagnostics={"batch_size": [float(used)] * n})


register(
    MethodSpec(
        id="rise",
        label="RISE",
        modalities=("image",),
        compute=_compute,
        params=(
            Param(
                "samples",
                "int",
                2000,
                "Random masks N (one masked image each). The map is a Monte Carlo mean: its noise falls as 1/sqrt(N) "
                "(4x the masks, half the noise); on a trained resnet_small/shapes a pixel's spread between seeds was "
                "~7% of the map's range at 2,000 masks, ~15% at 250-500.",
                min=1,
                max=100000,
            ),
            Param(
                "grid", "int", 7, "Cells per side of the coarse random grid (s): larger = finer blobs.", min=2, max=64
            ),
            Param("p", "float", 0.5, "Probability that a grid cell is kept (shown).", min=0.05, max=0.95),
        ),
        signed=True,
        family="perturbation",
        output="probability",
        passes=_passes,
        description=(
            "Shows the image through random smooth masks and averages the masks weighted by the target-class "
            "probability each one leaves (Petsiuk et al., 2018), shown relative to the mean over all masks: red where "
            "showing the pixels raises the class's probability, blue where it lowers it."
        ),
        featured=None,
    )
)
