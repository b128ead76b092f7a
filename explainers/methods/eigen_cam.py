"""Eigen-CAM (Muhammad & Yeasin, 2020): the projection of a layer's activations, positions x channels, centred over
the positions, on their first principal component (right singular vector), then ReLU. No gradients and no class:
the map is the same whatever the target, declared as explaining no output ("activations"). As pytorch-grad-cam's
`get_2d_projection`, with its sign correction (`get_2d_projection_with_sign_correction`: the singular vector's
sign is arbitrary, so the map is flipped when its most negative value is larger in size than its largest)."""

from __future__ import annotations

from typing import Any

import torch

from xaidash.explainers.methods._cam_core import LAYER, conv_applies, layer_maps
from xaidash.explainers.methods._common import per_input
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register


def eigencam_maps(acts: torch.Tensor) -> torch.Tensor:
    """(N, K, h, w) activations -> (N, h, w) Eigen-CAM maps."""
    n, _, h, w = acts.shape
    m = acts.flatten(2).transpose(1, 2).double()  # (N, h w, K): one row per position
    m = m - m.mean(dim=1, keepdim=True)
    _, _, vh = torch.linalg.svd(m, full_matrices=False)
    proj = (m @ vh[:, 0, :, None])[..., 0]  # (N, h w)
    flip = proj.amin(dim=1).abs() > proj.amax(dim=1).abs()
    proj = torch.where(flip[:, None], -proj, proj)
    return torch.relu(proj).view(n, h, w).to(acts.dtype)


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    acts, _ = layer_maps(ctx, params["layer"])
    return MethodOutput(eigencam_maps(acts))


register(
    MethodSpec(
        id="eigencam",
        label="Eigen-CAM",
        modalities=("image",),
        compute=_compute,
        params=(LAYER,),
        applies=conv_applies,
        signed=False,
        family="cam",
        description="The first principal component of a layer's feature maps (Muhammad & Yeasin, 2020): where the "
        "layer's dominant activation pattern lies. Class-agnostic: no gradients, the same map for every target.",
        output="activations",
        passes=per_input(fwd=1),
    )
)
