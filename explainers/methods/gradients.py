"""Gradient attributions for image models through captum: saliency, input x gradient,
SmoothGrad, Integrated Gradients, Guided Backprop and DeepLift.

Every map is with respect to the input as the model reads it (normalised), per channel
(N, C, H, W); `explain()` sums the channels. Model passes hold at most `ctx.batch_size` rows (inputs,
IG's path points, SmoothGrad's noisy copies; at most 64 on a CPU), halved on out-of-memory (`batching.run_halving`); the
batch that ran is the diagnostic 'batch_size'.
SmoothGrad draws its noise here rather than through captum's NoiseTunnel, which draws it for the
whole batch at once: here every input gets the noise of the seed alone, so an input's map does
not depend on which other inputs share the call.
"""

from __future__ import annotations

from typing import Any

import torch
from captum.attr import DeepLift, GuidedBackprop, InputXGradient, IntegratedGradients, Saliency

from xaidash.data.transforms import denormalize, normalize
from xaidash.explainers.baselines import baseline_param, make_baselines
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.methods._common import batch_slices, grad_leaf, per_input, per_slice, quiet_hook_notices
from xaidash.explainers.methods._path import IG_TOLERANCE, refined_line
from xaidash.explainers.params import Param
from xaidash.explainers.registry import (
    OUTPUT_CHANGE,
    STEPS_USED,
    Completeness,
    MethodContext,
    MethodOutput,
    MethodSpec,
    register,
    relative_gap,
    with_mean_baseline,
)
from xaidash.models.bundle import ModelBundle


def saliency_compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    """|gradient| of the target with respect to the model's input (images and table rows alike)."""
    sal = Saliency(ctx.model)

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return sal.attribute(grad_leaf(ctx.x[s]), target=ctx.targets[s], abs=True), {}

    return per_slice(len(ctx.x), ctx.batch_size, one)


def input_x_gradient_compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    """Gradient times the model's input (images and table rows alike)."""
    ixg = InputXGradient(ctx.model)

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return ixg.attribute(grad_leaf(ctx.x[s]), target=ctx.targets[s]), {}

    return per_slice(len(ctx.x), ctx.batch_size, one)


def _std(bundle: ModelBundle, like: torch.Tensor) -> torch.Tensor:
    """Per-channel std (1, C, 1, 1) of the model's normalisation: d(normalised)/d(pixel) = 1/std."""
    ones = torch.ones(1, like.shape[1], 1, 1, dtype=like.dtype, device=like.device)
    return denormalize(ones, bundle.input_info) - denormalize(torch.zeros_like(ones), bundle.input_info)


