"""How much methods agree: pairwise Spearman rank correlation of their maps, averaged over inputs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from xaidash.explainers.map_arrays import Attributions, nanmean, spearman
from xaidash.explainers.metrics.maps import flat_maps
from xaidash.explainers.params import ExplainError


def agreement_matrix(explanations: Mapping[str, Attributions], absolute: bool = True) -> pd.DataFrame:
    """Symmetric DataFrame (methods x methods) of mean Spearman correlations between maps of the same inputs.

    `explanations` maps a method name to its Explanation (or arrays) for the same inputs in the
    same order. `absolute` ranks |attribution| (default: methods disagree on sign conventions,
    e.g. CAM is non-negative). Input pairs with a constant map or different lengths are skipped;
    a pair with none left is NaN.
    """
    names = list(explanations)
    maps = {k: flat_maps(v) for k, v in explanations.items()}
    counts = {len(v) for v in maps.values()}
    if len(counts) > 1:
        raise ExplainError(f"All methods must explain the same inputs; got counts {sorted(counts)}.")
    if absolute:
        maps = {k: [np.abs(m) for m in v] for k, v in maps.items()}
    out = np.full((len(names), len(names)), np.nan)
    for i, a in enumerate(names):
        for j in range(i, len(names)):
            b = names[j]
            rhos = [spearman(p, q) if p.size == q.size else float("nan") for p, q in zip(maps[a], maps[b], strict=True)]
            out[i, j] = out[j, i] = nanmean(rhos)
    return pd.DataFrame(out, index=names, columns=names)
