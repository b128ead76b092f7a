"""SHAP for images: expected gradients (shap's GradientExplainer estimator, computed batched by captum's
GradientShap), shap's DeepExplainer (DeepLIFT against a background set), and model-agnostic KernelSHAP
over superpixels (captum KernelShap's sampling and fit, on batched perturbations).

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
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.methods._common import (
    batch_slices,
    grad_leaf,
    kernel_coalitions,
    kernel_shap_fit,
    quiet_hook_notices,
    scored_rows,
)
from xaidash.explainers.params import Param
from xaidash.explainers.registry import (
    OUTPUT_CHANGE,
    Completeness,
    MethodContext,
    MethodOutput,
    MethodSpec,
    always,
    register,
)
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
        diagnostics={
            "additivity_gap": gaps,
            OUTPUT_CHANGE: (fx - expected).tolist(),
            "background_fallback": [float(bg is None)] * n,
        },
    )


def _shap_gradient(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    """Expected gradients through captum's GradientShap, the estimator of shap's GradientExplainer (a
    random background image, a random point on the straight path from it to the input, no input noise:
    shap's default local_smoothing=0), batched: shap builds every sample in a Python loop with a copy to
    the host each, captum draws one chunk of `ctx.batch_size` samples as one batch on the device (tests
    compare the two). Each input's samples are drawn from the seed alone, so an input's values do not
    depend on the other inputs of the call."""
    from captum.attr import GradientShap

    n, samples = len(ctx.x), int(params["samples"])
    bg = shap_background(ctx.bundle, ctx.background, params["background_size"], ctx.seed)
    explainer = GradientShap(ctx.model)

    def one(i: int, baselines: torch.Tensor, size: int) -> torch.Tensor:
        # captum draws the background rows and path points from NumPy's global generator (`explain`
        # restores the caller's state afterwards) and any noise from torch's.
        np.random.seed(ctx.seed)
        torch.manual_seed(ctx.seed)
        total = torch.zeros_like(ctx.x[i : i + 1])
        for s in batch_slices(samples, size):
            chunk = s.stop - s.start
            with quiet_hook_notices():
                attr = explainer.attribute(
                    grad_leaf(ctx.x[i : i + 1]),
                    baselines=baselines,
                    n_samples=chunk,
                    stdevs=0.0,
                    target=ctx.targets[i : i + 1],
                )
            total += attr.detach() * chunk
        return total[0] / samples

    def run(size: int) -> tuple[torch.Tensor, torch.Tensor]:
        attr = torch.zeros_like(ctx.x)
        expected = torch.zeros(n, device=ctx.x.device)
        t = ctx.targets
        if bg is not None:
            expected[:] = ctx.bundle.logits(bg, size).mean(0)[t]
            for i in range(n):
                attr[i] = one(i, bg, size)
        else:
            for i in range(n):  # a stand-in of each input's own
                own = stand_in_background(ctx.bundle, ctx.raw[i : i + 1].to(ctx.x.device))
                attr[i] = one(i, own, size)
                expected[i] = ctx.bundle.logits(own, size).mean(0)[t[i]]
        return attr, expected

    (attr, expected), used = run_halving(run, rows_per_pass(ctx.batch_size, ctx.x.device), what="GradientSHAP")
    fx = ctx.bundle.logits(ctx.x, used).gather(1, ctx.targets.view(-1, 1))[:, 0]
    # expected gradients sum to f(x) - E[f(bg)] only on average over samples: the gap gauges sampling noise
    gaps = (attr.flatten(1).sum(1) - (fx - expected)).abs().tolist()
    return MethodOutput(
        attributions=attr,
        diagnostics={
            "additivity_gap": gaps,
            OUTPUT_CHANGE: (fx - expected).tolist(),
            "background_fallback": [float(bg is None)] * n,
            "batch_size": [float(used)] * n,
        },
    )


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
    # captum's KernelShap draws and pastes each coalition in a Python loop and takes one input at a time;
    # here the coalitions are drawn at once, pasted on the device, the samples of all inputs share one
    # stream of model passes, and the fit is captum's (sklearn's LinearRegression, intercept, sample
    # weights). Tests check the values against captum's.
    device = ctx.x.device
    n, samples = len(ctx.x), int(params["samples"])
    seg = segment(ctx.raw, params["segmentation"], params["segments"], seed=ctx.seed)
    masks = torch.as_tensor(seg.masks, device=device).long()
    hidden = ctx.bundle.prepare(fill(ctx.raw.to(device), params["hide"], masks))
    kmax = max(int(k) for k in seg.counts)
    on = np.zeros((n, samples, kmax), dtype=np.int64)
    weights = []
    for i, k in enumerate(seg.counts):
        coalitions, w = kernel_coalitions(samples, int(k), ctx.seed)
        on[i, :, :k] = coalitions
        weights.append(w)
    on_dev = torch.as_tensor(on, device=device)
    flat_masks = masks.flatten(1)

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        i, s = index // samples, index % samples
        keep = on_dev[i, s].gather(1, flat_masks[i]).view(len(index), 1, *masks.shape[1:]).to(ctx.x.dtype)
        return hidden[i] + keep * (ctx.x[i] - hidden[i]), ctx.targets[i]

    scores, used = scored_rows(ctx, n * samples, build, what="KernelSHAP")
    f = scores.view(n, samples).cpu().double().numpy()
    maps, gaps, changes = [], [], []
    for i in range(n):
        k = int(seg.counts[i])
        coefs = kernel_shap_fit(on[i, :, :k], f[i], weights[i])
        maps.append(torch.as_tensor(coefs, device=device)[masks[i]])
        changes.append(float(f[i, 0] - f[i, 1]))  # rows 0 and 1: f(x), f(all hidden)
        gaps.append(float(abs(coefs.sum() - changes[-1])))
    return MethodOutput(
        attributions=torch.stack(maps),
        segments=seg.masks,
        diagnostics={
            "additivity_gap": gaps,
            OUTPUT_CHANGE: changes,
            "segments": [float(k) for k in seg.counts],
            "grid_fallback": [float(f) for f in seg.grid_fallback],
            "batch_size": [float(used)] * n,
        },
    )


def _gradient_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return params["samples"] * n, n + background  # + the additivity gap's f(x) and f(background)


def _deep_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    # per input: `background` copies of x and the background; + as for the gradient explainer
    return 2 * background * n, n + 2 * background


def _kernel_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return 0, params["samples"] * n  # f(x) and f(all hidden), for the additivity gap, are its first two samples


def _deeplift_ok(bundle: ModelBundle) -> str | None:
    if not bundle.spec.deeplift_ok:
        return "its layers are not all DeepExplainer-safe modules (third-party graph); use shap_gradient instead"
    return None


SAMPLED_TOLERANCE = 0.05  # GradientSHAP's promise holds in expectation: 5% of f(x) - E f(background)
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
            "Expected gradients, as shap's GradientExplainer computes them (batched through captum's GradientShap): "
            "gradients at random points between the input and background images, times the difference. Diagnostic additivity_gap: |sum - (f(x) - E f(background))|."
        ),
        output="logit",
        needs_background=always,
        # expected gradients add up to f(x) - E f(background) only on average over the samples: a looser tolerance
        # (at 200 samples the trained shapes model's maps missed by 0.7-13%)
        completeness=Completeness(
            reference="background", unit="pixel", diagnostic="additivity_gap", tolerance=SAMPLED_TOLERANCE
        ),
        passes=_gradient_passes,
        featured=7,
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
