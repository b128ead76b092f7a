"""Class activation maps for convolutional image models: CAM, Grad-CAM, Grad-CAM++, Guided Grad-CAM.

Grad-CAM and Guided Grad-CAM are captum's. captum has neither CAM nor Grad-CAM++, so those
two are written here on top of captum's layer activations and layer gradients (captum
places and removes the hooks). Coarse maps are returned at the layer's resolution (N, h, w);
`explain()` upsamples them bilinearly to the input.

A layer whose spec declares a `FeatureLayout` (vision transformer tokens (N, T, C), Swin's
channels-last (N, h, w, C)) is read through `_cam_core.maps_and_grads` (captum's
`compute_layer_gradients_and_eval`, the call LayerGradCam itself makes; shared with the other
CAMs), and its activations and gradients are laid out as (N, C, h, w) before the same formulas apply: LayerGradCam would average the gradients over the wrong axes.
"""

from __future__ import annotations

from typing import Any

import torch
from captum.attr import (
    GuidedBackprop,
    GuidedGradCam,
    LayerActivation,
    LayerAttribution,
    LayerGradCam,
    LayerGradientXActivation,
)
from torch import nn

from xaidash.explainers.methods._cam_core import LAYER, conv_applies, declared_layout, maps_and_grads
from xaidash.explainers.methods._common import grad_leaf, per_input, per_slice
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle


def _cam_applies(bundle: ModelBundle) -> str | None:
    reason = conv_applies(bundle)
    if reason:
        return reason
    if not bundle.spec.gap_classifier:
        return "CAM needs global average pooling followed by one linear layer (use Grad-CAM instead)"
    return None


