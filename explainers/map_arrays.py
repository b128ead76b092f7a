"""Helpers the metric modules share: turning attributions and inputs into arrays, rank correlation, SSIM.

The modality adapters (explainers/modalities) read maps and compare them with these, so nothing here imports what
asks an adapter (`explainers.api`, the metric specs)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr

from xaidash.explainers.explanation import Explanation
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

# What every metric accepts as "the attributions": an Explanation, an array (N, H, W), or a list of 1-D arrays (text).
Attributions = Explanation | np.ndarray | torch.Tensor | Sequence[np.ndarray]


def image_maps(attributions: Attributions) -> np.ndarray:
    """Image attributions as float32 (N, H, W); a single (H, W) map becomes (1, H, W)."""
    if isinstance(attributions, Explanation):
        attributions = attributions.attributions
    if isinstance(attributions, torch.Tensor):
        attributions = attributions.detach().cpu().numpy()
    maps = np.asarray(attributions, dtype=np.float32)
    if maps.ndim == 2:
        maps = maps[None]
    if maps.ndim == 4:  # (N, C, H, W) per-channel maps: the pixel's score is the channel sum, as in explain()
        maps = maps.sum(1)
    if maps.ndim != 3:
        raise ExplainError(f"Image attributions must be (N, H, W), got shape {maps.shape}.")
    return maps


def word_maps(attributions: Attributions) -> list[np.ndarray]:
    """Text attributions as one float32 1-D array per input."""
    if isinstance(attributions, Explanation):
        attributions = attributions.attributions
    if isinstance(attributions, torch.Tensor):
        attributions = attributions.detach().cpu().numpy()
    if isinstance(attributions, np.ndarray) and attributions.ndim == 1:
        attributions = [attributions]
    return [np.asarray(a, dtype=np.float32).reshape(-1) for a in attributions]


def grid_magnitudes(attributions: Attributions, device: torch.device | None) -> list[torch.Tensor]:
    """|map| of image attributions as one (N, H*W) float64 tensor on `device` (all maps have one size)."""
    maps = torch.from_numpy(image_maps(attributions)).to(device or "cpu", torch.float64)
    return [maps.flatten(1).abs()]


def row_magnitudes(maps: Sequence[np.ndarray]) -> list[torch.Tensor]:
    """|map| of each flat map as its own (1, n) float64 row on the CPU (maps of different lengths: texts)."""
    return [torch.from_numpy(np.abs(m.astype(np.float64))).unsqueeze(0) for m in maps]


def image_batch(bundle: ModelBundle, images: torch.Tensor | np.ndarray | str | Sequence[Any]) -> torch.Tensor:
    """Raw images (N, C, H, W) in [0, 1] as float32 on the bundle's device, shape-checked."""
    if isinstance(images, str) or (isinstance(images, Sequence) and any(isinstance(v, str) for v in images)):
        raise ExplainError(f"{bundle.spec.name} is an image model: pass images, not text.")
    x = torch.as_tensor(images, dtype=torch.float32)
    if x.dim() == 3:
        x = x.unsqueeze(0)
    if x.dim() != 4 or tuple(x.shape[1:]) != tuple(bundle.info.input_shape):
        raise ExplainError(
            f"Images must have shape (N, {', '.join(map(str, bundle.info.input_shape))}) for this model, "
            f"got {tuple(x.shape)}."
        )
    return x.to(bundle.device)


def target_tensor(targets: Any, n: int, device: torch.device) -> torch.Tensor | None:
    """Targets as a (N,) long tensor on `device`, or None to mean 'the predicted class'."""
    if targets is None:
        return None
    if isinstance(targets, Explanation):
        targets = targets.targets
    if isinstance(targets, (int, np.integer)):
        targets = [int(targets)] * n
    t = torch.as_tensor(np.asarray(targets, dtype=np.int64).reshape(-1), device=device)
    if len(t) != n:
        raise ExplainError(f"Got {len(t)} targets for {n} inputs.")
    return t


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation of two flat maps; NaN when either is constant (no ranking to compare)."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if a.size != b.size:
        raise ExplainError(f"Cannot correlate maps of {a.size} and {b.size} values.")
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(spearmanr(a, b).statistic)


def nanmean(values: Sequence[float]) -> float:
    """Mean ignoring NaN; NaN (without a warning) when nothing is left."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    return float(arr.mean()) if arr.size else float("nan")


def map_ssim(a: np.ndarray, b: np.ndarray) -> float | None:
    """SSIM of |a| and |b|, each scaled by its max |value| (2-D maps); None when a map is not 2-D or is smaller
    than SSIM's 7x7 window."""
    from skimage.metrics import structural_similarity

    if a.ndim != 2 or min(a.shape) < 7:
        return None
    a, b = np.abs(a), np.abs(b)  # SSIM wants a fixed range: |map| / max |map| lies in [0, 1]
    sa, sb = a / (a.max() or 1.0), b / (b.max() or 1.0)
    return float(structural_similarity(sa, sb, data_range=1.0))
