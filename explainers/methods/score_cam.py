"""Score-CAM (Wang et al., 2020): each channel of a layer, upsampled to the input and min-max normalised to [0, 1],
masks the input; its weight is how much the target's softmax probability rises over the fully masked input
(C(A_k) = p(x * H_k) - p(x_b)), and the map is ReLU(sum_k C(A_k) A_k). No gradients.

As in the paper and pytorch-grad-cam's ScoreCAM, the mask multiplies the model's (normalised) input, so a masked
pixel is the data set's mean colour and the fully masked input x_b is the mean image. pytorch-grad-cam instead
takes a softmax of the channels' logits as weights; the paper's increase in probability is kept here. The masked
inputs are built on the device chunk by chunk and scored in shared passes (`scored_rows`, halved on out-of-memory)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from xaidash.explainers.methods._cam_core import LAYER, layer_maps, layer_width, maps_vary_applies, weighted_maps
from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle


def score_masks(acts: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """(R, h, w) activation maps -> (R, H, W) masks: upsampled bilinearly, min-max normalised to [0, 1]."""
    up = F.interpolate(acts[:, None], size=hw, mode="bilinear", align_corners=False)[:, 0]
    lo = up.flatten(1).amin(1).view(-1, 1, 1)
    span = up.flatten(1).amax(1).view(-1, 1, 1) - lo
    return torch.where(span > 0, (up - lo) / torch.where(span > 0, span, 1.0), 0.0)


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    acts, _ = layer_maps(ctx, params["layer"])  # (N, K, h, w)
    n, k = acts.shape[:2]
    hw = (int(ctx.x.shape[2]), int(ctx.x.shape[3]))
    if acts.shape[2] * acts.shape[3] < 2:
        raise ExplainError(
            f"Score-CAM needs feature maps with more than one location, but layer {params['layer']!r} gives 1x1 "
            "maps at this input size: pick an earlier layer or a larger input."
        )

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row i * (K + 1) + c: input i masked by channel c; c == K: the fully masked input (mask 0).
        i, c = index // (k + 1), index % (k + 1)
        masks = score_masks(acts[i, c.clamp(max=k - 1)], hw) * (c < k).to(acts.dtype).view(-1, 1, 1)
        return ctx.x[i] * masks[:, None].to(ctx.x.dtype), ctx.targets[i]

    scores, used = scored_rows(ctx, n * (k + 1), build, probability=True, what="Score-CAM")
    p = scores.view(n, k + 1)
    # A constant map (1x1 maps, a dead channel) gives an all-zero mask, the fully masked input itself: its
    # weight is 0 exactly, not the rounding noise of two passes over that input in different batches.
    varies = acts.flatten(2).amax(2) > acts.flatten(2).amin(2)
    weights = torch.where(varies, p[:, :k] - p[:, k:], 0.0)  # rise of the target's probability over x_b
    return MethodOutput(torch.relu(weighted_maps(weights, acts)), {"batch_size": [float(used)] * n})


def _passes(
    bundle: ModelBundle, params: dict[str, Any], n: int, background: int, hw: tuple[int, int]
) -> tuple[int, int]:
    return 0, n * (layer_width(bundle, params["layer"]) + 2)  # the activations, one per channel, the masked input


register(
    MethodSpec(
        id="scorecam",
        label="Score-CAM",
        modalities=("image",),
        compute=_compute,
        params=(LAYER,),
        applies=maps_vary_applies,
        signed=False,
        family="cam",
        description="Each feature map, upsampled and scaled to [0, 1], masks the input; its weight is the rise of "
        "the target's probability it gives (Wang et al., 2020). No gradients; one model pass per channel.",
        output="probability",
        passes_on_model=_passes,
    )
)
