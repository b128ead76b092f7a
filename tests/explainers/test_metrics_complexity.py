"""Sparseness (Gini of |map|) and complexity (entropy of the normalised |map|) against their closed forms, a direct
numpy computation and Quantus's Sparseness / Complexity on the same maps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xaidash.explainers.metrics.complexity import complexity, sparseness


def _gini(a: np.ndarray) -> float:
    """The Gini index by its textbook definition: mean absolute difference over twice the mean."""
    a = np.abs(a.ravel()).astype(np.float64)
    return float(np.abs(a[:, None] - a[None, :]).sum() / (2 * a.size**2 * a.mean()))


def _entropy(a: np.ndarray) -> float:
    p = np.abs(a.ravel()).astype(np.float64)
    p = p[p > 0] / p.sum()
    return float(-(p * np.log(p)).sum())


def test_one_hot_and_uniform_maps_have_their_closed_forms() -> None:
    maps = np.zeros((2, 8, 8), dtype=np.float32)
    maps[0, 3, 5] = -2.0  # one pixel carries everything (its sign does not matter)
    maps[1] = 0.5  # spread evenly
    n = 64
    assert sparseness(maps) == pytest.approx([1 - 1 / n, 0.0], abs=1e-9)
    assert complexity(maps) == pytest.approx([0.0, math.log(n)], abs=1e-9)


def test_random_maps_match_a_direct_numpy_computation() -> None:
    maps = np.random.default_rng(0).normal(size=(5, 12, 12)).astype(np.float32)
    assert sparseness(maps) == pytest.approx([_gini(m) for m in maps], rel=1e-6)
    assert complexity(maps) == pytest.approx([_entropy(m) for m in maps], rel=1e-6)


def test_text_maps_of_different_lengths_and_an_all_zero_map() -> None:
    words = [np.array([0.0, 3.0, 0.0]), np.array([1.0, -1.0]), np.zeros(4)]
    s, c = sparseness(words), complexity(words)
    assert s[:2] == pytest.approx([2 / 3, 0.0]) and c[:2] == pytest.approx([0.0, math.log(2)])
    assert math.isnan(s[2]) and math.isnan(c[2])  # nothing to spread: undefined, not 0


def test_equal_to_quantus_sparseness_and_complexity() -> None:
    quantus = pytest.importorskip("quantus")
    rng = np.random.default_rng(1)
    maps = rng.normal(size=(6, 16, 16)).astype(np.float32)
    x = rng.random((6, 1, 16, 16)).astype(np.float32)
    kw = {"abs": True, "normalise": False, "disable_warnings": True, "display_progressbar": False}
    q_sparse = quantus.Sparseness(**kw).evaluate_batch(x_batch=x, a_batch=np.abs(maps[:, None]).copy())
    q_complex = quantus.Complexity(**kw).evaluate_batch(x_batch=x, a_batch=np.abs(maps[:, None]).copy())
    # Quantus adds 1e-7 to every value before the Gini sum and 1e-12 inside the log: equal to that precision.
    assert sparseness(maps) == pytest.approx(np.asarray(q_sparse), abs=1e-5)
    assert complexity(maps) == pytest.approx(np.asarray(q_complex), abs=1e-5)
