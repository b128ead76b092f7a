"""Class activation maps over a 1-D convolution for series models: CAM, Grad-CAM, Grad-CAM++, Layer-CAM and
XGrad-CAM. A series model declares its conv layers' outputs (N, C, L) as `FeatureLayout("ncl")`, which the CAM core
(`_cam_core.maps_and_grads`) reads as (N, C, 1, L) feature maps, so the image formulas apply unchanged; the (N, 1, L)
map is then interpolated linearly over time to the series' T steps, (N, 1, T): one value per step for all channels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from xaidash.explainers.methods._cam_core import conv_applies, maps_and_grads
from xaidash.explainers.methods._common import per_input, per_slice
from xaidash.explainers.methods.cam import _cam, _cam_applies, gradcam_maps, gradcampp_maps
from xaidash.explainers.methods.layer_cam import layercam_maps
from xaidash.explainers.methods.xgrad_cam import xgradcam_maps
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register

MODALITIES = ("series",)
LAYER = Param(
    "layer",
    "layer",
    None,
    "1-D convolution whose feature maps over time are weighted (default: the last one; earlier layers give finer, "
    "noisier maps).",
)
Maps = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def over_steps(maps: torch.Tensor, steps: int) -> torch.Tensor:
    """(N, 1, L) maps of a 1-D conv layer -> (N, 1, T) by linear interpolation over time."""
    if maps.dim() != 3 or maps.shape[1] != 1:
        raise ExplainError(
            f"A series CAM needs a 1-D convolution's maps over time (N, 1, L); got {tuple(maps.shape)}: declare the "
            "layer's output as FeatureLayout('ncl')."
        )
    if maps.shape[2] == steps:
        return maps
    return torch.nn.functional.interpolate(maps, size=steps, mode="linear", align_corners=False)


def _gradient_cam(formula: Maps) -> Callable[[MethodContext, dict[str, Any]], MethodOutput]:
    def compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
        steps = int(ctx.x.shape[-1])

        def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            return over_steps(formula(*maps_and_grads(ctx, params["layer"], s)), steps), {}

        return per_slice(len(ctx.x), ctx.batch_size, one)

    return compute


def _class_activation_map(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    out = _cam(ctx, params)
    out.attributions = over_steps(out.attributions, int(ctx.x.shape[-1]))
    return out


def _register(
    method_id: str, label: str, compute: Any, description: str, *, signed: bool = False, **extra: Any
) -> None:
    register(
        MethodSpec(
            id=method_id,
            label=label,
            modalities=MODALITIES,
            compute=compute,
            signed=signed,
            family="cam",
            description=description + " Coarse: the layer's time resolution, interpolated linearly to the steps.",
            output="logit",
            **extra,
        )
    )


_register(
    "cam",
    "CAM",
    _class_activation_map,
    "Class activation map (Zhou et al., 2016): the last 1-D feature maps weighted by the target's weights in the "
    "linear layer after global average pooling. Signed: negative where features count against the class.",
    signed=True,
    applies=_cam_applies,
    passes=per_input(fwd=1),
)
_register(
    "gradcam",
    "Grad-CAM",
    _gradient_cam(gradcam_maps),
    "Feature maps of a 1-D conv layer weighted by their time-averaged gradients, then ReLU (Selvaraju et al., 2017).",
    params=(LAYER,),
    applies=conv_applies,
    passes=per_input(fwd_bwd=1),
    featured=2,
)
_register(
    "gradcampp",
    "Grad-CAM++",
    _gradient_cam(gradcampp_maps),
    "Grad-CAM with per-step weights from higher-order gradient terms (Chattopadhay et al., 2018); better when the "
    "class's pattern appears more than once.",
    params=(LAYER,),
    applies=conv_applies,
    passes=per_input(fwd_bwd=1),
)
_register(
    "layercam",
    "Layer-CAM",
    _gradient_cam(layercam_maps),
    "Feature maps weighted step by step by their positive gradients, summed over channels, then ReLU (Jiang et al., "
    "2021): finer than Grad-CAM, useful at earlier layers.",
    params=(LAYER,),
    applies=conv_applies,
    passes=per_input(fwd_bwd=1),
)
_register(
    "xgradcam",
    "XGrad-CAM",
    _gradient_cam(xgradcam_maps),
    "Grad-CAM with each channel's gradient averaged in proportion to its activation, sum(grad * act) / sum(act), "
    "then ReLU (Fu et al., 2020).",
    params=(LAYER,),
    applies=conv_applies,
    passes=per_input(fwd_bwd=1),
)
