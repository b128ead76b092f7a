"""How concentrated a map is: sparseness (Gini index of |map|, Chalasani et al. 2020) and complexity (entropy of
|map| normalised to sum 1, Bhatt et al. 2020). Both read only the map, so they are cheap and scored on every page.

Written here (a few tensor operations, batched on the maps' device) rather than through Quantus, which is a
test-only dependency: tests/explainers/test_metrics_complexity.py checks both against Quantus's Sparseness and
Complexity on the same maps.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from xaidash.explainers.map_arrays import Attributions
from xaidash.explainers.metrics.maps import magnitudes


def _gini(a: torch.Tensor) -> torch.Tensor:
    """Gini index of each row of non-negative `a` (N, n): sum_i (2i - n - 1) a_(i) / (n sum a), a sorted ascending."""
    n = a.shape[1]
    s = torch.sort(a, dim=1).values
    i = torch.arange(1, n + 1, device=a.device, dtype=a.dtype)
    total = s.sum(1)
    g = ((2 * i - n - 1) * s).sum(1) / (n * total)
    return torch.where(total > 0, g, torch.full_like(g, math.nan))


def _entropy(a: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of non-negative `a` normalised to sum 1 (0 log 0 = 0)."""
    total = a.sum(1, keepdim=True)
    p = a / total
    h = -(torch.where(p > 0, p * torch.log(p), torch.zeros_like(p))).sum(1)
    return torch.where(total[:, 0] > 0, h + 0.0, torch.full_like(h, math.nan))  # + 0.0: no -0.0


def sparseness(attributions: Attributions, device: torch.device | None = None) -> np.ndarray:
    """Gini index of |map| per input (higher: fewer pixels/words carry the attribution). 1 - 1/n for a map with one
    non-zero value among n, 0 for a constant non-zero map, NaN for an all-zero map."""
    return np.concatenate([_gini(a).cpu().numpy() for a in magnitudes(attributions, device)])


def complexity(attributions: Attributions, device: torch.device | None = None) -> np.ndarray:
    """Entropy (nats) of |map| / sum |map| per input (lower: more concentrated). 0 for one non-zero value,
    log n for a constant map of n values, NaN for an all-zero map."""
    return np.concatenate([_entropy(a).cpu().numpy() for a in magnitudes(attributions, device)])
