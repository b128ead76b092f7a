"""SHAP for images: shap's GradientExplainer (expected gradients) and DeepExplainer (DeepLIFT
against a background set), and model-agnostic KernelSHAP over superpixels (captum's KernelShap).

Background: the samples `explain(..., background=...)` passes (prepared training images; `explain`
loads the default set itself). Where the training split cannot be loaded, each input gets a stand-in
of its own (its blurred copy and a black image, see `baselines.stand_in_background`) and the
diagnostic 'background_fallback' is 1.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from xaidash.explainers.baselines import shap_background, stand_in_background
from xaidash.explainers.params import Param
from xaidash.explainers.registry import Completeness, MethodContext, MethodOutput, MethodSpec, always, register
from xaidash.explainers.segmentation import fill, hide_param, segment, superpixel_params
from xaidash.models.bundle import ModelBundle

# (the model's target column, background) -> a function giving shap values for one input.
ExplainerFor = Callable[[nn.Module, torch.Tensor], Callable[[torch.Tensor], Any]]


class TargetLogit(nn.Module):
    """The model's logit for one class, as an (N, 1) output. shap explains every output column it
    sees (classes last); handing it one column costs one backward pass per sample instead of one per class."""

    def __init__(self, model: nn.Module, target: int):
        super().__init__()
        self.model = model
        self.target = target

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)[:, self.target : self.target + 1]


def _values_array(values: Any, ndim: int) -> np.ndarray:
    values = values[0] if isinstance(values, list) else values  # older shap: a list, one per output
    values = np.asarray(values)
    if values.ndim == ndim + 1:  # shap >= 0.45: output axis last
        values = values[..., 0]
    return values


def _explained(ctx: MethodContext, bg: torch.Tensor, idx: torch.Tensor, explainer_for: ExplainerFor) -> np.ndarray:
    """Attributions (len(idx), C, H, W) of the inputs `idx` against `bg`: one explainer per distinct target
    (shap explains every output column it sees), then one call per input, each with the same seed,
    so an input's values do not depend on the other inputs of the call."""
    out = np.zeros((len(idx), *ctx.x.shape[1:]), dtype=np.float32)
    targets = ctx.targets[idx]
    for t in torch.unique(targets).tolist():
        explain_one = explainer_for(TargetLogit(ctx.model, int(t)), bg)
        for j in (targets == t).nonzero().flatten().tolist():
            out[j] = _values_array(explain_one(ctx.x[idx[j] : idx[j] + 1].detach()), ctx.x.dim())[0]
    return out


def _with_background(ctx: MethodContext, params: dict[str, Any], explainer_for: ExplainerFor) -> MethodOutput:
    """Run a background-based shap explainer and report its additivity gap,
    |sum - (f(x) - E f(background))| for the target logit, and whether the background was a stand-in."""
    n = len(ctx.x)
    bg = shap_background(ctx.bundle, ctx.background, params["background_size"], ctx.seed)
    attr = torch.zeros(ctx.x.shape, dtype=torch.float32)
    expected = torch.zeros(n)
    t = ctx.targets.cpu()
    if bg is not None:
        everyone = torch.arange(n, device=ctx.x.device)
        attr[:] = torch.as_tensor(_explained(ctx, bg, everyone, explainer_for))
        expected[:] = ctx.bundle.logits(bg, ctx.batch_size).mean(0).cpu()[t]
    else:
        for i in range(n):  # a stand-in of each input's own
            own = stand_in_background(ctx.bundle, ctx.raw[i : i + 1].to(ctx.x.device))
            attr[i] = torch.as_tensor(_explained(ctx, own, torch.tensor([i], device=ctx.x.device), explainer_for)[0])
            expected[i] = ctx.bundle.logits(own, ctx.batch_size).mean(0).cpu()[t[i]]
    fx = ctx.bundle.logits(ctx.x, ctx.batch_size).cpu()[torch.arange(n), t]
    gaps = (attr.flatten(1).sum(1) - (fx - expected)).abs().tolist()
    return MethodOutput(
        attributions=attr,
        diagnostics={"additivity_gap": gaps, "background_fallback": [float(bg is None)] * n},
    )