def _smoothgrad(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    info = ctx.bundle.input_info
    # Noise is drawn in pixel space, where the input range is [0, 1] on every channel, so
    # `noise_level` is a fraction of that range whatever the normalisation.
    saliency = Saliency(lambda pixels: ctx.model(normalize(pixels, info)))
    pixels = denormalize(ctx.x.detach(), info)
    samples = int(params["samples"])
    # One set of noise images from the seed, added to every input (on the CPU: the same on any device).
    gen = torch.Generator().manual_seed(int(ctx.seed))
    noise = torch.randn((samples, *pixels.shape[1:]), generator=gen).to(pixels.device, pixels.dtype)
    noise = noise * float(params["noise_level"])

    def run(size: int) -> torch.Tensor:
        total = torch.zeros_like(pixels)
        # Rows are (input, sample) pairs, `size` of them per forward pass.
        for s in batch_slices(len(pixels) * samples, size):
            rows = torch.arange(s.start, s.stop, device=pixels.device)
            i, k = rows // samples, rows % samples
            grads = saliency.attribute(grad_leaf(pixels[i] + noise[k]), target=ctx.targets[i], abs=True)
            total.index_add_(0, i, grads.detach())
        return total

    total, used = run_halving(run, rows_per_pass(ctx.batch_size, ctx.x.device), what="SmoothGrad")
    # Back to gradients w.r.t. the normalised input, like `saliency` (|dF/dx| = |dF/dp| * std).
    return MethodOutput(total / samples * _std(ctx.bundle, ctx.x), {"batch_size": [float(used)] * len(pixels)})


def _integrated_gradients(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    ig = IntegratedGradients(ctx.model)
    baselines = make_baselines(params["baseline"], ctx.bundle, ctx.x, ctx.background, ctx.seed)
    steps = int(params["steps"])

    def run(size: int) -> tuple[torch.Tensor, torch.Tensor]:
        attrs, deltas = [], []
        # captum expands a slice of inputs to (inputs x steps) path points and sends them through the
        # model `internal_batch_size` rows at a time: slices of size // steps inputs keep that expansion
        # (and so memory) bounded by about `size` rows, and every pass full.
        for s in batch_slices(len(ctx.x), max(1, size // steps)):
            with quiet_hook_notices():
                attr, delta = ig.attribute(
                    grad_leaf(ctx.x[s]),
                    baselines=baselines[s],
                    target=ctx.targets[s],
                    n_steps=steps,
                    method="gausslegendre",
                    internal_batch_size=max(size, s.stop - s.start),
                    return_convergence_delta=True,
                )
            attrs.append(attr.detach())
            deltas.append(delta.detach())
        return torch.cat(attrs), torch.cat(deltas)

    (attr, delta), used = run_halving(run, rows_per_pass(ctx.batch_size, ctx.x.device), what="Integrated Gradients")
    n = len(ctx.x)
    delta = delta.flatten().float()
    change = attr.flatten(1).sum(1).float() - delta  # captum's delta is signed: sum - (f(x) - f(baseline))
    steps_used = [steps] * n
    for i in range(n):
        if relative_gap(float(delta[i]), float(change[i])) > IG_TOLERANCE:
            attr[i], steps_used[i] = _refined_image_path(ctx, baselines, i, float(change[i]), steps, used)
            delta[i] = attr[i].sum() - change[i]
    return MethodOutput(
        attr,
        {
            "convergence_delta": [float(d) for d in delta.cpu()],
            OUTPUT_CHANGE: [float(c) for c in change.cpu()],
            STEPS_USED: steps_used,
            "batch_size": [float(used)] * n,
        },
    )


def _refined_image_path(
    ctx: MethodContext, baselines: torch.Tensor, i: int, change: float, steps: int, rows: int
) -> tuple[torch.Tensor, int]:
    """Input i's IG integrated again on an adaptively split path (`_path.refined_path`), the same straight line
    from its baseline to it."""
    start, target = baselines[i : i + 1].detach(), int(ctx.targets[i])
    diff = ctx.x[i : i + 1].detach() - start

    return refined_line(ctx.model, start, diff, target, change, steps, rows)


def _guided_backprop(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    gbp = GuidedBackprop(ctx.model)

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return gbp.attribute(grad_leaf(ctx.x[s]), target=ctx.targets[s]), {}

    return per_slice(len(ctx.x), ctx.batch_size, one)


def _deeplift(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    dl = DeepLift(ctx.model)
    baselines = make_baselines(params["baseline"], ctx.bundle, ctx.x, ctx.background, ctx.seed)

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        attr, delta = dl.attribute(
            grad_leaf(ctx.x[s]), baselines=baselines[s], target=ctx.targets[s], return_convergence_delta=True
        )
        # captum's delta is signed, sum - (f(x) - f(baseline)): the change follows from it
        return attr, {"convergence_delta": delta, OUTPUT_CHANGE: attr.detach().flatten(1).sum(1) - delta.flatten()}

    # captum's rule for nn.Softmax subtracts the mean multiplier over the whole batch, not per row: on a
    # model with one, inputs go through one at a time so an input's map does not depend on the others.
    has_softmax = any(isinstance(m, torch.nn.Softmax) for m in ctx.model.modules())
    return per_slice(len(ctx.x), 1 if has_softmax else ctx.batch_size, one)


def _deeplift_applies(bundle: ModelBundle) -> str | None:
    if not bundle.spec.deeplift_ok:
        return "its graph reuses modules or calls functional nonlinearities, which DeepLift's rules cannot follow"
    return None


def _smoothgrad_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return params["samples"] * n, 0


def _ig_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return params["steps"] * n, 2 * n  # the path's points; convergence delta: f(x) and f(baseline)


register(
    MethodSpec(
        id="saliency",
        label="Saliency",
        modalities=("image",),
        compute=saliency_compute,
        signed=False,
        family="gradient",
        description="Absolute gradient of the target score with respect to each input pixel (Simonyan et al., 2014).",
        output="logit",
        passes=per_input(fwd_bwd=1),
        featured=3,
    )
)

register(
    MethodSpec(
        id="inputxgrad",
        label="Input x Gradient",
        modalities=("image",),
        compute=input_x_gradient_compute,
        signed=True,
        family="gradient",
        description="Gradient times the (normalised) input: a first-order estimate of each pixel's contribution.",
        output="logit",
        passes=per_input(fwd_bwd=1),
        featured=4,
    )
)

register(
    MethodSpec(
        id="smoothgrad",
        label="SmoothGrad",
        modalities=("image",),
        compute=_smoothgrad,
        params=(
            Param(
                "noise_level",
                "float",
                0.15,
                "Gaussian noise std as a fraction of the pixel range [0, 1].",
                min=0.0,
                max=1.0,
            ),
            Param("samples", "int", 25, "Noisy copies averaged per input.", min=1, max=500),
        ),
        signed=False,
        family="gradient",
        description="Saliency averaged over noisy copies of the input, which removes much of the gradient's speckle (Smilkov et al., 2017).",
        output="logit",
        passes=_smoothgrad_passes,
    )
)

register(
    MethodSpec(
        id="ig",
        label="Integrated Gradients",
        modalities=("image",),
        compute=_integrated_gradients,
        params=(
            baseline_param("black"),
            Param(
                "steps",
                "int",
                50,
                "Points on the path from baseline to input (Gauss-Legendre); raised automatically (up to 8x) for an "
                "input whose attributions miss f(input) - f(baseline) by more than 1%.",
                min=2,
                max=1000,
            ),
        ),
        signed=True,
        family="gradient",
        description="Gradients integrated along the straight path from a baseline to the input; the map sums to "
        "f(input) - f(baseline) (Sundararajan et al., 2017). Diagnostic: the convergence delta, the gap to that sum; "
        "where it exceeds 1%, the path is integrated again on segments split where it turns sharply (steps: the "
        "points used).",
        output="logit",
        needs_background=with_mean_baseline,
        completeness=Completeness(
            reference="baseline", unit="pixel", diagnostic="convergence_delta", tolerance=IG_TOLERANCE
        ),
        passes=_ig_passes,
        featured=2,
    )
)

register(
    MethodSpec(
        id="guided_backprop",
        label="Guided Backprop",
        modalities=("image",),
        compute=_guided_backprop,
        signed=True,
        family="gradient",
        description="Gradient in which every ReLU also blocks negative gradients on the way back (Springenberg et al., 2015).",
        output="logit",
        passes=per_input(fwd_bwd=1),
    )
)

register(
    MethodSpec(
        id="deeplift",
        label="DeepLift",
        modalities=("image",),
        compute=_deeplift,
        params=(baseline_param("black"),),
        applies=_deeplift_applies,
        signed=True,
        family="gradient",
        description="Differences from a baseline propagated with the Rescale rule; the map sums to f(input) - f(baseline) "
        "(Shrikumar et al., 2017). Diagnostic: the convergence delta.",
        output="logit",
        needs_background=with_mean_baseline,
        completeness=Completeness(reference="baseline", unit="pixel", diagnostic="convergence_delta"),
        # input and baseline in one batch; convergence delta: f(x) and f(baseline)
        passes=per_input(fwd_bwd=2, fwd=2),
    )
)
