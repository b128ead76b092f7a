"""Ablation-CAM (Desai & Ramaswamy, 2020): channel k's weight is the share of the target's logit y lost when the
channel is zeroed, w_k = (y - y_k) / y, and the map is ReLU(sum_k w_k A_k). No gradients.

As pytorch-grad-cam's AblationCAM, the channel is zeroed in the layer's output (over every token for a vision
transformer, the class token included) and the rest of the model runs on; here one forward hook zeroes a different
channel in every row of a shared pass (`scored_rows`, halved on out-of-memory) instead of swapping in a layer."""

from __future__ import annotations

from typing import Any

import torch

from xaidash.explainers.methods._cam_core import (
    LAYER,
    channels_kept,
    layer_maps,
    layer_width,
    maps_vary_applies,
    weighted_maps,
)
from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle

# |y| below this counts as this much (keeping its sign): a logit of ~0 would make every weight explode.
LOGIT_FLOOR = 1e-6


def ablation_weights(y: torch.Tensor, ablated: torch.Tensor) -> torch.Tensor:
    """(N,) target logits and (N, K) logits with channel k zeroed -> (N, K) weights (y - y_k) / y."""
    safe = torch.where(y.abs() < LOGIT_FLOOR, torch.where(y < 0, -LOGIT_FLOOR, LOGIT_FLOOR), y)
    return (y[:, None] - ablated) / safe[:, None]


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    path = params["layer"]
    acts, logits = layer_maps(ctx, path)  # (N, K, h, w), (N, classes)
    n, k = acts.shape[:2]
    y = logits.gather(1, ctx.targets.view(-1, 1))[:, 0]
    keep: list[torch.Tensor | None] = [None]
    eye = torch.eye(k, device=ctx.x.device)

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row i * K + c: input i with channel c zeroed (the hook reads `keep` in the pass that follows).
        i, c = index // k, index % k
        keep[0] = 1.0 - eye[c]
        return ctx.x[i], ctx.targets[i]

    with channels_kept(ctx.bundle, path, keep):
        scores, used = scored_rows(ctx, n * k, build, what="Ablation-CAM")
    weights = ablation_weights(y, scores.view(n, k))
    return MethodOutput(torch.relu(weighted_maps(weights, acts)), {"batch_size": [float(used)] * n})


def _passes(
    bundle: ModelBundle, params: dict[str, Any], n: int, background: int, hw: tuple[int, int]
) -> tuple[int, int]:
    return 0, n * (layer_width(bundle, params["layer"]) + 1)  # the activations and logit, one per channel


register(
    MethodSpec(
        id="ablationcam",
        label="Ablation-CAM",
        modalities=("image",),
        compute=_compute,
        params=(LAYER,),
        applies=maps_vary_applies,
        signed=False,
        family="cam",
        description="Each feature map weighted by the share of the target's logit lost when that channel is zeroed, "
        "(y - y_k) / y (Desai & Ramaswamy, 2020). No gradients; one model pass per channel.",
        output="logit",
        passes_on_model=_passes,
    )
)
