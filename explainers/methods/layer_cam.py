"""Layer-CAM (Jiang et al., 2021): every location of a layer's feature maps weighted by its own positive gradient,
ReLU(sum_k ReLU(dS/dA_k) * A_k). No spatial pooling of the gradients, so it keeps finer detail than Grad-CAM,
above all at earlier layers. Formula as pytorch-grad-cam's LayerCAM (which clips the map at 0 too)."""

from __future__ import annotations

import torch

from xaidash.explainers.methods._cam_core import LAYER, conv_applies, gradient_cam
from xaidash.explainers.methods._common import per_input
from xaidash.explainers.registry import MethodSpec, register


def layercam_maps(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """(N, K, h, w) activations and target-score gradients -> (N, h, w) Layer-CAM maps."""
    return torch.relu((torch.relu(grads) * acts).sum(dim=1))


register(
    MethodSpec(
        id="layercam",
        label="Layer-CAM",
        modalities=("image",),
        compute=gradient_cam(layercam_maps),
        params=(LAYER,),
        applies=conv_applies,
        signed=False,
        family="cam",
        description="Feature maps weighted location by location by their positive gradients, summed over channels, "
        "then ReLU (Jiang et al., 2021): finer than Grad-CAM, useful at earlier layers.",
        output="logit",
        passes=per_input(fwd_bwd=1),
    )
)
