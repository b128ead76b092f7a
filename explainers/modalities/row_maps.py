"""What the adapters whose maps are one value per position of a row share (a series' steps, a table's columns): the
values kept in the figure JSON as `attributions`, the metrics' inputs and maps, the magnitudes sparseness and
complexity read, and the Spearman similarity of two maps (a row is too short for SSIM)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.explainers.map_arrays import row_magnitudes, spearman, word_maps
from xaidash.explainers.modalities.base import ExplainingModality
from xaidash.models.bundle import ModelBundle


@dataclass(frozen=True)
class RowMaps(ExplainingModality):
    """Maps of one value per position; the adapter reads and checks inputs (`checked`)."""

    def values_from_json(self, d: dict[str, Any]) -> np.ndarray | None:
        if "attributions" not in d:
            return None
        return np.asarray([np.nan if v is None else v for v in d["attributions"]], np.float32)

    # ---- metrics -----------------------------------------------------------------------------------------------
    def metric_inputs(self, bundle: ModelBundle, inputs: Any) -> Any:
        return self.checked(bundle, inputs)

    def metric_maps(self, attributions: Any) -> list[np.ndarray]:
        """One 1-D array of scores per input (a series' steps, a row's columns)."""
        return word_maps(attributions)

    def magnitudes(self, attributions: Any, device: torch.device | None) -> list[torch.Tensor]:
        """|map| of every input as one (N, positions) tensor on `device` when the maps share their length, else one
        row each on the CPU."""
        maps = self.metric_maps(attributions)
        if len({m.size for m in maps}) > 1:
            return row_magnitudes(maps)
        return [torch.from_numpy(np.abs(np.stack(maps).astype(np.float64))).to(device or "cpu")]

    def map_similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        """Spearman rank correlation of the scores."""
        return spearman(a, b)
