"""XGrad-CAM (Fu et al., 2020): channel weights sum_ij(dS/dA_k * A_k) / sum_ij A_k, the gradient averaged with
the activation as weight rather than uniformly (Grad-CAM), then ReLU(sum_k w_k A_k). Formula as pytorch-grad-cam's
XGradCAM; a channel whose activations sum to 0 gets weight 0 (pytorch-grad-cam adds 1e-7 to the sum instead)."""

from __future__ import annotations

import torch

from xaidash.explainers.methods._cam_core import LAYER, conv_applies, gradient_cam, weighted_maps
from xaidash.explainers.methods._common import per_input
from xaidash.explainers.registry import MethodSpec, register


def xgradcam_maps(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """(N, K, h, w) activations and target-score gradients -> (N, h, w) XGrad-CAM maps."""
    total = acts.sum(dim=(2, 3))
    ok = total.abs() > 1e-12
    weights = torch.where(ok, (grads * acts).sum(dim=(2, 3)) / torch.where(ok, total, 1.0), 0.0)
    return torch.relu(weighted_maps(weights, acts))


register(
    MethodSpec(
        id="xgradcam",
        label="XGrad-CAM",
        modalities=("image",),
        compute=gradient_cam(xgradcam_maps),
        params=(LAYER,),
        applies=conv_applies,
        signed=False,
        family="cam",
        description="Grad-CAM with each channel's gradient averaged in proportion to its activation, "
        "sum(grad * act) / sum(act), then ReLU (Fu et al., 2020).",
        output="logit",
        passes=per_input(fwd_bwd=1),
    )
)
