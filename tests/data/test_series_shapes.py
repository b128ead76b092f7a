"""The generated series sets: format, balance, determinism, and windows that hold the pattern (all of its energy,
none outside), on the channel it was put in; the class can be read off the pattern in the window and not off
the series' sum (a bump and a dip are not told apart by the level)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.data.modalities.series import SERIES, channel_stats
from xaidash.data.registry import get_info, get_source, load_split
from xaidash.data.sets import series_shapes

NAMES = {"series_shapes": 1, "series_shapes_mv": 3}


@pytest.mark.parametrize(("name", "channels"), NAMES.items())
def test_info_and_split_format(name: str, channels: int) -> None:
    info = get_info(name)
    assert info.modality == "series" and info.builtin and info.has_rationales
    assert info.classes == ("bump", "dip", "burst") and info.input_shape == (channels, 128)
    assert len(info.channel_names) == len(info.mean) == len(info.std) == channels
    for split, n in (("train", 900), ("test", 300)):
        data = load_split(name, split)
        assert data.series.shape == (n, channels, 128) and data.series.dtype == torch.float32
        assert data.labels.dtype == torch.int64 and torch.bincount(data.labels).tolist() == [n // 3] * 3
        assert data.windows is not None and len(data.windows) == n and data.lengths is None
        for window in data.windows:
            assert 16 <= len(window) <= 24 and window == list(range(window[0], window[0] + len(window)))
            assert window[0] >= 0 and window[-1] < 128
    assert get_source(name).is_available(series_shapes.Path("/nonexistent"))


@pytest.mark.parametrize("name", NAMES)
def test_channel_stats_are_the_training_splits(name: str) -> None:
    mean, std = channel_stats(load_split(name, "train").series)
    assert get_info(name).mean == tuple(mean) and get_info(name).std == tuple(std)


@pytest.mark.parametrize("channels", [1, 3])
def test_windows_hold_the_pattern_and_its_energy(channels: int) -> None:
    drawn = series_shapes.draw(300, 5, channels)
    np.testing.assert_allclose(drawn.series, drawn.background + drawn.patterns, atol=1e-5)
    ratios = []
    for i, window in enumerate(drawn.windows):
        pattern = drawn.patterns[i]
        inside = np.zeros(128, dtype=bool)
        inside[window] = True
        assert (pattern[:, ~inside] == 0).all()  # nothing of the pattern outside its window
        others = [c for c in range(channels) if c != drawn.channels[i]]
        assert (pattern[others] == 0).all()  # and nothing on the other channels
        assert (np.abs(pattern[drawn.channels[i], inside]) > 0).all()  # every step of the window carries it
        background = drawn.background[i, drawn.channels[i]]
        ratios.append(
            (pattern[drawn.channels[i], inside] ** 2).sum() / ((background[inside] - background.mean()) ** 2).sum()
        )
    # The pattern stands out of the background in its window, in most series clearly; in a few it is faint
    # (a short, low burst on a wandering walk): the set is not trivial. Measured: median 5.5, 99% above 1.
    assert np.median(ratios) > 4.0 and np.mean(np.asarray(ratios) > 1.0) > 0.95


def test_the_pattern_sets_the_class() -> None:
    drawn = series_shapes.draw(300, 6)
    for i, window in enumerate(drawn.windows):
        values = drawn.patterns[i, 0, window]
        name = series_shapes.CLASSES[drawn.labels[i]]
        if name == "bump":
            assert values.min() > 0 and values.max() >= 1.2 * 0.95
        elif name == "dip":
            assert values.max() < 0 and values.min() <= -1.2 * 0.95
        else:  # a burst: both signs, several crossings, little mean
            crossings = int((np.diff(np.sign(values)) != 0).sum())
            assert crossings >= 4 and abs(values.mean()) < 0.3 * np.abs(values).max()


def test_multivariate_pattern_channels_are_spread() -> None:
    drawn = series_shapes.draw(900, 7, 3)
    counts = np.bincount(drawn.channels, minlength=3)
    assert counts.min() > 250  # each channel holds about a third of the patterns


def test_level_does_not_give_the_class_away() -> None:
    """A linear model of the whole series (or its sum) stays near chance: the class is in the window's shape."""
    from sklearn.linear_model import LogisticRegression

    train, test = series_shapes.draw(900, 8), series_shapes.draw(300, 9)
    sums = lambda d: d.series.sum(axis=-1)  # noqa: E731
    score = LogisticRegression(max_iter=2000).fit(sums(train), train.labels).score(sums(test), test.labels)
    assert score < 0.5


def test_deterministic_and_splits_differ() -> None:
    a, b = series_shapes.draw(100, 11, 3), series_shapes.draw(100, 11, 3)
    assert a.series.tobytes() == b.series.tobytes() and a.windows == b.windows
    assert (a.labels == b.labels).all() and (a.channels == b.channels).all()
    train, test = load_split("series_shapes", "train"), load_split("series_shapes", "test")
    assert not torch.equal(train.series[:300], test.series)
    again = load_split("series_shapes", "train")
    assert torch.equal(train.series, again.series) and train.windows == again.windows


def test_loaded_tensors_are_copies() -> None:
    load_split("series_shapes_mv", "train").series.zero_()
    assert load_split("series_shapes_mv", "train").series.abs().sum() > 0


def test_windows_reach_the_adapter_as_ground_truth() -> None:
    data = load_split("series_shapes", "test")
    truth = SERIES.ground_truth(data, [3, 7])
    assert truth.rationales == [data.windows[3], data.windows[7]]
