"""shapes_colour: the colour cue holds exactly (every circle red, no other shape red), the rest is shapes'."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.color import rgb2hsv

from xaidash.data.registry import get_info, load_split
from xaidash.data.sets import shapes_colour
from xaidash.data.sets._common import channel_stats


def _red_distance(images: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Each image's median distance of its shape pixels' hue from red (hue 0 = 1), 0..0.5."""
    hue = rgb2hsv(images.transpose(0, 2, 3, 1))[..., 0]
    distance = np.minimum(hue, 1.0 - hue)
    return np.array([np.median(d[m]) for d, m in zip(distance, masks, strict=True)])


def test_info_and_splits():
    info = get_info("shapes_colour")
    assert info.classes == get_info("shapes").classes and info.input_shape == (3, 32, 32) and info.has_masks
    test = load_split("shapes_colour", "test")
    assert len(test) == 1000 and test.images.shape == (1000, 3, 32, 32)


def test_every_circle_is_red_and_no_other_shape_is():
    images, labels, masks = shapes_colour.generate(400, 11)
    distance = _red_distance(images, masks)
    cued = labels == shapes_colour.CUED_CLASS
    assert distance[cued].max() < 0.08, distance[cued].max()  # the red band plus a little pixel noise
    assert distance[~cued].min() > 0.1, distance[~cued].min()


def test_forced_hue_draws_red_shapes_of_other_classes():
    images, labels, masks = shapes_colour.generate(60, 3, hue=0.0, classes=(1, 2, 3))
    assert set(labels.tolist()) == {1, 2, 3}
    assert _red_distance(images, masks).max() < 0.03


def test_deterministic():
    a = shapes_colour.generate(50, 1)[0]
    assert a.tobytes() == shapes_colour.generate(50, 1)[0].tobytes()
    assert a.tobytes() != shapes_colour.generate(50, 2)[0].tobytes()


@pytest.mark.slow
def test_stats_constants_match_the_train_split():
    mean, std = channel_stats(load_split("shapes_colour", "train").images.numpy())
    np.testing.assert_allclose(mean, shapes_colour.MEAN, atol=1e-3)
    np.testing.assert_allclose(std, shapes_colour.STD, atol=1e-3)