def gradcam_maps(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """Grad-CAM from (N, K, h, w) activations and gradients -> (N, h, w): the formula of captum's LayerGradCam
    (channel weights = spatially averaged gradients, weighted sum of the maps, ReLU)."""
    return torch.relu((grads.mean(dim=(2, 3), keepdim=True) * acts).sum(dim=1))


def _cam(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    # CAM (Zhou et al., 2016): sum_k w[target, k] * A_k, with A the feature maps that global average
    # pooling reads and w the following linear layer's weights. Kept signed, as in the paper.
    spec = ctx.bundle.spec
    if not spec.gap_classifier or not spec.last_conv:
        raise ExplainError(f"CAM does not apply to {spec.name}: {_cam_applies(ctx.bundle)}")
    fc = ctx.bundle.layer(spec.gap_classifier)
    if not isinstance(fc, nn.Linear):
        raise ExplainError(f"CAM expects {spec.gap_classifier!r} to be a linear layer, found {type(fc).__name__}.")
    acts = LayerActivation(ctx.model, ctx.bundle.layer(spec.last_conv))
    layout = spec.feature_layout(spec.last_conv)

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        a = layout.to_maps(acts.attribute(ctx.x[s]))
        w = fc.weight.detach()[ctx.targets[s]]  # (n, K)
        if a.dim() != 4 or a.shape[1] != w.shape[1]:
            raise ExplainError(
                f"CAM needs {spec.last_conv!r} to output (N, {w.shape[1]}, h, w) feature maps feeding "
                f"{spec.gap_classifier!r}; got {tuple(a.shape)}."
            )
        return torch.einsum("nk,nkhw->nhw", w.to(a.dtype), a), {}

    return per_slice(len(ctx.x), ctx.batch_size, one)


def _gradcam(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    if declared_layout(ctx, params["layer"]):
        return per_slice(
            len(ctx.x), ctx.batch_size, lambda s: (gradcam_maps(*maps_and_grads(ctx, params["layer"], s)), {})
        )
    gc = LayerGradCam(ctx.model, ctx.bundle.layer(params["layer"]))

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        # relu_attributions=True as in the paper: only features with a positive influence on the class.
        maps = gc.attribute(grad_leaf(ctx.x[s]), target=ctx.targets[s], relu_attributions=True)
        return maps[:, 0], {}  # (n, 1, h, w) -> (n, h, w), so explain() upsamples it

    return per_slice(len(ctx.x), ctx.batch_size, one)


def gradcampp_maps(acts: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """Grad-CAM++ (Chattopadhay et al., 2018) from a layer's activations and score gradients, (N, K, h, w) -> (N, h, w).

    With Y = exp(S) for the class score S and a piecewise-linear network, the paper's second and
    third derivatives of Y are exp(S) g^2 and exp(S) g^3 (g = dS/dA), so exp(S) cancels in
    alpha = g^2 / (2 g^2 + sum_ab A_ab g^3). The weights sum alpha * relu(dY/dA); the remaining
    exp(S) factor scales a whole map by a positive constant and is dropped (it overflows for large scores).
    """
    g2, g3 = grads.pow(2), grads.pow(3)
    denom = 2 * g2 + acts.sum(dim=(2, 3), keepdim=True) * g3
    alpha = g2 / torch.where(denom != 0, denom, torch.ones_like(denom))  # g == 0 there, so alpha = 0
    weights = (alpha * torch.relu(grads)).sum(dim=(2, 3), keepdim=True)
    return torch.relu((weights * acts).sum(dim=1))


def _gradcampp(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    if declared_layout(ctx, params["layer"]):
        return per_slice(
            len(ctx.x), ctx.batch_size, lambda s: (gradcampp_maps(*maps_and_grads(ctx, params["layer"], s)), {})
        )
    layer = ctx.bundle.layer(params["layer"])
    acts = LayerActivation(ctx.model, layer)
    grads = LayerGradientXActivation(ctx.model, layer, multiply_by_inputs=False)  # plain layer gradients

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        a = acts.attribute(ctx.x[s])
        if a.dim() != 4:
            raise ExplainError(
                f"Grad-CAM++ needs (N, K, h, w) feature maps at {params['layer']!r}; got {tuple(a.shape)}."
            )
        g = grads.attribute(grad_leaf(ctx.x[s]), target=ctx.targets[s])
        return gradcampp_maps(a.detach(), g.detach()), {}

    return per_slice(len(ctx.x), ctx.batch_size, one)


def _guided_gradcam(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    if declared_layout(ctx, params["layer"]):
        return _guided_gradcam_declared(ctx, params["layer"])
    ggc = GuidedGradCam(ctx.model, ctx.bundle.layer(params["layer"]))

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        # Bilinear upsampling of the Grad-CAM factor, as in the paper (captum defaults to nearest).
        return ggc.attribute(grad_leaf(ctx.x[s]), target=ctx.targets[s], interpolate_mode="bilinear"), {}

    return per_slice(len(ctx.x), ctx.batch_size, one)


def _guided_gradcam_declared(ctx: MethodContext, path: str) -> MethodOutput:
    """Guided Grad-CAM on a declared layout: what captum's GuidedGradCam computes (guided backprop times
    the Grad-CAM map upsampled bilinearly), with the Grad-CAM factor read through the layout."""
    gbp = GuidedBackprop(ctx.model)

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cam = gradcam_maps(*maps_and_grads(ctx, path, s)).unsqueeze(1)
        guided = gbp.attribute(grad_leaf(ctx.x[s]), target=ctx.targets[s])
        return guided * LayerAttribution.interpolate(cam, tuple(guided.shape[2:]), interpolate_mode="bilinear"), {}

    return per_slice(len(ctx.x), ctx.batch_size, one)


register(
    MethodSpec(
        id="cam",
        label="CAM",
        modalities=("image",),
        compute=_cam,
        applies=_cam_applies,
        signed=True,
        family="cam",
        description="Class activation map (Zhou et al., 2016): the last feature maps weighted by the target's "
        "weights in the linear layer after global average pooling. Signed: negative where features count against the class.",
        output="logit",
        passes=per_input(fwd=1),  # the feature maps; the weights are read, not computed
    )
)

register(
    MethodSpec(
        id="gradcam",
        label="Grad-CAM",
        modalities=("image",),
        compute=_gradcam,
        params=(LAYER,),
        applies=conv_applies,
        signed=False,
        family="cam",
        description="Feature maps of a conv layer weighted by their spatially averaged gradients, then ReLU "
        "(Selvaraju et al., 2017). Coarse: the layer's resolution, upsampled.",
        output="logit",
        passes=per_input(fwd_bwd=1),
        featured=1,
    )
)

register(
    MethodSpec(
        id="gradcampp",
        label="Grad-CAM++",
        modalities=("image",),
        compute=_gradcampp,
        params=(LAYER,),
        applies=conv_applies,
        signed=False,
        family="cam",
        description="Grad-CAM with per-location weights from higher-order gradient terms (Chattopadhay et al., 2018); "
        "better when several objects of the class appear.",
        output="logit",
        passes=per_input(fwd_bwd=1, fwd=1),  # layer activations, then layer gradients
    )
)

register(
    MethodSpec(
        id="guided_gradcam",
        label="Guided Grad-CAM",
        modalities=("image",),
        compute=_guided_gradcam,
        params=(LAYER,),
        applies=conv_applies,
        signed=True,
        family="cam",
        description="Guided Backprop multiplied by the upsampled Grad-CAM map: fine detail, class-specific (Selvaraju et al., 2017).",
        output="logit",
        passes=per_input(fwd_bwd=2),  # Grad-CAM and Guided Backprop, one pass each
    )
)
