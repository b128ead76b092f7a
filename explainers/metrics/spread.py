"""How much a per-input score varies: the mean with a 95% confidence interval, the range over the inputs,
and how many inputs had no value (a constant map has no ranking; a metric may be undefined for an input).

Every table and chart that shows a mean over a few inputs shows this with it, so a reader can tell a
difference between two methods from the luck of the draw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Spread:
    """Summary of per-input values. `n`: inputs; `valid`: those with a finite value (the statistics are over
    these); `low`/`high`: the 95% t-interval of the mean (NaN with fewer than two valid values);
    `minimum`/`maximum`: the range over the inputs."""

    n: int
    valid: int
    mean: float
    low: float
    high: float
    minimum: float
    maximum: float
    std: float

    @property
    def undefined(self) -> int:
        return self.n - self.valid

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2 if math.isfinite(self.low) and math.isfinite(self.high) else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "undefined": self.undefined}


def spread(values: Sequence[float | None] | np.ndarray, confidence: float = CONFIDENCE) -> Spread:
    """Mean, `confidence` t-interval of the mean, min, max and std (ddof=1) of the finite values; None and NaN
    count as undefined. No finite value: every statistic NaN."""
    arr = np.array([np.nan if v is None else float(v) for v in np.asarray(values, dtype=object).reshape(-1)])
    n = int(arr.size)
    finite = arr[np.isfinite(arr)]
    k = int(finite.size)
    nan = float("nan")
    if k == 0:
        return Spread(n, 0, nan, nan, nan, nan, nan, nan)
    mean = float(finite.mean())
    if k == 1:
        return Spread(n, 1, mean, nan, nan, mean, mean, nan)
    from scipy.stats import t

    std = float(finite.std(ddof=1))
    half = float(t.ppf(0.5 + confidence / 2, k - 1)) * std / math.sqrt(k)
    return Spread(n, k, mean, mean - half, mean + half, float(finite.min()), float(finite.max()), std)


def is_constant(values: np.ndarray | Sequence[float]) -> bool:
    """True when a map has a single value (all zeros after a ReLU, say): it ranks nothing."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    finite = arr[np.isfinite(arr)]
    return finite.size < 2 or float(np.ptp(finite)) == 0.0
