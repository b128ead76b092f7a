"""Local Lipschitz estimate and max-sensitivity: the formulas against numpy, max-sensitivity against captum's
`sensitivity_max` on the same neighbours."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.data.registry import get_source
from xaidash.explainers.metrics.robustness import sensitivity_max_score
from xaidash.explainers.metrics.stability import neighbours, stability, stability_from_maps
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec


def test_scores_from_maps_match_numpy() -> None:
    rng = np.random.default_rng(0)
    maps, near_maps = rng.normal(size=(2, 4, 4)), rng.normal(size=(2, 3, 4, 4))
    x, near_x = rng.random((2, 1, 4, 4)), rng.random((2, 3, 1, 4, 4))
    s = stability_from_maps(maps, near_maps, x, near_x)
    for i in range(2):
        d = [np.sqrt(((near_maps[i, j] - maps[i]) ** 2).sum()) for j in range(3)]
        dx = [np.sqrt(((near_x[i, j] - x[i]) ** 2).sum()) for j in range(3)]
        assert s.lipschitz[i] == pytest.approx(max(a / b for a, b in zip(d, dx, strict=True)))
        assert s.max_sensitivity[i] == pytest.approx(max(d) / np.sqrt((maps[i] ** 2).sum()))


def test_neighbours_stay_within_the_radius_and_the_pixel_range() -> None:
    raw = torch.rand(2, 3, 5, 5)
    near = neighbours(raw, 4, 0.02, seed=0)
    assert near.shape == (8, 3, 5, 5)
    assert float((near - raw.repeat_interleave(4, 0)).abs().max()) <= 0.02 + 1e-7
    assert float(near.min()) >= 0 and float(near.max()) <= 1


def test_max_sensitivity_equals_captums_on_the_same_neighbours() -> None:
    torch.manual_seed(0)
    info = get_source("shapes").info
    bundle = ModelBundle(build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu"))
    x = torch.rand(3, *info.input_shape)
    ours = stability(bundle, x, "saliency", targets=[0, 1, 2], samples=4, seed=5)
    captums = sensitivity_max_score(bundle, x, "saliency", targets=[0, 1, 2], n_perturb_samples=4, seed=5)
    np.testing.assert_allclose(ours.max_sensitivity, captums, rtol=1e-4)
    assert np.all(ours.lipschitz > 0)
    with pytest.raises(ExplainError, match="samples"):
        stability(bundle, x, "saliency", samples=0)
