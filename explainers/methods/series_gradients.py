"""Gradient attributions for series models (captum): saliency, input x gradient, SmoothGrad, Integrated Gradients and
DeepLift, all per channel and step of the series as the model reads it (standardised per channel), (N, C, T); the
series adapter sums the channels into a map over steps and keeps them for a multivariate heatmap.

IG and DeepLift start from a baseline series that makes sense for a series (`series_baselines`): the raw value 0,
each channel's training mean, the series' own mean, or a Gaussian-smoothed copy. IG's values add up to
f(x) - f(baseline); an input whose values miss that by more than 1% is integrated again on an adaptively split path
(`_path.refined_line`), as for images and tables. SmoothGrad's noise is a share of each channel's training std (1 on
the standardised series), drawn from the seed alone so an input's map does not depend on the others of the call."""

from __future__ import annotations

from typing import Any

import torch
from captum.attr import DeepLift, Saliency

from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.methods._common import batch_slices, grad_leaf, per_input, per_slice
from xaidash.explainers.methods._path import IG_TOLERANCE, refined_line
from xaidash.explainers.methods.gradients import input_x_gradient_compute, saliency_compute
from xaidash.explainers.methods.series_baselines import baseline_param, fixed_baseline
from xaidash.explainers.methods.table_gradients import _pairs_ig
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
)
from xaidash.models.bundle import ModelBundle

MODALITIES = ("series",)


