"""ROAD's noisy linear imputation (a removed pixel becomes its neighbours' weighted mean) against hand-worked
images and Quantus's `noisy_linear_imputation`, and the ROAD curves on a small model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.data.registry import get_source
from xaidash.explainers.metrics.road import ROAD_MAX_FRACTION, noisy_linear_imputation, road_curve
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec


def test_a_removed_pixel_of_a_constant_image_gets_its_neighbours_mean() -> None:
    images = np.full((2, 3, 9, 9), 0.25)
    images[1] = np.array([0.1, 0.5, 0.9])[:, None, None]  # constant per channel
    removed = np.zeros((2, 9, 9), dtype=bool)
    removed[:, 4, 4] = True
    removed[1, 0, 0] = True  # a corner: only three neighbours, the mean is reweighted
    out = noisy_linear_imputation(images, removed, noise=0.0)
    np.testing.assert_allclose(out, images, atol=1e-5)


def test_a_patch_on_a_linear_ramp_is_filled_by_the_ramp() -> None:
    """The 8-neighbour weighted mean of a linear function is its value, so a removed 3x3 patch (unknown
    neighbours solved jointly) comes back exactly; the kept pixels are untouched."""
    ramp = np.add.outer(np.arange(10.0), 2 * np.arange(10.0)) / 30
    images = ramp[None, None].repeat(2, axis=1)
    removed = np.zeros((1, 10, 10), dtype=bool)
    removed[0, 3:6, 4:7] = True
    spoiled = images.copy()
    spoiled[:, :, removed[0]] = 7.0  # whatever was there is not read
    out = noisy_linear_imputation(spoiled, removed, noise=0.0)
    np.testing.assert_allclose(out, images, atol=1e-5)


def test_noise_is_added_only_to_removed_pixels() -> None:
    images = np.full((1, 1, 8, 8), 0.5)
    removed = np.zeros((1, 8, 8), dtype=bool)
    removed[0, 2:6, 2:6] = True
    out = noisy_linear_imputation(images, removed, noise=0.05, seed=3)
    assert np.array_equal(out[0, 0][~removed[0]], images[0, 0][~removed[0]])
    assert 0.02 < np.std(out[0, 0][removed[0]]) < 0.09


def test_equal_to_quantus_noisy_linear_imputation() -> None:
    perturb = pytest.importorskip("quantus.functions.perturb_func")
    rng = np.random.default_rng(0)
    images = rng.random((3, 3, 16, 16))
    removed = rng.random((3, 16, 16)) < 0.4
    ours = noisy_linear_imputation(images, removed, noise=0.0)
    for i in range(3):
        theirs = perturb.noisy_linear_imputation(images[i], np.flatnonzero(removed[i]), noise=0.0)
        np.testing.assert_allclose(ours[i], theirs, atol=1e-4)  # ours adds a 1e-6 pull to the image mean


def test_road_curves_on_a_small_model() -> None:
    torch.manual_seed(0)
    info = get_source("shapes").info
    bundle = ModelBundle(build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu"))
    x = torch.rand(3, *info.input_shape)
    maps = np.random.default_rng(0).normal(size=(3, *info.input_shape[1:])).astype(np.float32)
    morf = road_curve(bundle, x, maps, targets=[0, 1, 2], order="morf", steps=3, batch_size=5)
    lerf = road_curve(bundle, x, maps, targets=[0, 1, 2], order="lerf", steps=3)
    assert morf.curves.shape == (3, 4) and morf.fractions[-1] == pytest.approx(ROAD_MAX_FRACTION)
    np.testing.assert_allclose(morf.curves[:, 0], lerf.curves[:, 0], atol=1e-6)  # nothing removed yet
    assert np.all((morf.scores >= 0) & (morf.scores <= 1)) and np.all((lerf.scores >= 0) & (lerf.scores <= 1))
    # The score is the mean of the curve: the trapezoid area over its width.
    np.testing.assert_allclose(morf.scores, np.trapezoid(morf.curves, morf.fractions, axis=1) / ROAD_MAX_FRACTION)
    with pytest.raises(ExplainError, match="morf"):
        road_curve(bundle, x, maps, order="sideways")
