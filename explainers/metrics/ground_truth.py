"""Agreement of maps with known ground truth: object masks (images) and rationale words (text).

Pointing game (Zhang et al. 2018, "Top-down neural attention by excitation backprop"): a hit
when the highest-scoring pixel lies in the object mask, optionally grown by `tolerance`
pixels (they use 15 px at 224 px). Tied maxima share the hit: the score is the fraction of
the maximal pixels inside the mask, so a constant map scores the mask's area share (chance),
not a free hit. Energy (Wang et al. 2020, Score-CAM's energy-based pointing game): the share
of positive attribution that falls inside the mask. Text uses the same two scores with the
rationale words as the "mask".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from scipy.ndimage import binary_dilation
from skimage.morphology import disk

from xaidash.explainers.map_arrays import Attributions, image_maps, word_maps
from xaidash.explainers.params import ExplainError


def _masks(masks: np.ndarray | torch.Tensor, shape: tuple[int, ...]) -> np.ndarray:
    if isinstance(masks, torch.Tensor):
        masks = masks.detach().cpu().numpy()
    m = np.asarray(masks).astype(bool)
    if m.ndim == 2:
        m = m[None]
    if m.shape != shape:
        raise ExplainError(f"Masks have shape {m.shape}; the attributions need {shape}.")
    return m


def _max_share(scores: np.ndarray, inside: np.ndarray) -> float:
    """Fraction of the maximal entries of `scores` that lie where `inside` is True."""
    top = scores == scores.max()
    return float(inside[top].mean())


def pointing_game(
    attributions: Attributions,
    masks: np.ndarray | torch.Tensor,
    tolerance: int = 0,
    absolute: bool = False,
) -> np.ndarray:
    """Per image 1.0 when the peak of the map is inside the (dilated) mask, 0.0 when outside.

    attributions (N, H, W); masks (N, H, W) bool. `absolute` ranks by |attribution| (for
    methods whose sign is not evidence for the class); by default the most positive pixel counts.
    """
    maps = image_maps(attributions)
    m = _masks(masks, maps.shape)
    if tolerance < 0:
        raise ExplainError("tolerance must be >= 0 pixels.")
    if tolerance:
        foot = disk(int(tolerance)).astype(bool)
        m = np.stack([binary_dilation(mi, structure=foot) for mi in m])
    maps = np.abs(maps) if absolute else maps
    return np.array([_max_share(a, mi) for a, mi in zip(maps, m, strict=True)], dtype=np.float32)


def energy_in_mask(attributions: Attributions, masks: np.ndarray | torch.Tensor) -> np.ndarray:
    """Per image: positive attribution inside the mask / all positive attribution (NaN when none is positive)."""
    maps = image_maps(attributions)
    m = _masks(masks, maps.shape)
    pos = np.clip(maps, 0.0, None)
    total = pos.reshape(len(pos), -1).sum(1)
    inside = (pos * m).reshape(len(pos), -1).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, inside / np.where(total > 0, total, 1.0), np.nan).astype(np.float32)


def _rationale_masks(scores: list[np.ndarray], rationales: Sequence[Sequence[int]]) -> list[np.ndarray]:
    if len(scores) != len(rationales):
        raise ExplainError(f"Got {len(scores)} score rows and {len(rationales)} rationales.")
    out = []
    for sc, rat in zip(scores, rationales, strict=True):
        inside = np.zeros(len(sc), dtype=bool)
        idx = [int(i) for i in rat if 0 <= int(i) < len(sc)]  # words cut off by max_length are not scored
        inside[idx] = True
        out.append(inside)
    return out


def rationale_pointing(attributions: Attributions, rationales: Sequence[Sequence[int]]) -> np.ndarray:
    """Per text: 1.0 when the top-scoring word is a rationale word (tied tops share); NaN without rationale."""
    scores = word_maps(attributions)
    return np.array(
        [
            _max_share(sc, m) if m.any() and len(sc) else np.nan
            for sc, m in zip(scores, _rationale_masks(scores, rationales), strict=True)
        ],
        dtype=np.float32,
    )


def rationale_energy(attributions: Attributions, rationales: Sequence[Sequence[int]]) -> np.ndarray:
    """Per text: share of positive word scores on rationale words (NaN without rationale or positive mass)."""
    scores = word_maps(attributions)
    out = []
    for sc, m in zip(scores, _rationale_masks(scores, rationales), strict=True):
        pos = np.clip(sc, 0.0, None)
        out.append(float(pos[m].sum() / pos.sum()) if m.any() and pos.sum() > 0 else np.nan)
    return np.array(out, dtype=np.float32)
