"""Ground-truth columns found (tables): on a table whose generator records which columns set the label
(`DatasetInfo.truth_columns`, the `planted` table), the share of them among a map's k columns of largest
|attribution|, k the number of truth columns (top-k recall; ties broken by column order). 1 when the map's strongest
columns are exactly the truth, k_random / F expected of a map that ranks columns at random."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xaidash.explainers.map_arrays import Attributions, word_maps
from xaidash.explainers.params import ExplainError


def truth_recall(
    attributions: Attributions, columns: Sequence[str], truth: Sequence[str], k: int | None = None
) -> np.ndarray:
    """Per row: |top-k columns by |attribution| ∩ truth| / |truth| (k = len(truth) by default); NaN without truth."""
    maps = word_maps(attributions)
    names = list(columns)
    unknown = [t for t in truth if t not in names]
    if unknown:
        raise ExplainError(f"Truth columns {', '.join(unknown)} are not columns of the table.")
    wanted = {names.index(t) for t in truth}
    top = len(wanted) if k is None else int(k)
    out = []
    for m in maps:
        if len(m) != len(names):
            raise ExplainError(f"A map has {len(m)} values for {len(names)} columns.")
        if not wanted or top < 1:
            out.append(np.nan)
            continue
        order = np.argsort(-np.abs(np.nan_to_num(m.astype(np.float64))), kind="stable")[:top]
        out.append(len(wanted.intersection(int(j) for j in order)) / len(wanted))
    return np.asarray(out, dtype=np.float32)
