"""The scene metrics on hand-computed cases: maps peaked inside, beside and between objects, the pointing game's
tolerance, energy and off-object shares with known values, the true object a box explains, deletion and insertion
curves of a scripted segmenter, and the one-line reasons a metric could not be scored."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scene_toys import BrightnessDetector, RegionSegmenter, ToyBundle

from xaidash.data.errors import ExplainError
from xaidash.data.scenes.types import SceneTarget
from xaidash.explainers.scenes.metrics import (
    POINTING_TOLERANCE,
    SCENE_METRICS,
    curve_auc,
    object_masks,
    score_curves,
    score_map,
    truth_metrics,
    truth_object,
)
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget


def _scene() -> SceneTarget:
    """Two squares of class 1 and one of class 2 on a 32x32 image (the second class-1 square partly hidden by the
    class-2 one)."""
    masks = torch.zeros(3, 32, 32, dtype=torch.bool)
    masks[0, 2:10, 2:10] = True  # class 1, 64 px
    masks[1, 20:28, 20:28] = True  # class 1
    masks[2, 16:24, 16:24] = True  # class 2, drawn last
    masks[1, 16:24, 16:24] = False
    boxes = torch.tensor([[2, 2, 10, 10], [20, 20, 28, 28], [16, 16, 24, 24]], dtype=torch.float32)
    return SceneTarget(boxes, torch.tensor([1, 1, 2]), masks)


def _peak(y: int, x: int, size: int = 32) -> torch.Tensor:
    m = torch.zeros(size, size)
    m[y, x] = 1.0
    return m


def test_truth_object_is_the_best_overlap_of_the_same_class() -> None:
    truth = _scene()
    assert truth_object(BoxTarget((2.0, 2.0, 10.0, 10.0), 1), truth) == 0
    assert truth_object(BoxTarget((19.0, 19.0, 28.0, 28.0), 1), truth) == 1
    assert truth_object(BoxTarget((16.0, 16.0, 24.0, 24.0), 1), truth) is None  # class 2 there; class 1 IoU < 0.5
    assert truth_object(BoxTarget((16.0, 16.0, 24.0, 24.0), 2), truth) == 2
    assert truth_object(BoxTarget((2.0, 2.0, 10.0, 10.0), 4), truth) is None


def test_a_map_peaked_inside_the_object_scores_1_and_beside_it_0() -> None:
    truth = _scene()
    own, others = object_masks(BoxTarget((2.0, 2.0, 10.0, 10.0), 1), truth, (32, 32))
    assert int(own.sum()) == 64 and bool(others[20, 20]) and not bool(others[5, 5])
    inside = truth_metrics(_peak(5, 5), own, others)
    assert inside == {"pointing_game": 1.0, "energy": 1.0, "off_object": 0.0}
    on_neighbour = truth_metrics(_peak(18, 18), own, others)
    assert on_neighbour == {"pointing_game": 0.0, "energy": 0.0, "off_object": 1.0}
    # Tolerance: a peak POINTING_TOLERANCE px off the edge (row 11, the mask ends at row 9) counts; one more does not.
    assert truth_metrics(_peak(9 + POINTING_TOLERANCE, 5), own, others)["pointing_game"] == 1.0
    assert truth_metrics(_peak(10 + POINTING_TOLERANCE, 5), own, others)["pointing_game"] == 0.0


def test_energy_and_off_object_shares_by_hand() -> None:
    truth = _scene()
    own, others = object_masks(BoxTarget((16.0, 16.0, 24.0, 24.0), 2), truth, (32, 32))
    amap = torch.zeros(32, 32)
    amap[16, 16] = 3.0  # on the object
    amap[25, 25] = 1.0  # on the hidden class-1 square
    amap[0, 31] = 4.0  # background
    amap[1, 1] = -5.0  # negative: not counted
    got = truth_metrics(amap, own, others)
    assert got["energy"] == pytest.approx(3 / 8) and got["off_object"] == pytest.approx(1 / 8)
    assert got["pointing_game"] == 0.0
    # Tied maxima share the hit: a constant map scores the (grown) object's share of the image, not a free hit.
    flat = truth_metrics(torch.ones(32, 32), own, others)
    assert 64 / 1024 < flat["pointing_game"] < 1.0


def test_a_region_is_scored_against_the_class_semantic_mask() -> None:
    truth = _scene()
    region = RegionTarget(1, torch.ones(32, 32, dtype=torch.bool))
    own, others = object_masks(region, truth, (32, 32))
    assert int(own.sum()) == 64 + 64 - 16  # both class-1 squares' visible pixels
    assert torch.equal(others, truth.semantic(32, 32) == 2)
    with pytest.raises(ExplainError, match="no true object of this class"):
        object_masks(RegionTarget(3, region.mask), truth, (32, 32))
    with pytest.raises(ExplainError, match="false detection"):
        object_masks(BoxTarget((0.0, 20.0, 8.0, 30.0), 1), truth, (32, 32))


def test_deletion_and_insertion_curves_by_hand() -> None:
    # The score is 4 x 64 px x the mean brightness of the top-left 4x4 patch of an 8x8 white image.
    model = RegionSegmenter(source=(0, 4, 0, 4))
    image = torch.ones(3, 8, 8)
    region = RegionTarget(1, torch.ones(8, 8, dtype=torch.bool))
    good = torch.zeros(8, 8)
    good[:4, :4] = 1.0  # exactly the patch: the first of 4 chunks (16 px each) deletes it all
    deletion, insertion, base = score_curves(model, image, region, good, steps=4)
    assert base == pytest.approx(4 * 64)
    assert deletion.tolist() == pytest.approx([1, 0, 0, 0, 0])
    assert curve_auc(deletion) == pytest.approx(0.125)
    assert insertion[1:].tolist() == pytest.approx([1, 1, 1, 1])  # once the patch is back, the score is whole
    bad = 1.0 - good  # the patch last
    deletion_bad, insertion_bad, _ = score_curves(model, image, region, bad, steps=4)
    assert deletion_bad.tolist() == pytest.approx([1, 1, 1, 1, 0])
    assert curve_auc(insertion_bad) < curve_auc(insertion)


def test_score_map_gives_values_and_one_line_reasons() -> None:
    truth = _scene()
    bundle = ToyBundle(BrightnessDetector(box=(2.0, 2.0, 10.0, 10.0), source=(2, 10, 2, 10)))
    image = torch.full((3, 32, 32), 0.8)
    box = BoxTarget((2.0, 2.0, 10.0, 10.0), 1, 0)
    values, errors = score_map(bundle, image, box, _peak(5, 5), truth, steps=8)
    assert errors == {}
    assert set(values) == {m.id for m in SCENE_METRICS}
    assert values["pointing_game"] == 1.0 and values["energy"] == 1.0
    assert 0 <= values["deletion"] < values["insertion"] <= 1.2
    values, errors = score_map(bundle, image, box, np.zeros((32, 32), np.float32), None, curves=False)
    assert values == {} and errors["energy"] == "No ground truth for this image."
    values, errors = score_map(bundle, image, box, torch.zeros(32, 32), truth, curves=False)
    # Every pixel ties for the maximum: the hit is the grown object's share, 12 x 12 less 3 px per corner (disk(2)).
    assert values["pointing_game"] == pytest.approx(132 / 1024)
    assert errors == {"energy": "The map has no positive values.", "off_object": "The map has no positive values."}
    stray = BoxTarget((20.0, 0.0, 30.0, 8.0), 1)  # matches no true object, and no detection
    values, errors = score_map(bundle, image, stray, _peak(5, 5), truth)
    assert values == {}
    assert "false detection" in errors["pointing_game"] and "not positive" in errors["deletion"]


def test_the_metric_facts() -> None:
    ids = [m.id for m in SCENE_METRICS]
    assert ids == ["pointing_game", "energy", "off_object", "deletion", "insertion"]
    assert SCENE_METRICS.get("off_object").lower_is_better and not SCENE_METRICS.get("energy").lower_is_better
    with pytest.raises(ExplainError, match="Unknown scene metric"):
        SCENE_METRICS.get("nope")
