"""The spread of per-input scores shown beside every mean on the Compare page."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xaidash.explainers.metrics.sanity import _row
from xaidash.explainers.metrics.spread import is_constant, spread


def test_spread_mean_interval_range_and_undefined():
    s = spread([0.1, 0.3, float("nan"), 0.5, None])
    assert (s.n, s.valid, s.undefined) == (5, 3, 2)
    assert s.mean == pytest.approx(0.3) and (s.minimum, s.maximum) == (0.1, 0.5)
    # t(0.975, 2) = 4.303; sd = 0.2; half-width = 4.303 * 0.2 / sqrt(3)
    assert s.half_width == pytest.approx(4.3027 * 0.2 / math.sqrt(3), rel=1e-3)
    one = spread([0.7])
    assert one.mean == 0.7 and math.isnan(one.low)
    none = spread([float("nan")])
    assert none.valid == 0 and math.isnan(none.mean)


def test_is_constant():
    assert is_constant(np.zeros((4, 4))) and is_constant([2.0]) and not is_constant([0.0, 1e-9])


def test_sanity_row_counts_maps_that_become_constant():
    rng = np.random.default_rng(0)
    original = [rng.random(64) for _ in range(4)]
    current = [original[0] + 0.01 * rng.random(64), np.zeros(64), np.zeros(64), rng.random(64)]
    row = _row("gradcam", 3, "layer", original, current, ssim=False)
    assert row["n"] == 4 and row["constant"] == 2  # counted, not silently dropped
    assert np.isnan(row["values"][1]) and np.isnan(row["values"][2])
    assert row["spearman_min"] <= row["spearman"] <= row["spearman_max"]
    assert row["spearman_low"] <= row["spearman"] <= row["spearman_high"]