def _shap_gradient(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    import shap

    def explainer_for(model: nn.Module, bg: torch.Tensor) -> Callable[[torch.Tensor], Any]:
        # expected gradients sum to f(x) - E[f(bg)] only on average over samples: the gap gauges sampling noise
        explainer = shap.GradientExplainer(model, bg, batch_size=ctx.batch_size)
        return lambda x: explainer.shap_values(x, nsamples=params["samples"], rseed=ctx.seed)

    return _with_background(ctx, params, explainer_for)


@contextlib.contextmanager
def _removing_interim_values(model: nn.Module) -> Iterator[None]:
    """shap's DeepExplainer stores each layer's inputs and outputs as parameters `x` and `y` on the layer
    and removes them only from layers directly inside containers; any it leaves deeper are removed here,
    so the model keeps its own parameters (and state_dict) only."""
    had = {id(m): {n for n in ("x", "y") if hasattr(m, n)} for m in model.modules()}
    try:
        yield
    finally:
        for m in model.modules():
            for name in {"x", "y"} - had.get(id(m), set()):
                if hasattr(m, name):
                    delattr(m, name)


def _shap_deep(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    import shap

    def explainer_for(model: nn.Module, bg: torch.Tensor) -> Callable[[torch.Tensor], Any]:
        explainer = shap.DeepExplainer(model, bg)

        def explain_one(x: torch.Tensor) -> Any:
            with warnings.catch_warnings(), _removing_interim_values(model):
                # An empty nn.Sequential (an identity shortcut) is a leaf shap does not know; passing the
                # gradient through, as it does, is exact for it.
                warnings.filterwarnings("ignore", message="unrecognized nn.Module: Sequential")
                # The additivity check would raise; the gap is reported as a diagnostic instead.
                return explainer.shap_values(x, check_additivity=False)

        return explain_one

    return _with_background(ctx, params, explainer_for)


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
        # captum draws coalitions from torch's global generator: reseeded per input, an input's
        # values depend on the seed alone, not on the inputs explained before it.
        torch.manual_seed(ctx.seed)
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
        f = ctx.bundle.logits(torch.stack([ctx.x[i], hidden[i]]), 2)[:, t]
        gaps.append(float((coefs.sum() - (f[0] - f[1])).abs()))
    return MethodOutput(
        attributions=torch.stack(maps),
        segments=seg.masks,
        diagnostics={
            "additivity_gap": gaps,
            "segments": [float(k) for k in seg.counts],
            "grid_fallback": [float(f) for f in seg.grid_fallback],
        },
    )


def _gradient_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    # + the explainer's f(background); the additivity gap's f(x) and f(background)
    return params["samples"] * n, n + 2 * background


def _deep_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    # per input: `background` copies of x and the background; + as for the gradient explainer
    return 2 * background * n, n + 2 * background


def _kernel_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return 0, (params["samples"] + 2) * n  # + the additivity gap's f(x) and f(all hidden)


def _deeplift_ok(bundle: ModelBundle) -> str | None:
    if not bundle.spec.deeplift_ok:
        return "its layers are not all DeepExplainer-safe modules (third-party graph); use shap_gradient instead"
    return None


_BACKGROUND_HELP = "Background samples used, drawn from the training images given (default: 50 of the training split)."

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
        output="logit",
        needs_background=always,
        completeness=Completeness(reference="background", unit="pixel", diagnostic="additivity_gap"),
        passes=_gradient_passes,
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
        output="logit",
        needs_background=always,
        completeness=Completeness(reference="background", unit="pixel", diagnostic="additivity_gap"),
        passes=_deep_passes,
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
        output="logit",
        completeness=Completeness(reference="hidden", unit="superpixel", diagnostic="additivity_gap"),
        passes=_kernel_passes,
    )
)
