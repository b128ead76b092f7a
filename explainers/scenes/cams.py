"""Class-activation maps of a detector's boxes and a segmenter's regions: Grad-CAM, Eigen-CAM and Ablation-CAM per box,
Seg-Grad-CAM per region. Each hooks one layer (the model spec's `cam_layer` by default) and explains every target
from ONE forward pass: Grad-CAM and Seg-Grad-CAM keep the graph and take each target's gradient in turn
(`retain_graph`; on torchvision's two-stage detectors through the box's own proposal only, `_box_gradient`), Eigen-CAM needs no target, Ablation-CAM scores every target on each batch of ablated channels.

A target's score is `BoxTarget.score` (IoU + confidence of the best-matching detection: pytorch-grad-cam's
`FasterRCNNBoxScoreTarget`) or `RegionTarget.score` (the class's logits summed over the region: its
`SemanticSegmentationTarget`). Maps keep their units (no min-max scaling, unlike pytorch-grad-cam's, which scales each
map to [0, 1]): a colour bar then reads what the weighted activations are; the test scales ours the same way before it
compares with the library. Written here because pytorch-grad-cam runs one forward pass per call and hands back scaled
maps; captum has no detection targets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torchvision.models.detection.generalized_rcnn import GeneralizedRCNN
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.ops import MultiScaleRoIAlign

from xaidash.data.errors import ExplainError
from xaidash.data.specs import Param
from xaidash.explainers.guard import evaluating
from xaidash.explainers.methods.eigen_cam import eigencam_maps
from xaidash.explainers.scenes.registry import (
    SceneMethodContext,
    SceneMethodSpec,
    box_targets,
    region_targets_of,
    register,
    to_image_size,
)
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget

LAYER = Param(
    "layer",
    "layer",
    None,
    "Layer whose feature maps are weighted (default: the model's declared CAM layer, its backbone's last block; "
    "earlier layers give finer, noisier maps).",
)
GRAD_UNITS = "ReLU of the gradient-weighted activations (target score per unit activation × activation)"


def _tensor_out(path: str, out: Any) -> torch.Tensor:
    if isinstance(out, (tuple, list)) and out:
        out = out[0]
    if not isinstance(out, torch.Tensor) or out.dim() != 4:
        raise ExplainError(f"Layer {path!r} does not give one (N, C, h, w) feature map; pick a conv block's layer.")
    return out


def _first(outputs: Any) -> Any:
    """One image's output: torchvision's detection dict, or a segmenter's (C + 1, H, W) logits."""
    return outputs[0]


def forward_with_layer(ctx: SceneMethodContext, path: str, *, grad: bool) -> tuple[torch.Tensor, Any]:
    """Layer `path`'s activations (1, C, h, w) and the model's output for the image, from one forward pass; with
    `grad`, the graph is kept so each target's gradient can be taken from it (the image itself needs none)."""
    store: list[torch.Tensor] = []
    handle = ctx.layer(path).register_forward_hook(lambda m, i, out: store.append(_tensor_out(path, out)))
    try:
        with evaluating(ctx.model), torch.set_grad_enabled(grad):
            # A leaf that asks for a gradient keeps the graph even when the model's weights are frozen.
            x = ctx.image[None].clone().requires_grad_(grad)
            output = _first(ctx.model(x))
    finally:
        handle.remove()
    if not store:
        raise ExplainError(f"Layer {path!r} was not run by the model's forward pass.")
    return store[-1], output


@dataclass
class _RoiPass:
    """What a two-stage detector's RoI pooling got and gave in the forward pass: its inputs (features, proposals,
    image sizes) and the pooled features of every proposal (R, C, 7, 7)."""

    pool: nn.Module
    args: tuple[Any, ...]
    pooled: torch.Tensor


def roi_pool_of(model: nn.Module) -> nn.Module | None:
    """The RoI pooling of torchvision's two-stage detectors (Faster R-CNN and its kin), whose region proposal network
    detaches its proposals: a box's score then reaches the feature maps only through its own proposal's pooled
    features. None for any other model."""
    if not isinstance(model, GeneralizedRCNN) or not isinstance(model.rpn, RegionProposalNetwork):
        return None
    pool = getattr(model.roi_heads, "box_roi_pool", None)
    return pool if isinstance(pool, MultiScaleRoIAlign) else None


