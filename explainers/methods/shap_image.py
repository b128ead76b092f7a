"""SHAP for images: shap's GradientExplainer (expected gradients) and DeepExplainer (DeepLIFT
against a background set), and model-agnostic KernelSHAP over superpixels (captum's KernelShap).

Background: the samples `explain(..., background=...)` passes (prepared training images). Without
them a documented stand-in is used: a blurred copy of every input plus one black image, and the
diagnostic 'background_fallback' is 1 for every input.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.explainers.segmentation import blur, fill, hide_param, segment, superpixel_params
from xaidash.models.bundle import ModelBundle


class TargetLogit(nn.Module):
    """The model's logit for one class, as an (N, 1) output. shap explains every output column it
    sees (classes last); handing it one column costs one backward pass per sample instead of one per class."""

    def __init__(self, model: nn.Module, target: int):
        super().__init__()
        self.model = model
        self.target = target

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)[:, self.target : self.target + 1]


def background_set(ctx: MethodContext, size: int) -> tuple[torch.Tensor, bool]:
    """(background (B, C, H, W) normalised on the device, whether the stand-in was used), at most `size` samples."""
    device = ctx.x.device
    if ctx.background is not None:
        bg = torch.as_tensor(ctx.background, dtype=torch.float32).to(device)
        if bg.dim() != 4 or tuple(bg.shape[1:]) != tuple(ctx.x.shape[1:]):
            raise ExplainError(
                f"Background samples must have shape (N, {', '.join(map(str, ctx.x.shape[1:]))}), got {tuple(bg.shape)}."
            )
        if len(bg) == 0:
            raise ExplainError("The background set is empty: pass some prepared training images.")
        used = False
    else:
        raw = ctx.raw.to(device)
        bg = ctx.bundle.prepare(torch.cat([blur(raw), torch.zeros_like(raw[:1])]))
        used = True
    if len(bg) > size:
        pick = torch.randperm(len(bg), generator=torch.Generator().manual_seed(ctx.seed))[:size]
        bg = bg[pick.to(device)]
    return bg, used


@torch.no_grad()
def _logits(model: nn.Module, x: torch.Tensor, batch_size: int) -> torch.Tensor:
    return torch.cat([model(x[i : i + batch_size]).float() for i in range(0, len(x), batch_size)])


def _by_target(ctx: MethodContext, explain_group: Callable[[nn.Module, torch.Tensor], np.ndarray]) -> torch.Tensor:
    """Run `explain_group(TargetLogit(model, t), inputs)` once per distinct target, batching the inputs
    that share it; returns (N, C, H, W) attributions in input order."""
    out = torch.zeros(ctx.x.shape, dtype=torch.float32)
    for t in torch.unique(ctx.targets).tolist():
        idx = (ctx.targets == t).nonzero().flatten()
        values = explain_group(TargetLogit(ctx.model, int(t)), ctx.x[idx].detach())
        values = values[0] if isinstance(values, list) else values  # older shap: a list, one per output
        values = np.asarray(values)
        if values.ndim == ctx.x.dim() + 1:  # shap >= 0.45: output axis last
            values = values[..., 0]
        out[idx.cpu()] = torch.as_tensor(values, dtype=torch.float32)
    return out


def additivity_gap(ctx: MethodContext, attr: torch.Tensor, bg: torch.Tensor) -> list[float]:
    """|sum of attributions - (f(x) - E[f(background)])| for the target logit, per input."""
    fx = _logits(ctx.model, ctx.x, ctx.batch_size).cpu()
    fbg = _logits(ctx.model, bg, ctx.batch_size).mean(0).cpu()
    t = ctx.targets.cpu()
    expected = fx[torch.arange(len(t)), t] - fbg[t]
    return (attr.flatten(1).sum(1) - expected).abs().tolist()


def _with_background(
    ctx: MethodContext, params: dict[str, Any], values: Callable[[nn.Module, torch.Tensor, torch.Tensor], np.ndarray]
) -> MethodOutput:
    """Run a background-based shap explainer per target class (`values(model, background, x)`) and report
    its additivity gap and whether the background was a stand-in."""
    bg, fallback = background_set(ctx, params["background_size"])
    attr = _by_target(ctx, lambda model, x: values(model, bg, x))
    return MethodOutput(
        attributions=attr,
        diagnostics={
            "additivity_gap": additivity_gap(ctx, attr, bg),
            "background_fallback": [float(fallback)] * len(attr),
        },
    )


def _shap_gradient(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    import shap

    def values(model: nn.Module, bg: torch.Tensor, x: torch.Tensor) -> np.ndarray:
        # expected gradients sum to f(x) - E[f(bg)] only on average over samples: the gap gauges sampling noise
        explainer = shap.GradientExplainer(model, bg, batch_size=ctx.batch_size)
        return explainer.shap_values(x, nsamples=params["samples"], rseed=ctx.seed)

    return _with_background(ctx, params, values)


def _shap_deep(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    import shap

    def values(model: nn.Module, bg: torch.Tensor, x: torch.Tensor) -> np.ndarray:
        with warnings.catch_warnings():
            # An empty nn.Sequential (an identity shortcut) is a leaf shap does not know; passing the
            # gradient through, as it does, is exact for it.
            warnings.filterwarnings("ignore", message="unrecognized nn.Module: Sequential")
            # The additivity check would raise; the gap is reported as a diagnostic instead.
            return shap.DeepExplainer(model, bg).shap_values(x, check_additivity=False)

    return _with_background(ctx, params, values)


def _shap_kernel(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    from captum.attr import KernelShap

    device = ctx.x.device
    seg = segment(ctx.raw, params["segmentation"], params["segments"], seed=ctx.seed)
    masks = torch.as_tensor(seg.masks, device=device)
    hidden = ctx.bundle.prepare(fill(ctx.raw.to(device), params["hide"], masks))
    ks = KernelShap(ctx.model)
    maps, gaps = [], []
    for i in range(len(ctx.x)):  # captum fits one model per input anyway; separate masks keep each K exact
        t = int(ctx.targets[i])
        coefs = ks.attribute(
            ctx.x[i : i + 1],
            baselines=hidden[i : i + 1],
            target=t,
            feature_mask=masks[i][None, None],
            n_samples=params["samples"],
            perturbations_per_eval=ctx.batch_size,
            return_input_shape=False,
        )
        coefs = coefs.detach().float().reshape(-1)[: seg.counts[i]]
        maps.append(coefs[masks[i]])
        f = _logits(ctx.model, torch.stack([ctx.x[i], hidden[i]]), 2)[:, t]
        gaps.append(float((coefs.sum() - (f[0] - f[1])).abs()))
    return MethodOutput(
        attributions=torch.stack(maps),
        diagnostics={
            "additivity_gap": gaps,
            "segments": [float(k) for k in seg.counts],
            "grid_fallback": [float(f) for f in seg.grid_fallback],
        },
    )


def _deeplift_ok(bundle: ModelBundle) -> str | None:
    if not bundle.spec.deeplift_ok:
        return "its layers are not all DeepExplainer-safe modules (third-party graph); use shap_gradient instead"
    return None


_BACKGROUND_HELP = "Background samples used (drawn from those given; without any: blurred inputs + a black image)."

register(
    MethodSpec(
        id="shap_gradient",
        label="GradientSHAP (shap)",
        modalities=("image",),
        compute=_shap_gradient,
        params=(
            Param(
                "samples",
                "int",
                200,
                "Points between input and background where gradients are taken.",
                min=1,
                max=10000,
            ),
            Param("background_size", "int", 100, _BACKGROUND_HELP, min=1, max=5000),
        ),
        signed=True,
        family="shap",
        description=(
            "shap's GradientExplainer (expected gradients): gradients at random points between the input and "
            "background images, times the difference. Diagnostic additivity_gap: |sum - (f(x) - E f(background))|."
        ),
    )
)

register(
    MethodSpec(
        id="shap_deep",
        label="DeepSHAP (shap)",
        modalities=("image",),
        compute=_shap_deep,
        params=(Param("background_size", "int", 50, _BACKGROUND_HELP, min=1, max=1000),),
        applies=_deeplift_ok,
        signed=True,
        family="shap",
        description=(
            "shap's DeepExplainer: DeepLIFT multipliers averaged over background images. "
            "Diagnostic additivity_gap: |sum - (f(x) - E f(background))|, near 0 when every layer is supported."
        ),
    )
)

register(
    MethodSpec(
        id="shap_kernel",
        label="KernelSHAP (superpixels)",
        modalities=("image",),
        compute=_shap_kernel,
        params=(
            *superpixel_params(),
            Param("samples", "int", 300, "Coalitions of superpixels evaluated.", min=10, max=100000),
            hide_param(),
        ),
        signed=True,
        family="shap",
        description=(
            "Model-agnostic Shapley values of superpixels (captum KernelShap): the target logit on random coalitions "
            "of superpixels, fitted with the Shapley kernel. Diagnostic additivity_gap: |sum - (f(x) - f(all hidden))|."
        ),
    )
)
