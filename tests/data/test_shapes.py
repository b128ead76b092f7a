"""The generated shapes data set: format, balance, determinism, and masks that match the pixels."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from xaidash.data.registry import get_info, get_source, load_split
from xaidash.data.sets import shapes
from xaidash.data.sets._common import channel_stats


@pytest.fixture(scope="module")
def train():
    return load_split("shapes", "train")


@pytest.fixture(scope="module")
def test_split():
    return load_split("shapes", "test")


def test_info():
    info = get_info("shapes")
    assert info.modality == "image"
    assert info.classes == ("circle", "square", "triangle", "cross")
    assert info.input_shape == (3, 32, 32)
    assert info.builtin and info.has_masks and not info.has_rationales
    assert len(info.mean) == len(info.std) == 3
    assert get_source("shapes").is_available(shapes.Path("/nonexistent"))


def test_split_format(train, test_split):
    for split, n in ((train, 6000), (test_split, 1000)):
        assert len(split) == n
        assert split.images.shape == (n, 3, 32, 32) and split.images.dtype == torch.float32
        assert split.labels.shape == (n,) and split.labels.dtype == torch.int64
        assert split.masks.shape == (n, 32, 32) and split.masks.dtype == torch.bool
        assert split.images.min() >= 0.0 and split.images.max() <= 1.0
        assert torch.bincount(split.labels, minlength=4).tolist() == [n // 4] * 4


def test_stats_constants_match_the_train_split(train):
    mean, std = channel_stats(train.images.numpy())
    np.testing.assert_allclose(mean, get_info("shapes").mean, atol=1e-3)
    np.testing.assert_allclose(std, get_info("shapes").std, atol=1e-3)


def test_deterministic_and_splits_differ():
    a = shapes.generate(200, shapes.SEEDS["train"])
    b = shapes.generate(200, shapes.SEEDS["train"])
    for x, y in zip(a, b, strict=True):
        assert x.tobytes() == y.tobytes()
    c = shapes.generate(200, shapes.SEEDS["test"])
    assert a[0].tobytes() != c[0].tobytes()


def test_loaded_tensors_are_copies(train):
    again = load_split("shapes", "train")
    again.images[0].zero_()
    assert load_split("shapes", "train").images[0].abs().sum() > 0


def test_generation_is_fast():
    shapes.generate(10, 0)  # imports skimage outside the timing
    start = time.perf_counter()
    shapes.generate(6000, 1)
    shapes.generate(1000, 2)
    assert time.perf_counter() - start < 5.0  # about 0.7 s here; the bound leaves room for a busy shared machine


def test_masks_cover_the_shape_pixels(train):
    images = train.images[:300].permute(0, 2, 3, 1).numpy()
    masks = train.masks[:300].numpy()
    sizes = masks.sum(axis=(1, 2))
    assert sizes.min() >= 25 and sizes.max() <= 0.35 * 32 * 32  # 9-16 px shapes: visible, not the whole image
    for img, mask in zip(images, masks, strict=True):
        inside, outside = img[mask], img[~mask]
        colour = inside.mean(axis=0)
        # The shape is one flat colour; the background is noise around other colours.
        assert inside.std(axis=0).max() < 0.05
        dist_in = np.linalg.norm(inside - colour, axis=1)
        dist_out = np.linalg.norm(outside - colour, axis=1)
        assert np.mean(dist_out > dist_in.max()) > 0.7


def test_mask_geometry_matches_class(train):
    masks = train.masks[:400].numpy()
    labels = train.labels[:400].numpy()
    for mask, label in zip(masks, labels, strict=True):
        ys, xs = np.nonzero(mask)
        box = (ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1)
        fill = mask.sum() / box
        name = shapes.CLASSES[label]
        if name == "square":
            assert fill == 1.0
        elif name == "circle":
            assert 0.62 < fill < 0.93
            assert not mask[ys.min(), xs.min()] and not mask[ys.max(), xs.max()]
        elif name == "triangle":
            assert 0.42 < fill < 0.72
            assert mask[ys.min()].sum() < mask[ys.max()].sum() / 3  # apex on top, base at the bottom
        else:  # cross: empty corners, and a middle row as wide as the bounding box
            assert fill < 0.68
            assert not mask[ys.min(), xs.min()] and not mask[ys.max(), xs.max()]
            assert mask.sum(axis=1).max() == xs.max() - xs.min() + 1


def test_colour_does_not_give_the_class_away(train):
    images = train.images.permute(0, 2, 3, 1).numpy()
    masks = train.masks.numpy()
    labels = train.labels.numpy()
    colours = np.stack([img[m].mean(axis=0) for img, m in zip(images, masks, strict=True)])
    per_class = np.stack([colours[labels == c].mean(axis=0) for c in range(4)])
    assert np.abs(per_class - colours.mean(axis=0)).max() < 0.04
