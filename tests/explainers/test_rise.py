"""RISE (written here; no library has it): the map is the published expectation over the masks, computed
directly on a tiny model; it is seeded; and how the masked images are batched does not change it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from image_bundles import fresh_bundle

from xaidash.explainers import explain
from xaidash.explainers.methods.rise import draw_masks
from xaidash.explainers.params import ExplainError
from xaidash.models import ModelBundle


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    return fresh_bundle("simple_cnn")


def _images(bundle: ModelBundle, n: int) -> torch.Tensor:
    return torch.rand(n, *bundle.info.input_shape, generator=torch.Generator().manual_seed(4))


def test_masks_are_soft_shifted_grids_kept_with_probability_p() -> None:
    masks = draw_masks(400, 4, 0.3, (20, 24), seed=1)
    full = masks.masks(torch.arange(400))
    assert full.shape == (400, 20, 24)
    assert float(full.min()) >= 0 and float(full.max()) <= 1 + 1e-6
    assert abs(float(masks.grids.mean()) - 0.3) < 0.05
    assert (masks.shifts[:, 0] < masks.cell[0]).all() and (masks.shifts[:, 1] < masks.cell[1]).all()
    assert len(torch.unique(masks.shifts, dim=0)) > 1  # the crops move
    # any chunk of masks is the same as built all at once (the map is accumulated chunk by chunk)
    torch.testing.assert_close(masks.masks(torch.arange(100, 180)), full[100:180])


def test_map_is_the_expectation_over_the_masks(bundle: ModelBundle) -> None:
    """saliency = sum_i p_target(x * M_i) M_i / (N p) minus the mean p_target over the masks, with the masks drawn
    from the same seed, computed one masked image at a time."""
    raw, targets, count, grid, p = _images(bundle, 2), [3, 7], 48, 5, 0.4
    e = explain(bundle, raw, targets, "rise", seed=11, samples=count, grid=grid, p=p)
    masks = draw_masks(count, grid, p, tuple(bundle.info.input_shape[1:]), seed=11).masks(torch.arange(count))
    x = bundle.prepare(raw)
    for i, t in enumerate(targets):
        want, total = torch.zeros(masks.shape[1:]), 0.0
        with torch.no_grad():
            for m in masks:
                prob = torch.softmax(bundle.model(x[i : i + 1] * m), dim=1)[0, t]
                want += prob * m
                total += float(prob)
        np.testing.assert_allclose(e.item(i), (want / (count * p) - total / count).numpy(), rtol=1e-4, atol=1e-6)


def test_seeded_and_batch_invariant(bundle: ModelBundle) -> None:
    raw = _images(bundle, 3)
    params = {"samples": 40, "grid": 4}
    a = explain(bundle, raw, [0, 1, 2], "rise", seed=5, batch_size=64, **params)
    again = explain(bundle, raw, [0, 1, 2], "rise", seed=5, batch_size=64, **params)
    small = explain(bundle, raw, [0, 1, 2], "rise", seed=5, batch_size=7, **params)  # passes of 7 rows
    other = explain(bundle, raw, [0, 1, 2], "rise", seed=6, batch_size=64, **params)
    np.testing.assert_array_equal(a.attributions, again.attributions)
    np.testing.assert_allclose(small.attributions, a.attributions, rtol=1e-5, atol=1e-7)
    assert small.diagnostics["batch_size"][0] == 7
    assert not np.allclose(other.attributions, a.attributions)


def test_noise_falls_with_the_number_of_masks(bundle: ModelBundle) -> None:
    """The spread between seeds shrinks about as 1/sqrt(N) (the param's help promises it)."""
    raw = _images(bundle, 1)

    def spread(n: int) -> float:
        maps = np.stack([explain(bundle, raw, [0], "rise", seed=s, samples=n).item(0) for s in range(4)])
        return float(maps.std(0).mean())

    few, many = spread(25), spread(400)
    assert 2.0 < few / many < 8.0, (few, many)  # 1/sqrt(N) predicts 4


def test_a_grid_finer_than_the_image_is_refused(bundle: ModelBundle) -> None:
    with pytest.raises(ExplainError, match="finer than the 28x28 image"):
        explain(bundle, _images(bundle, 1), [0], "rise", samples=4, grid=40)
