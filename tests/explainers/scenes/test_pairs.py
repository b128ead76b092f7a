"""Two scene models' targets for the same objects (Side by side): each detector's own box of a true object (same
class, IoU >= 0.5) or none; A's boxes as the objects of an image without truth; one region, the same pixels, for
both segmenters."""

from __future__ import annotations

import pytest
import torch

from xaidash.data.scenes.types import SceneTarget
from xaidash.explainers.scenes.pairs import paired_targets
from xaidash.explainers.scenes.targets import RegionTarget
from xaidash.models.scenes.predictions import Detections, Segmentation

CLASSES = ("circle", "square", "triangle", "cross")


def detections(*rows: tuple[tuple[float, float, float, float], int, float]) -> Detections:
    boxes = torch.tensor([list(b) for b, _, _ in rows], dtype=torch.float32).reshape(-1, 4)
    return Detections(
        boxes, torch.tensor([c for _, c, _ in rows], dtype=torch.int64), torch.tensor([s for *_, s in rows])
    )


TRUTH = SceneTarget(torch.tensor([[10.0, 10, 40, 40], [50, 50, 80, 80]]), torch.tensor([1, 2]))


def test_each_detector_explains_its_own_box_of_each_true_object() -> None:
    a = detections(((11, 9, 41, 40), 1, 0.9), ((50, 50, 80, 80), 2, 0.8))
    b = detections(((12, 12, 40, 40), 1, 0.7), ((50, 50, 80, 80), 3, 0.9), ((48, 52, 79, 80), 2, 0.3))
    pairs = paired_targets(a, b, TRUTH, CLASSES)
    assert [p.name for p in pairs] == ["true object 1: circle", "true object 2: square"]
    assert pairs[0].a is not None and pairs[0].a.box == (11, 9, 41, 40) and pairs[0].a.index == 0
    assert pairs[0].b is not None and pairs[0].b.box == (12, 12, 40, 40)
    # B's square box scores under 0.5 and its box there is a triangle: B has no box of object 2
    assert pairs[1].a is not None and pairs[1].b is None
    assert paired_targets(a, b, TRUTH, CLASSES, min_score=0.2)[1].b is not None


def test_a_box_overlapping_too_little_is_not_the_objects() -> None:
    a = detections(((25, 25, 55, 55), 1, 0.9))  # IoU with object 1 is 225 / 1575 < 0.5
    (first, _) = paired_targets(a, a, TRUTH, CLASSES)
    assert first.a is None and first.b is None


def test_without_truth_model_as_boxes_are_the_objects() -> None:
    a = detections(((10, 10, 40, 40), 1, 0.9))
    b = detections(((11, 11, 40, 40), 1, 0.6), ((60, 0, 90, 30), 4, 0.9))
    (only,) = paired_targets(a, b, None, CLASSES)
    assert only.name == "A's box 1: circle"
    assert only.a is not None and only.a.box == (10, 10, 40, 40)
    assert only.b is not None and only.b.box == (11, 11, 40, 40)


def test_both_segmenters_explain_the_same_region() -> None:
    logits_a = torch.zeros(5, 96, 96)
    logits_a[1, 10:40, 10:40] = 5  # A paints a circle where the truth has one
    logits_b = torch.zeros(5, 96, 96)
    logits_b[1, 20:50, 20:50] = 5  # B paints it elsewhere, and a cross too
    logits_b[4, 0:5, 0:5] = 5
    a, b = Segmentation.from_logits(logits_a), Segmentation.from_logits(logits_b)
    masks = torch.zeros(2, 96, 96, dtype=torch.bool)
    masks[0, 10:40, 10:40] = True
    masks[1, 50:80, 50:80] = True
    truth = SceneTarget(TRUTH.boxes, TRUTH.labels, masks)
    pairs = paired_targets(a, b, truth, CLASSES)
    assert [p.name for p in pairs] == ["circle, its true pixels", "square, its true pixels"]
    for p in pairs:
        assert isinstance(p.a, RegionTarget) and p.a is p.b
    assert torch.equal(pairs[0].a.mask, masks[0])
    union = paired_targets(a, b, None, CLASSES)
    assert [p.name for p in union] == ["circle, where either model paints it", "cross, where either model paints it"]
    assert int(union[0].a.mask.sum()) == 900 + 900 - 400


def test_a_detector_beside_a_segmenter_is_refused() -> None:
    with pytest.raises(ValueError, match="two detectors or two segmenters"):
        paired_targets(detections(), Segmentation.from_logits(torch.zeros(5, 8, 8)), None, CLASSES)
