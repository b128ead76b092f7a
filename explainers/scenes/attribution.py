"""Integrated Gradients and Occlusion on one explained output of a scene model, through captum.

captum attributes a function of the input; here that function is the explained output's score on each image of a
batch (`target_scores`): a `BoxTarget`'s IoU + confidence of its best-matching detection (pytorch-grad-cam's
`FasterRCNNBoxScoreTarget`), or a `RegionTarget`'s class logits summed over its region (`SemanticSegmentationTarget`).
So both methods explain boxes and regions alike (tasks: both); the maps are captum's, summed over the colour channels
(IG: what each pixel adds to score(image) - score(baseline)) or averaged over them (Occlusion: its windows cover all
three channels, so each channel holds the same mean drop of the score). captum's batches of path points or occluded
images run `ctx.batch_size` at a time, halved on out-of-memory (`explainers/batching.run_halving`).

A box's score is piecewise smooth: it jumps where its detection appears, changes class or crosses the IoU threshold
along IG's path (from a black image, where nothing is detected), and gradients do not see jumps, so IG's values add up
to the score's change only where no jump lies on the path (captum's convergence delta says how far off they are).
"""

from __future__ import annotations

from typing import Any

import torch
from captum.attr import IntegratedGradients, Occlusion

from xaidash.data.specs import Param
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.methods._common import grad_leaf, quiet_hook_notices
from xaidash.explainers.methods.occlusion import window_size
from xaidash.explainers.params import ExplainError
from xaidash.explainers.scenes.registry import SceneMethodContext, SceneMethodSpec, register
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget
from xaidash.explainers.segmentation import fill

FILLS = ("zero", "mean", "blur")


def target_scores(model: torch.nn.Module, images: torch.Tensor, target: BoxTarget | RegionTarget) -> torch.Tensor:
    """(B,) the target's score on each image of (B, 3, H, W): a detector's list of output dicts for a BoxTarget, a
    segmenter's (B, C + 1, H, W) logits for a RegionTarget. Differentiable where the model is."""
    # A detector takes a list of images (torchvision's form), a segmenter a batch.
    outputs = model(list(images)) if isinstance(target, BoxTarget) else model(images)
    scores = torch.stack([target.score(out) for out in outputs])
    if images.requires_grad and not scores.requires_grad:
        # No detection matched the box on any image of the batch (IG's path near a black image): the score is a
        # constant 0, whose gradient is 0; tie it to the input so autograd says so instead of refusing.
        scores = scores + 0 * images.sum(dim=(1, 2, 3))
    return scores


def _baseline(image: torch.Tensor, how: str) -> torch.Tensor:
    """(1, 3, H, W) what hidden pixels show, in [0, 1] (the models read [0, 1] images)."""
    return fill(image[None], how)


def integrated_gradients(
    model: torch.nn.Module,
    image: torch.Tensor,
    target: BoxTarget | RegionTarget,
    *,
    steps: int = 32,
    baseline: str = "zero",
    batch_size: int = 32,
) -> tuple[torch.Tensor, float]:
    """(H, W) captum IntegratedGradients of the target's score, summed over channels, and captum's convergence
    delta (sum of attributions - (score(image) - score(baseline)))."""
    ig = IntegratedGradients(lambda x: target_scores(model, x, target))
    base = _baseline(image, baseline)

    def run(size: int) -> tuple[torch.Tensor, torch.Tensor]:
        with quiet_hook_notices():
            attr, delta = ig.attribute(
                grad_leaf(image[None]),
                baselines=base,
                n_steps=steps,
                method="gausslegendre",
                internal_batch_size=size,
                return_convergence_delta=True,
            )
        return attr.detach(), delta.detach()

    (attr, delta), _ = run_halving(run, rows_per_pass(batch_size, image.device), what="Integrated Gradients")
    return attr[0].sum(0), float(delta.flatten()[0])