def _box_gradient(score: torch.Tensor, acts: torch.Tensor, roi: _RoiPass | None, last: bool) -> torch.Tensor:
    """d score / d acts. Through a detector's RoI pooling: first down to the pooled features (the box head only),
    then back through RoIAlign for the one proposal the score depends on, not all of them (RoIAlign's backward over
    every proposal was two thirds of a box's time on a CPU). The same gradient: the other proposals' rows are 0."""
    if roi is None:
        return torch.autograd.grad(score, acts, retain_graph=not last)[0]
    (per_roi,) = torch.autograd.grad(score, roi.pooled, retain_graph=True)
    rows = per_roi.flatten(1).abs().sum(dim=1).nonzero().flatten()
    if rows.numel() == 0:
        return torch.zeros_like(acts)
    features, proposals, sizes = roi.args
    pooled = roi.pool(features, [proposals[0][rows]], sizes)
    return torch.autograd.grad(pooled, acts, grad_outputs=per_roi[rows], retain_graph=not last)[0]


def gradient_cams(ctx: SceneMethodContext, path: str, *, through_rois: bool = True) -> torch.Tensor:
    """(K, h, w) Grad-CAM maps (Selvaraju et al. 2017), one per target, before ReLU: the layer's activations weighted
    by each target score's spatially averaged gradient, every target's gradient from the same forward pass (on a
    torchvision two-stage detector through its RoI pooling unless `through_rois` is False: see `_box_gradient`)."""
    pool = roi_pool_of(ctx.model) if through_rois else None
    seen: list[_RoiPass] = []
    handle = None
    if pool is not None:
        handle = pool.register_forward_hook(lambda m, args, out: seen.append(_RoiPass(m, tuple(args), out)))
    try:
        acts, output = forward_with_layer(ctx, path, grad=True)
    finally:
        if handle is not None:
            handle.remove()
    roi = seen[-1] if seen and len(seen[-1].args) == 3 else None
    maps = []
    n = len(ctx.targets)
    for k, target in enumerate(ctx.targets):
        ctx.tell(k / max(n, 1), f"Gradient of target {k + 1} of {n}")
        score = target.score(output)
        # A box that matched no detection has a constant score of 0, and so a map of 0.
        grads = _box_gradient(score, acts, roi, last=k == n - 1) if score.requires_grad else torch.zeros_like(acts)
        weights = grads.mean(dim=(2, 3), keepdim=True)
        maps.append((weights * acts.detach()).sum(dim=1)[0])
    return torch.stack(maps)


def _gradcam(ctx: SceneMethodContext, params: dict[str, Any]) -> torch.Tensor:
    box_targets(ctx.targets)
    return to_image_size(torch.relu(gradient_cams(ctx, params["layer"])), ctx.size)


def _seg_gradcam(ctx: SceneMethodContext, params: dict[str, Any]) -> torch.Tensor:
    region_targets_of(ctx.targets)
    return to_image_size(torch.relu(gradient_cams(ctx, params["layer"])), ctx.size)


def box_pixels(box: Sequence[float], size: tuple[int, int]) -> tuple[slice, slice]:
    """The rows and columns of a box, its corners cut to whole pixels (as pytorch-grad-cam's tutorial's int32 cast)
    and kept inside the image."""
    x0, y0, x1, y1 = (int(v) for v in box)
    h, w = size
    return slice(max(y0, 0), min(max(y1, 0), h)), slice(max(x0, 0), min(max(x1, 0), w))


def _minmax(values: torch.Tensor) -> torch.Tensor:
    return (values - values.min()) / (values.max() - values.min() + 1e-7)


def renormalised_in(cam: torch.Tensor, target: BoxTarget | RegionTarget) -> torch.Tensor:
    """`cam` (H, W) min-max scaled inside the target's box (or region), 0 outside: pytorch-grad-cam's detection
    tutorial's `renormalize_cam_in_bounding_boxes` for one box, so a target-free map says where inside THIS box."""
    out = torch.zeros_like(cam)
    if isinstance(target, BoxTarget):
        rows, cols = box_pixels(target.box, (int(cam.shape[0]), int(cam.shape[1])))
        if cam[rows, cols].numel():
            out[rows, cols] = _minmax(cam[rows, cols])
    else:
        inside = target.mask.to(cam.device, torch.bool)
        if bool(inside.any()):
            out[inside] = _minmax(cam[inside])
    return out


def _eigencam(ctx: SceneMethodContext, params: dict[str, Any]) -> torch.Tensor:
    acts, _ = forward_with_layer(ctx, params["layer"], grad=False)
    cam = to_image_size(eigencam_maps(acts.float()), ctx.size)[0]
    return torch.stack([renormalised_in(cam, t) for t in ctx.targets])


