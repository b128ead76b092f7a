"""The result type every method returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Explanation:
    """Attributions for a batch of inputs from one method.

    Images: `attributions` is (N, H, W), signed, at the input's resolution (channels summed;
    the per-channel map, when the method has one, is kept in `channel_attributions`; graphs: a list of
    (nodes, features) arrays, one per input, as their subgraphs differ in size).
    Text: `attributions` is a list with one 1-D array per input, one score per word of
    `tokens[i]` (word pieces merged back into words).
    `diagnostics` maps a name (e.g. 'convergence_delta') to one value per input.
    `segments`: for superpixel methods, the (N, H, W) labels whose superpixels each carry one value
    (the map repeats it over their pixels).
    """

    method: str
    params: dict[str, Any]
    targets: np.ndarray
    attributions: np.ndarray | list[np.ndarray]
    seconds: float
    device: str
    modality: str
    tokens: list[list[str]] | None = None
    channel_attributions: np.ndarray | list[np.ndarray] | None = None
    diagnostics: dict[str, list[float]] = field(default_factory=dict)
    segments: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.targets)

    def item(self, i: int) -> np.ndarray:
        return np.asarray(self.attributions[i])

    def absolute(self, i: int) -> np.ndarray:
        return np.abs(self.item(i))

    def normalized(self, i: int, scale: float | None = None) -> np.ndarray:
        """Map i divided by `scale` (default: its own max |value|), so it lies in [-1, 1]."""
        a = self.item(i).astype(np.float32)
        s = float(scale) if scale is not None else float(np.abs(a).max())
        return a / s if s > 0 else np.zeros_like(a)

    def max_abs(self) -> float:
        """Largest |attribution| over the batch: a shared colour scale across methods uses the max of these."""
        return max((float(np.abs(self.item(i)).max()) if self.item(i).size else 0.0) for i in range(len(self)))

    def summary(self) -> dict[str, Any]:
        """JSON-friendly description (no arrays)."""
        return {
            "method": self.method,
            "params": self.params,
            "targets": [int(t) for t in self.targets],
            "seconds": round(self.seconds, 4),
            "device": self.device,
            "diagnostics": {k: [float(v) for v in vals] for k, vals in self.diagnostics.items()},
        }