def occlusion(
    model: torch.nn.Module,
    image: torch.Tensor,
    target: BoxTarget | RegionTarget,
    *,
    window: int = 0,
    stride: int = 0,
    how: str = "zero",
    batch_size: int = 32,
) -> torch.Tensor:
    """(H, W) captum Occlusion of the target's score: each pixel's mean drop of the score over the windows covering
    it (window 0: about a seventh of the shorter side; stride 0: half the window)."""
    h, w = int(image.shape[-2]), int(image.shape[-1])
    win = window_size((h, w), window)
    step = stride or max(1, win // 2)
    if step > win:
        raise ExplainError(
            f"Occlusion stride {step} is larger than the window {win}: some pixels would never be covered."
        )
    occ = Occlusion(lambda x: target_scores(model, x, target))

    def run(size: int) -> torch.Tensor:
        with torch.no_grad():
            return occ.attribute(
                image[None],
                sliding_window_shapes=(3, win, win),
                strides=(3, step, step),
                baselines=_baseline(image, how),
                perturbations_per_eval=size,
            )

    attr, _ = run_halving(run, rows_per_pass(batch_size, image.device), what="Occlusion")
    return attr[0].mean(0)


def _ig(ctx: SceneMethodContext, params: dict[str, Any]) -> torch.Tensor:
    maps = []
    for k, target in enumerate(ctx.targets):
        ctx.tell(k / len(ctx.targets), f"target {k + 1} of {len(ctx.targets)}")
        attr, _ = integrated_gradients(
            ctx.model,
            ctx.image.float(),
            target,
            steps=int(params["steps"]),
            baseline=str(params["baseline"]),
            batch_size=ctx.batch_size,
        )
        maps.append(attr)
    return torch.stack(maps).float().cpu()


def _occlusion(ctx: SceneMethodContext, params: dict[str, Any]) -> torch.Tensor:
    maps = []
    for k, target in enumerate(ctx.targets):
        ctx.tell(k / len(ctx.targets), f"target {k + 1} of {len(ctx.targets)}")
        maps.append(
            occlusion(
                ctx.model,
                ctx.image.float(),
                target,
                window=int(params["window"]),
                stride=int(params["stride"]),
                how=str(params["fill"]),
                batch_size=ctx.batch_size,
            )
        )
    return torch.stack(maps).float().cpu()


_FILL = Param(
    "fill",
    "choice",
    "zero",
    "What hidden pixels show: black, the image's mean colour, or a blurred copy.",
    choices=FILLS,
)

register(
    SceneMethodSpec(
        id="ig",
        label="Integrated Gradients",
        tasks=("detect", "segment"),
        params=(
            Param(
                "steps",
                "int",
                32,
                "Points on the path from the baseline to the image (Gauss-Legendre).",
                min=2,
                max=512,
            ),
            Param(
                "baseline",
                "choice",
                "zero",
                "The path's start: a black image, its mean colour, or a blurred copy.",
                choices=FILLS,
            ),
        ),
        compute=_ig,
        description=(
            "Integrates the gradient of the box's score (IoU + confidence) or the region's summed class logits along "
            "a path from a black image to the image; the pixels' values add up to the score's change."
        ),
        reference="captum.attr.IntegratedGradients on BoxTarget.score / RegionTarget.score",
        units="score (IoU + confidence, or summed logits) per pixel",
        featured=3,
    )
)

register(
    SceneMethodSpec(
        id="occlusion",
        label="Occlusion",
        tasks=("detect", "segment"),
        params=(
            Param("window", "int", 0, "Patch side in pixels; 0 = about a seventh of the image side.", min=0, max=512),
            Param("stride", "int", 0, "Step between patches in pixels; 0 = half the window.", min=0, max=512),
            _FILL,
        ),
        compute=_occlusion,
        description=(
            "Covers the image patch by patch and records the drop of the box's score (IoU + confidence) or the "
            "region's summed class logits; each pixel gets the mean drop over the patches covering it."
        ),
        reference="captum.attr.Occlusion on BoxTarget.score / RegionTarget.score",
        units="drop of the score",
        featured=6,
    )
)
