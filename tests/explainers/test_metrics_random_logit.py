"""The random-logit test: another class is always drawn, and on the trained shapes model a class-sensitive method
(Grad-CAM) changes its map with the class more than one that mostly draws the input (guided backpropagation)."""

from __future__ import annotations

import numpy as np
import pytest

from xaidash.explainers import explain
from xaidash.explainers.metrics.random_logit import map_similarity, other_classes, random_logit
from xaidash.explainers.params import ExplainError
from xaidash.explainers.samples import pick_test_sample


def test_the_other_class_is_never_the_target() -> None:
    t = np.arange(40) % 4
    others = other_classes(t, 4, seed=1)
    assert np.all(others != t) and set(others) <= {0, 1, 2, 3}
    assert np.array_equal(others, other_classes(t, 4, seed=1))  # seeded
    with pytest.raises(ExplainError, match="two classes"):
        other_classes([0], 1)


def test_similarity_of_a_map_with_itself_is_one() -> None:
    m = np.random.default_rng(0).random((16, 16))
    assert map_similarity(m, m, "image") == pytest.approx(1.0)
    assert map_similarity(m[0], m[0], "text") == pytest.approx(1.0)


def test_gradcam_is_more_class_sensitive_than_guided_backprop(trained_shapes, offline_data) -> None:
    sample = pick_test_sample(trained_shapes, n=8, seed=0)
    scores = {}
    for method in ("gradcam", "guided_backprop"):
        e = explain(trained_shapes, sample.raw, None, method)
        scores[method] = random_logit(trained_shapes, sample.raw, e, seed=0)
    assert np.nanmean(scores["gradcam"]) < np.nanmean(scores["guided_backprop"])
