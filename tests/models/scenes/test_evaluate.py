"""Scene metrics: mAP through torchmetrics, mIoU from the confusion matrix, checked on cases worked out by hand."""

from __future__ import annotations

import pytest
import torch

from xaidash.data.scenes.types import SceneTarget
from xaidash.models.scenes.evaluate import detection_metrics, segmentation_metrics
from xaidash.models.scenes.predictions import Detections, Segmentation

CLASSES = ("circle", "square")


def _truth() -> list[SceneTarget]:
    return [
        SceneTarget(torch.tensor([[10.0, 10.0, 30.0, 30.0], [50.0, 50.0, 80.0, 70.0]]), torch.tensor([1, 2])),
        SceneTarget(torch.tensor([[5.0, 5.0, 25.0, 45.0]]), torch.tensor([1])),
    ]


def test_perfect_detections_score_one_and_a_miss_does_not() -> None:
    truth = _truth()
    perfect = [Detections(t.boxes, t.labels, torch.full((len(t),), 0.9)) for t in truth]
    m = detection_metrics(perfect, truth, CLASSES)
    assert m["map"] == pytest.approx(1.0) and m["map_50"] == pytest.approx(1.0)
    assert m["ap/circle"] == pytest.approx(1.0) and m["ap/square"] == pytest.approx(1.0)
    wrong_class = [Detections(truth[0].boxes, torch.tensor([1, 1]), torch.tensor([0.9, 0.95])), perfect[1]]
    m = detection_metrics(wrong_class, truth, CLASSES)
    assert m["ap/square"] == pytest.approx(0.0) and m["ap/circle"] < 1.0  # a false circle ranks above the true ones
    shifted = [Detections(t.boxes + 8, t.labels, torch.full((len(t),), 0.9)) for t in truth]
    assert detection_metrics(shifted, truth, CLASSES)["map_75"] < 1.0


def test_miou_from_a_hand_counted_confusion() -> None:
    truth = torch.tensor([[0, 0, 1, 1], [0, 0, 1, 1]])
    predicted = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 2]])
    logits = torch.nn.functional.one_hot(predicted, 3).permute(2, 0, 1).float()
    m = segmentation_metrics([Segmentation.from_logits(logits)], [truth], CLASSES)
    # background: TP 3, FP 0, FN 1 -> 3/4; circle: TP 3, FP 1, FN 1 -> 3/5; square: no truth, 1 FP -> 0/1
    assert m["iou/background"] == pytest.approx(0.75)
    assert m["iou/circle"] == pytest.approx(0.6)
    assert m["iou/square"] == pytest.approx(0.0)
    assert m["miou"] == pytest.approx((0.75 + 0.6 + 0.0) / 3)
    assert m["miou_objects"] == pytest.approx(0.3)
    assert m["pixel_accuracy"] == pytest.approx(6 / 8)
    # a class nowhere in truth or prediction has no IoU and stays out of the means
    m = segmentation_metrics(
        [Segmentation.from_logits(torch.nn.functional.one_hot(truth, 3).permute(2, 0, 1).float())], [truth], CLASSES
    )
    assert "iou/square" not in m and m["miou"] == pytest.approx(1.0)
