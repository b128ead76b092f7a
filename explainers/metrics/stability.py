"""How much a map moves when the input moves a little: local Lipschitz estimate (Alvarez-Melis & Jaakkola 2018)
and max-sensitivity (Yeh et al. 2019), both from one batched recomputation of the map on a few noisy neighbours.

For each input x, `samples` neighbours x' = clip(x + U(-radius, radius)) (uniform per pixel and channel, in [0, 1]
pixel units) are explained in one `explain()` call with x's target, and
  local Lipschitz  = max over x' of ||map(x') - map(x)|| / ||x' - x||   (map units per input unit)
  max-sensitivity  = max over x' of ||map(x') - map(x)|| / ||map(x)||   (a ratio)
(Frobenius norms). Sharing the neighbours halves the cost of scoring both. captum's `sensitivity_max` (used by
`robustness.sensitivity_max_score`) computes max-sensitivity with one explanation call per batch of neighbours and
cannot give the Lipschitz ratio; with the same seed it draws the same neighbours, and the tests check that the
two agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.explainers.api import explain
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.guard import evaluating
from xaidash.explainers.map_arrays import image_batch, image_maps, target_tensor
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

STABILITY_SAMPLES = 8  # neighbours per input (captum's and sensitivity_max_score's default)
# Neighbours per input where the Compare page scores every method (`scoring.input_metrics`): the recomputation is
# the costliest metric there (IG on 16 shapes inputs, 2-core CPU: 24 s with 8 neighbours, 17 s with 4), so half as many; the
# estimate is a lower bound of the maximum either way.
COMPARE_NEIGHBOURS = 4
STABILITY_RADIUS = 0.02  # half-width of the uniform noise, in [0, 1] pixel units


@dataclass
class Stability:
    """Per-input local Lipschitz estimates and max-sensitivities (N,)."""

    lipschitz: np.ndarray
    max_sensitivity: np.ndarray


def neighbours(raw: torch.Tensor, samples: int, radius: float, seed: int) -> torch.Tensor:
    """(N * samples, C, H, W): each input repeated `samples` times (input-major, as captum orders them) plus
    uniform noise in [-radius, radius], clipped to [0, 1]."""
    expanded = torch.repeat_interleave(raw, samples, dim=0)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    noise = (torch.rand(expanded.shape, generator=gen) * 2 - 1) * radius
    return (expanded + noise.to(expanded.device, expanded.dtype)).clamp(0.0, 1.0)


def stability_from_maps(
    maps: np.ndarray, neighbour_maps: np.ndarray, inputs: np.ndarray, neighbour_inputs: np.ndarray
) -> Stability:
    """Both scores from maps (N, H, W) of inputs (N, ...) and maps (N, S, H, W) of their neighbours (N, S, ...)."""
    n, s = neighbour_maps.shape[:2]
    diff = np.linalg.norm((neighbour_maps - maps[:, None]).reshape(n, s, -1).astype(np.float64), axis=2)
    moved = np.linalg.norm((neighbour_inputs - inputs[:, None]).reshape(n, s, -1).astype(np.float64), axis=2)
    size = np.linalg.norm(maps.reshape(n, -1).astype(np.float64), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lipschitz = np.where(moved > 0, diff / moved, np.nan)
        sensitivity = diff / size[:, None]
    return Stability(np.nanmax(lipschitz, axis=1), np.max(sensitivity, axis=1))


def stability(
    bundle: ModelBundle,
    images: torch.Tensor | np.ndarray,
    method: str,
    attributions: Explanation | np.ndarray | None = None,
    targets: int | Sequence[int] | np.ndarray | torch.Tensor | None = None,
    *,
    params: dict[str, Any] | None = None,
    samples: int = STABILITY_SAMPLES,
    radius: float = STABILITY_RADIUS,
    background: torch.Tensor | None = None,
    batch_size: int = 256,
    seed: int = 0,
) -> Stability:
    """Local Lipschitz estimate and max-sensitivity of `method`'s maps of `images` (N, C, H, W) in [0, 1].
    `attributions`: the maps of `images` when already computed (else computed here); targets stay those of x."""
    if not bundle.adapter.spatial:
        raise ExplainError("Local Lipschitz and max-sensitivity are for image models.")
    if samples < 1:
        raise ExplainError(f"samples must be at least 1, got {samples}.")
    raw = image_batch(bundle, images)
    if targets is None and isinstance(attributions, Explanation):
        targets = attributions.targets
    t = target_tensor(targets, len(raw), raw.device)
    if t is None:
        with evaluating(bundle.model):
            t = bundle.predicted(bundle.prepare(raw), batch_size)
    kw = dict(batch_size=batch_size, background=background, seed=seed, **(params or {}))
    if attributions is None:
        attributions = explain(bundle, raw, t.tolist(), method, **kw)
    near = neighbours(raw, samples, radius, seed)
    # One batched call for every neighbour of every input: `explain` streams them through the model.
    near_maps = image_maps(explain(bundle, near, t.repeat_interleave(samples).tolist(), method, **kw))
    n, (h, w) = len(raw), raw.shape[-2:]
    return stability_from_maps(
        image_maps(attributions),
        near_maps.reshape(n, samples, h, w),
        raw.cpu().numpy(),
        near.cpu().numpy().reshape(n, samples, *raw.shape[1:]),
    )