def _smoothgrad(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    x, samples = ctx.x.detach(), int(params["samples"])
    saliency = Saliency(ctx.model)
    gen = torch.Generator().manual_seed(int(ctx.seed))  # on the CPU: the same noise on any device
    noise = torch.randn((samples, *x.shape[1:]), generator=gen).to(x.device, x.dtype) * float(params["noise_level"])

    def run(size: int) -> torch.Tensor:
        total = torch.zeros_like(x)
        for s in batch_slices(len(x) * samples, size):  # rows are (input, noisy copy) pairs
            rows = torch.arange(s.start, s.stop, device=x.device)
            i, k = rows // samples, rows % samples
            grads = saliency.attribute(grad_leaf(x[i] + noise[k]), target=ctx.targets[i], abs=True)
            total.index_add_(0, i, grads.detach())
        return total

    total, used = run_halving(run, rows_per_pass(ctx.batch_size, x.device), what="SmoothGrad")
    return MethodOutput(total / samples, {"batch_size": [float(used)] * len(x)})


def _integrated_gradients(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    x, steps = ctx.x.detach(), int(params["steps"])
    bases = fixed_baseline(params["baseline"], ctx.bundle, ctx.x)
    (attr, delta), used = _pairs_ig(ctx, x, bases, ctx.targets, steps)
    delta = delta.float()
    change = attr.flatten(1).sum(1).float() - delta  # captum's delta is signed: sum - (f(x) - f(baseline))
    steps_used = [steps] * len(x)
    for i in range(len(x)):
        if relative_gap(float(delta[i]), float(change[i])) > IG_TOLERANCE:
            start = bases[i : i + 1]
            attr[i], steps_used[i] = refined_line(
                ctx.model, start, x[i : i + 1] - start, int(ctx.targets[i]), float(change[i]), steps, used
            )
            delta[i] = attr[i].sum() - change[i]
    return MethodOutput(
        attr,
        {
            "convergence_delta": [float(d) for d in delta.cpu()],
            OUTPUT_CHANGE: [float(c) for c in change.cpu()],
            STEPS_USED: steps_used,
            "batch_size": [float(used)] * len(x),
        },
    )


def _deeplift(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    dl = DeepLift(ctx.model)
    bases = fixed_baseline(params["baseline"], ctx.bundle, ctx.x)

    def one(s: slice) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        attr, delta = dl.attribute(
            grad_leaf(ctx.x[s]), baselines=bases[s], target=ctx.targets[s], return_convergence_delta=True
        )
        return attr, {"convergence_delta": delta, OUTPUT_CHANGE: attr.detach().flatten(1).sum(1) - delta.flatten()}

    # captum's nn.Softmax rule mixes the rows of a batch (a transformer's attention): one input at a time there
    has_softmax = any(isinstance(m, torch.nn.Softmax) for m in ctx.model.modules())
    return per_slice(len(ctx.x), 1 if has_softmax else ctx.batch_size, one, what="DeepLift")


def _deeplift_applies(bundle: ModelBundle) -> str | None:
    if not bundle.spec.deeplift_ok:
        return "its graph has layers DeepLift's rules cannot follow (a recurrent layer, functional nonlinearities)"
    return None


def _smoothgrad_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return params["samples"] * n, 0


def _ig_passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return params["steps"] * n, 2 * n  # the path's points; convergence delta: f(x) and f(baseline)


_STEPS = Param(
    "steps",
    "int",
    50,
    "Points on the path from the baseline series to the series (Gauss-Legendre); raised automatically (up to 8x) "
    "for a series whose attributions miss f(series) - f(baseline) by more than 1%.",
    min=2,
    max=1000,
)

register(
    MethodSpec(
        id="saliency",
        label="Saliency",
        modalities=MODALITIES,
        compute=saliency_compute,
        signed=False,
        family="gradient",
        description="Absolute gradient of the target logit with respect to each step of each standardised channel: "
        "how sensitive the score is to the value there, not which way.",
        output="logit",
        passes=per_input(fwd_bwd=1),
        featured=3,
    )
)

register(
    MethodSpec(
        id="inputxgrad",
        label="Input x Gradient",
        modalities=MODALITIES,
        compute=input_x_gradient_compute,
        signed=True,
        family="gradient",
        description="Gradient times the standardised value at each step: a first-order estimate of each step's "
        "contribution against the channel's training mean.",
        output="logit",
        passes=per_input(fwd_bwd=1),
    )
)

register(
    MethodSpec(
        id="smoothgrad",
        label="SmoothGrad",
        modalities=MODALITIES,
        compute=_smoothgrad,
        params=(
            Param(
                "noise_level",
                "float",
                0.15,
                "Gaussian noise std as a share of each channel's training std.",
                min=0.0,
                max=5.0,
            ),
            Param("samples", "int", 25, "Noisy copies averaged per series.", min=1, max=500),
        ),
        signed=False,
        family="gradient",
        description="Saliency averaged over noisy copies of the series, which removes much of the gradient's "
        "speckle (Smilkov et al., 2017).",
        output="logit",
        passes=_smoothgrad_passes,
    )
)

register(
    MethodSpec(
        id="ig",
        label="Integrated Gradients",
        modalities=MODALITIES,
        compute=_integrated_gradients,
        params=(baseline_param("mean"), _STEPS),
        signed=True,
        family="gradient",
        description="Gradients integrated along the straight path from a baseline series (zero, the channels' "
        "training mean, the series' own mean or a smoothed copy) to the series; the values add up to f(series) - "
        "f(baseline) (Sundararajan et al., 2017). Diagnostic: the convergence delta, the gap to that sum.",
        output="logit",
        completeness=Completeness(
            reference="series_baseline", unit="step", diagnostic="convergence_delta", tolerance=IG_TOLERANCE
        ),
        passes=_ig_passes,
        featured=1,
    )
)

register(
    MethodSpec(
        id="deeplift",
        label="DeepLift",
        modalities=MODALITIES,
        compute=_deeplift,
        params=(baseline_param("mean"),),
        applies=_deeplift_applies,
        signed=True,
        family="gradient",
        description="Differences from a baseline series propagated with the Rescale rule; the values add up to "
        "f(series) - f(baseline) (Shrikumar et al., 2017). Diagnostic: the convergence delta.",
        output="logit",
        completeness=Completeness(reference="series_baseline", unit="step", diagnostic="convergence_delta"),
        passes=per_input(fwd_bwd=2, fwd=2),
    )
)
