"""Superpixels on tiny images, the grid fallback, and the fills for hidden regions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.explainers.params import ExplainError
from xaidash.explainers.segmentation import METHODS, fill, grid, segment, segment_means, superpixels


def noise_and_shape(n: int, h: int, w: int, c: int, seed: int = 0) -> np.ndarray:
    """(n, h, w, c) in [0, 1]: low noise with a bright square in the middle."""
    rng = np.random.default_rng(seed)
    a = rng.random((n, h, w, c)) * 0.3
    a[:, h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] += 0.6
    return np.clip(a, 0, 1)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape", [(28, 28, 1), (32, 32, 3)], ids=["grey28", "colour32"])
def test_enough_segments_on_tiny_images(method: str, shape: tuple[int, int, int]) -> None:
    images = noise_and_shape(3, *shape)
    seg = segment(images, method, 30)
    assert seg.masks.shape == (3, shape[0], shape[1])
    assert seg.masks.dtype == np.int64
    for mask, k in zip(seg.masks, seg.counts, strict=True):
        assert k >= 8
        # labels are contiguous 0..K-1, as captum's feature masks and lime's features need
        assert np.array_equal(np.unique(mask), np.arange(k))
    assert not any(seg.grid_fallback), f"{method} needed the grid on a textured {shape} image"


@pytest.mark.parametrize("method", METHODS)
def test_segment_count_follows_the_target(method: str) -> None:
    images = noise_and_shape(2, 32, 32, 3, seed=1)
    few = np.mean(segment(images, method, 10).counts)
    many = np.mean(segment(images, method, 60).counts)
    assert many > few


def test_torch_channels_first_matches_numpy_channels_last() -> None:
    images = noise_and_shape(2, 28, 28, 1)
    from_numpy = superpixels(images, "slic", 20)
    from_torch = superpixels(torch.as_tensor(images).permute(0, 3, 1, 2).float(), "slic", 20)
    assert np.array_equal(from_numpy, from_torch)


def test_flat_image_falls_back_to_a_grid_and_records_it() -> None:
    seg = segment(np.zeros((1, 28, 28)), "felzenszwalb", 20)  # one flat region: felzenszwalb finds a single segment
    assert seg.grid_fallback == [True]
    assert seg.counts[0] >= 8
    assert np.array_equal(seg.masks[0], grid(28, 28, 20))


def test_grid_has_about_the_asked_cells() -> None:
    g = grid(28, 28, 30)
    assert 25 <= g.max() + 1 <= 36
    assert np.array_equal(np.unique(g), np.arange(g.max() + 1))


def test_bad_input_is_refused() -> None:
    with pytest.raises(ExplainError, match="segmentation"):
        segment(noise_and_shape(1, 28, 28, 1), "watershed", 20)
    with pytest.raises(ExplainError, match="channels"):
        segment(np.zeros((1, 28, 28, 2)), "slic", 20)
    with pytest.raises(ExplainError, match="at least 2"):
        segment(noise_and_shape(1, 28, 28, 1), "slic", 1)


def test_segment_means_keep_each_superpixel_mean() -> None:
    images = torch.rand(2, 3, 16, 16)
    masks = torch.as_tensor(superpixels(images, "slic", 12))
    painted = segment_means(images, masks)
    for i in range(2):
        for k in masks[i].unique():
            region = masks[i] == k
            got = painted[i][:, region]
            assert torch.allclose(got, images[i][:, region].mean(1, keepdim=True).expand_as(got), atol=1e-6)


def test_fills() -> None:
    images = torch.rand(2, 1, 28, 28)
    assert torch.equal(fill(images, "zero"), torch.zeros_like(images))
    mean = fill(images, "mean")
    assert torch.allclose(mean[:, :, 0, 0], images.mean((2, 3)))
    blurred = fill(images, "blur")
    assert blurred.shape == images.shape
    assert blurred.std() < images.std()  # blurring smooths the noise
    with pytest.raises(ExplainError, match="fill"):
        fill(images, "noise")