def _scores(ctx: SceneMethodContext, output: Any) -> torch.Tensor:
    return torch.stack([t.score(output).detach().float().reshape(()) for t in ctx.targets]).cpu()


@torch.no_grad()
def ablation_weights(ctx: SceneMethodContext, path: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The activations (1, C, h, w) and each target's score drop (K, C) when one channel of the layer is set to 0
    (Desai & Ramaswamy 2020), `ctx.batch_size` ablated copies of the image per forward pass, every target scored on
    each pass. pytorch-grad-cam divides the drop by the unablated score, a constant per target: we keep score units
    (and the weights' signs, which its division flips when a score is negative, as a region's summed logits can be)."""
    acts, output = forward_with_layer(ctx, path, grad=False)
    base = _scores(ctx, output)
    channels = int(acts.shape[1])
    drops = torch.zeros(len(ctx.targets), channels)
    step = max(1, int(ctx.batch_size))
    with evaluating(ctx.model):
        for start in range(0, channels, step):
            chans = torch.arange(start, min(channels, start + step))
            ctx.tell(start / channels, f"Ablating channels {start + 1}-{int(chans[-1]) + 1} of {channels}")

            def ablate(module: torch.nn.Module, inputs: Any, out: torch.Tensor, c: torch.Tensor = chans) -> Any:
                out = _tensor_out(path, out).clone()
                out[torch.arange(len(c)), c.to(out.device)] = 0
                return out

            handle = ctx.layer(path).register_forward_hook(ablate)
            try:
                outputs = ctx.model(ctx.image[None].expand(len(chans), -1, -1, -1))
            finally:
                handle.remove()
            for j, c in enumerate(chans.tolist()):
                drops[:, c] = base - _scores(ctx, outputs[j])
    return acts, drops


def _ablationcam(ctx: SceneMethodContext, params: dict[str, Any]) -> torch.Tensor:
    acts, drops = ablation_weights(ctx, params["layer"])
    maps = torch.einsum("kc,chw->khw", drops.to(acts.device), acts[0].float())
    return to_image_size(torch.relu(maps), ctx.size)


register(
    SceneMethodSpec(
        id="gradcam",
        label="Grad-CAM",
        tasks=("detect",),
        params=(LAYER,),
        compute=_gradcam,
        description="Each box's score (IoU + confidence of the matching detection) differentiated with respect to a "
        "layer's feature maps; the maps weighted by their averaged gradients, ReLU. One forward pass for every box.",
        reference="pytorch_grad_cam.GradCAM with FasterRCNNBoxScoreTarget (before its min-max scaling)",
        units=GRAD_UNITS,
        signed=False,
        featured=2,
    )
)
register(
    SceneMethodSpec(
        id="eigencam",
        label="Eigen-CAM",
        tasks=("detect", "segment"),
        params=(LAYER,),
        compute=_eigencam,
        description="The first principal component of a layer's feature maps (no gradients, the same for every "
        "target), rescaled to [0, 1] inside each box or region and 0 outside, as pytorch-grad-cam's Faster R-CNN "
        "tutorial does: where inside this object the dominant pattern lies.",
        reference="pytorch_grad_cam.EigenCAM + the tutorial's renormalize_cam_in_bounding_boxes, one box at a time",
        units="Eigen-CAM rescaled inside the target (0 = its lowest, 1 = its highest)",
        signed=False,
        featured=1,
    )
)
register(
    SceneMethodSpec(
        id="ablationcam",
        label="Ablation-CAM",
        tasks=("detect", "segment"),
        params=(LAYER,),
        compute=_ablationcam,
        description="Each channel of a layer set to 0 in turn (batched): how much the target's score drops weights "
        "that channel's feature map; ReLU. One pass per channel, shared by every target.",
        reference="pytorch_grad_cam.AblationCAM (drop not divided by the score; channels set to 0)",
        units="ReLU of the score-drop-weighted activations (score drop × activation)",
        signed=False,
        featured=5,
    )
)
register(
    SceneMethodSpec(
        id="seg_gradcam",
        label="Seg-Grad-CAM",
        tasks=("segment",),
        params=(LAYER,),
        compute=_seg_gradcam,
        description="Grad-CAM of a class's logits summed over a region (Vinogradova et al. 2020): where the features "
        "that make the region that class lie. One forward pass for every region.",
        reference="pytorch_grad_cam.GradCAM with SemanticSegmentationTarget (before its min-max scaling)",
        units=GRAD_UNITS,
        signed=False,
        featured=2,
    )
)
