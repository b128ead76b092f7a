"""LIME over superpixels, with the perturbed batch built on the device.

Why not captum's `Lime`: it draws every perturbation in a Python loop, weighs samples by their
distance in input space and returns no fit score. lime's own `explain_instance` pastes each
sample together in NumPy on the CPU (its Python loop is the whole cost, see FIELD-NOTES). So the
masks are applied here as tensors on the device, the samples of every input of the call share one
stream of model passes (`ctx.batch_size` rows each, halved on out-of-memory), and the weighted
surrogate is fitted by lime's `LimeBase` with lime's kernel, cosine distance and regressor: the same
surrogate as the reference path (`lime_reference`), plus its weighted R^2.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch

from xaidash.explainers.methods._common import scored_rows
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.explainers.segmentation import fill, hide_param, segment, superpixel_params
from xaidash.models.bundle import ModelBundle


def lime_kernel(d: np.ndarray, kernel_width: float) -> np.ndarray:
    """lime_image's default similarity kernel (exponential in the cosine distance)."""
    return np.sqrt(np.exp(-(d**2) / kernel_width**2))


def coalitions(samples: int, k: int, seed: int) -> torch.Tensor:
    """(samples, k) long 0/1: which of k superpixels each sample shows, the first showing all (lime's
    convention: the first sample is the unperturbed image). Drawn from the seed alone, on the CPU, so an
    input's samples do not depend on the other inputs of the call or on the device."""
    gen = torch.Generator().manual_seed(int(seed))
    on = torch.randint(0, 2, (samples, k), generator=gen)
    on[0] = 1
    return on


def _passes(params: dict[str, Any], n: int, background: int, hw: tuple[int, int]) -> tuple[int, int]:
    return 0, params["samples"] * n


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    from lime.lime_base import LimeBase
    from sklearn.metrics import pairwise_distances

    device = ctx.x.device
    n, samples = len(ctx.x), int(params["samples"])
    seg = segment(ctx.raw, params["segmentation"], params["segments"], seed=ctx.seed)
    masks = torch.as_tensor(seg.masks, device=device).long()  # (N, H, W), values < counts[i]
    hidden = ctx.bundle.prepare(fill(ctx.raw.to(device), params["hide"], masks))
    kmax = max(int(k) for k in seg.counts)
    on = torch.zeros(n, samples, kmax, dtype=torch.long)
    for i, k in enumerate(seg.counts):
        on[i, :, :k] = coalitions(samples, int(k), ctx.seed)
    on_dev = on.to(device)
    flat_masks = masks.flatten(1)

    def build(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Row i * samples + s: input i with the superpixels of its sample s shown, the others hidden.
        i, s = index // samples, index % samples
        keep = on_dev[i, s].gather(1, flat_masks[i]).view(len(index), 1, *masks.shape[1:]).to(ctx.x.dtype)
        return hidden[i] + keep * (ctx.x[i] - hidden[i]), ctx.targets[i]

    probs, used = scored_rows(ctx, n * samples, build, probability=True, what="LIME")
    probs_np = probs.view(n, samples).cpu().double().numpy()
    maps, r2 = [], []
    for i in range(n):  # one surrogate per input, fitted by lime's own LimeBase on the CPU
        k = int(seg.counts[i])
        data = on[i, :, :k].numpy()
        distances = pairwise_distances(data, data[:1], metric="cosine").ravel()
        base = LimeBase(partial(lime_kernel, kernel_width=params["kernel_width"]), random_state=ctx.seed)
        # lime_image's default feature_selection ('auto' with num_features=100000 >= k) keeps every superpixel
        _, coefs, score, _ = base.explain_instance_with_data(
            data, probs_np[i][:, None], distances, 0, k, feature_selection="none"
        )
        weights = np.zeros(k, dtype=np.float32)
        for feature, w in coefs:
            weights[int(feature)] = w
        maps.append(torch.as_tensor(weights, device=device)[masks[i]])
        r2.append(float(score))
    return MethodOutput(
        attributions=torch.stack(maps),
        segments=seg.masks,
        diagnostics={
            "surrogate_r2": r2,
            "segments": [float(k) for k in seg.counts],
            "grid_fallback": [float(f) for f in seg.grid_fallback],
            "batch_size": [float(used)] * n,
        },
    )


def lime_reference(
    bundle: ModelBundle,
    image: torch.Tensor | np.ndarray,
    target: int,
    samples: int,
    batch_size: int = 10,
    *,
    segmentation: str = "slic",
    segments: int = 30,
    kernel_width: float = 0.25,
    hide: str = "mean",
    seed: int = 0,
) -> np.ndarray:
    """The same explanation through lime's own `LimeImageExplainer.explain_instance` (its NumPy
    perturbation loop on the CPU), on the same superpixels: an (H, W) map of superpixel weights.
    Kept as the reference the device path is checked and benchmarked against."""
    from lime.lime_image import LimeImageExplainer

    if hide == "blur":
        raise ExplainError("lime's explain_instance hides superpixels with one colour: use hide='mean' or 'zero'.")
    img = torch.as_tensor(np.asarray(image), dtype=torch.float32)
    if img.dim() != 3 or tuple(img.shape) != tuple(bundle.info.input_shape):
        raise ExplainError(
            f"lime_reference takes one image of shape {tuple(bundle.info.input_shape)}, got {tuple(img.shape)}."
        )
    channels = img.shape[0]
    mask = segment(img[None], segmentation, segments, seed=seed).masks[0]
    rgb = img.permute(1, 2, 0).double().numpy()  # lime wants (H, W, 3); grey images are widened to RGB

    def segmentation_fn(_: np.ndarray) -> np.ndarray:
        return mask  # the superpixels of the device path, so both fit the same features

    def classifier_fn(batch: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(batch, dtype=torch.float32).permute(0, 3, 1, 2)[:, :channels]
        return bundle.predict_proba(x, batch_size=batch_size).double().numpy()

    explainer = LimeImageExplainer(kernel_width=kernel_width, random_state=seed)
    exp = explainer.explain_instance(
        rgb[..., 0] if channels == 1 else rgb,
        classifier_fn,
        labels=(int(target),),
        hide_color=None if hide == "mean" else 0,
        top_labels=None,
        num_features=int(mask.max()) + 1,
        num_samples=samples,
        batch_size=batch_size,
        segmentation_fn=segmentation_fn,
        random_seed=seed,
    )
    weights = np.zeros(int(mask.max()) + 1, dtype=np.float32)
    for feature, w in exp.local_exp[int(target)]:
        weights[int(feature)] = w
    return weights[mask]


register(
    MethodSpec(
        id="lime",
        label="LIME",
        modalities=("image",),
        compute=_compute,
        params=(
            *superpixel_params(),
            Param("samples", "int", 1000, "Perturbed images the surrogate is fitted on.", min=10, max=100000),
            Param(
                "kernel_width",
                "float",
                0.25,
                "Width of lime's kernel on the cosine distance to the original.",
                min=1e-3,
                max=100.0,
            ),
            hide_param(" (lime's default)"),
        ),
        signed=True,
        family="perturbation",
        output="probability",
        passes=_passes,
        description=(
            "Switches random sets of superpixels off, fits a weighted linear model of the target-class "
            "probability on which were on, and paints each superpixel with its weight. "
            "Diagnostic surrogate_r2: how well that linear model fits."
        ),
        featured=5,
    )
)
