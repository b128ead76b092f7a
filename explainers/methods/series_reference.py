"""captum's own calls for series occlusion, KernelSHAP and LIME (registers no method): the references the batched
device paths of `series_occlusion`, `series_shap` and `series_lime` are tested (tests/explainers/test_series_*.py)
and benchmarked (bench/series_speed.py) against.

- `occlusion_reference`: captum's `Occlusion` on a batch of prepared series, a window of (C, window) steps (or
  (1, window): one channel at a time) moved by (1, stride), the hidden steps from a baseline series.
- `kernel_shap_reference`: captum's `KernelShap` on one series with the time segments as its feature mask, drawing
  the given coalitions (`kernel_coalitions`, the ones the batched path draws) instead of its own, everything else
  (the similarity weights, the linear fit) captum's.
- `lime_reference`: captum's `Lime` on one series with the same segments and coalitions (`lime_image.coalitions`),
  lime's kernel on the cosine distance and a ridge surrogate, the surrogate `series_lime` fits.
Both take `perturbations_per_eval` (captum's default 1: one model pass per coalition)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from captum.attr import KernelShap, Lime, Occlusion

from xaidash.explainers.methods.lime_image import lime_kernel


def occlusion_reference(
    model: torch.nn.Module,
    x: torch.Tensor,
    baselines: torch.Tensor,
    targets: torch.Tensor,
    window: int,
    stride: int,
    *,
    each_channel: bool = False,
    perturbations_per_eval: int = 1,
) -> torch.Tensor:
    """captum's Occlusion attributions (N, C, T) of prepared series x (N, C, T)."""
    channels = 1 if each_channel else x.shape[1]
    return Occlusion(model).attribute(
        x,
        sliding_window_shapes=(channels, window),
        strides=(1, stride),
        baselines=baselines,
        target=targets,
        perturbations_per_eval=perturbations_per_eval,
    )


def _replayed(rows: np.ndarray, device: torch.device) -> Iterator[torch.Tensor]:
    # On the input's device, as captum's own samplers draw them (it indexes them with the feature mask there).
    for row in rows:
        yield torch.as_tensor(row, dtype=torch.long, device=device).view(1, -1)


class _ReplayedKernelShap(KernelShap):
    """captum's KernelShap drawing the given coalitions instead of its own."""

    def __init__(self, forward_func: Any, rows: np.ndarray):
        super().__init__(forward_func)
        self.rows = rows

    def kernel_shap_perturb_generator(self, original_inp: Any, **kwargs: Any) -> Iterator[torch.Tensor]:
        first = original_inp[0] if isinstance(original_inp, tuple) else original_inp
        yield from _replayed(self.rows, first.device)


def segment_mask(labels: torch.Tensor, channels: int) -> torch.Tensor:
    """(1, C, T) feature mask: every channel of a step in its time segment."""
    return labels.view(1, 1, -1).expand(1, channels, -1).contiguous()


def kernel_shap_reference(
    model: torch.nn.Module,
    x: torch.Tensor,
    fill: torch.Tensor,
    target: int,
    labels: torch.Tensor,
    rows: np.ndarray,
    *,
    perturbations_per_eval: int = 1,
) -> torch.Tensor:
    """captum's KernelShap (1, C, T) of one prepared series x (1, C, T), hidden segments from `fill` (1, C, T), on
    the coalitions `rows` (S, k)."""
    return _ReplayedKernelShap(model, rows).attribute(
        x,
        baselines=fill,
        target=target,
        feature_mask=segment_mask(labels.to(x.device), x.shape[1]),
        n_samples=len(rows),
        perturbations_per_eval=perturbations_per_eval,
    )


def cosine_similarity_kernel(width: float) -> Any:
    """captum's `similarity_func` giving lime_image's kernel on the cosine distance of a coalition to all-shown."""

    def similarity(original: Any, perturbed: Any, interpretable: torch.Tensor, **kwargs: Any) -> float:
        z = interpretable.double().flatten()
        shown, k = float(z.sum()), z.numel()
        distance = 1.0 - shown / (np.sqrt(shown) * np.sqrt(k)) if shown else 1.0  # sklearn's cosine distance
        return float(lime_kernel(np.array(distance), width))

    return similarity


def lime_reference(
    model: torch.nn.Module,
    x: torch.Tensor,
    fill: torch.Tensor,
    target: int,
    labels: torch.Tensor,
    rows: np.ndarray,
    kernel_width: float,
    *,
    perturbations_per_eval: int = 1,
) -> torch.Tensor:
    """captum's Lime (1, C, T) of the target probability of one prepared series, on the coalitions `rows`."""
    from captum._utils.models.linear_model import SkLearnRidge

    def replay(original: Any, **kwargs: Any) -> Iterator[torch.Tensor]:
        yield from _replayed(rows, x.device)

    def probability(batch: torch.Tensor) -> torch.Tensor:
        return torch.softmax(model(batch), 1)

    lime = Lime(
        probability,
        interpretable_model=SkLearnRidge(alpha=1.0),  # lime's LimeBase default
        similarity_func=cosine_similarity_kernel(kernel_width),
        perturb_func=replay,
    )
    return lime.attribute(
        x,
        baselines=fill,
        target=target,
        feature_mask=segment_mask(labels.to(x.device), x.shape[1]),
        n_samples=len(rows),
        perturbations_per_eval=perturbations_per_eval,
    )
