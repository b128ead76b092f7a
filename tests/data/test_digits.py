"""scikit-learn's digits: stratified deterministic split, [0, 1] pixels, constants that match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from xaidash.data.registry import get_info, get_source, load_split
from xaidash.data.sets._common import channel_stats


def test_info():
    info = get_info("digits")
    assert info.input_shape == (1, 8, 8) and info.classes == tuple("0123456789")
    assert info.builtin and info.modality == "image"
    assert get_source("digits").is_available(Path("/nowhere"))


def test_splits():
    train, test = load_split("digits", "train"), load_split("digits", "test")
    assert (len(train), len(test)) == (1437, 360)
    for split in (train, test):
        assert split.images.dtype == torch.float32 and split.images.shape[1:] == (1, 8, 8)
        assert split.labels.dtype == torch.int64
        assert split.images.min() >= 0.0 and split.images.max() == 1.0
        assert set(split.labels.tolist()) == set(range(10))
    # Stratified: every class holds about a fifth of its images in test.
    ratio = torch.bincount(test.labels, minlength=10) / (
        torch.bincount(train.labels, minlength=10) + torch.bincount(test.labels, minlength=10)
    )
    assert ratio.min() > 0.18 and ratio.max() < 0.22
    # Disjoint: no test image is also a train image.
    train_rows = {row.numpy().tobytes() for row in train.images}
    assert sum(row.numpy().tobytes() in train_rows for row in test.images) < 5  # the raw set has a few duplicates


def test_deterministic_and_constants():
    a, b = load_split("digits", "train"), load_split("digits", "train")
    assert a.images.numpy().tobytes() == b.images.numpy().tobytes()
    assert torch.equal(a.labels, b.labels)
    mean, std = channel_stats(a.images.numpy())
    np.testing.assert_allclose(mean, get_info("digits").mean, atol=1e-3)
    np.testing.assert_allclose(std, get_info("digits").std, atol=1e-3)
