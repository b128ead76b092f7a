"""Maps as the metrics read them, one per input: an Explanation's through its modality's adapter (which knows
whether its maps lie on a grid or along a sequence), plain arrays by their shape (a list of 1-D arrays: one score
per word of each text; otherwise image maps (N, H, W) or (H, W))."""

from __future__ import annotations

import numpy as np
import torch

from xaidash.explainers.explanation import Explanation
from xaidash.explainers.map_arrays import Attributions, grid_magnitudes, image_maps, row_magnitudes, word_maps
from xaidash.explainers.modalities import adapter_of


def _rows(attributions: Attributions) -> bool:
    """Whether plain `attributions` are one 1-D array per input (texts) rather than image maps."""
    return isinstance(attributions, (list, tuple)) and bool(attributions) and np.ndim(attributions[0]) == 1


def metric_maps(attributions: Attributions) -> list[np.ndarray]:
    """One float32 map per input: (H, W) for images (channels summed), 1-D for texts."""
    if isinstance(attributions, Explanation):
        return adapter_of(attributions.modality).metric_maps(attributions)
    return word_maps(attributions) if _rows(attributions) else list(image_maps(attributions))


def flat_maps(attributions: Attributions) -> list[np.ndarray]:
    """One flat float32 array per input, whatever the modality (for rank correlations and sums)."""
    return [m.reshape(-1) for m in metric_maps(attributions)]


def magnitudes(attributions: Attributions, device: torch.device | None) -> list[torch.Tensor]:
    """|map| per input as float64 rows: one (N, n) tensor on `device` where every map has one size (images), one
    (1, n) row per map where lengths differ (texts; any plain list of maps)."""
    if isinstance(attributions, Explanation):
        return adapter_of(attributions.modality).magnitudes(attributions, device)
    if isinstance(attributions, (list, tuple)):
        return row_magnitudes(flat_maps(attributions))
    return grid_magnitudes(attributions, device)
