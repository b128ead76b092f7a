"""Two scene models on one scene (Side by side): the same object as each model's own target, so their maps answer
the same question. Detectors' boxes differ, so an object is anchored first (a true object on a test scene, model A's
box on an image of one's own) and each model explains its own box of the object's class that overlaps the anchor
most (IoU >= 0.5), or says it found none. A region is the same pixels for both models (the class's true pixels on a
test scene, else where either model paints the class), so both maps explain the same summed logits."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torchvision.ops import box_iou

from xaidash.data.scenes.types import SceneTarget
from xaidash.explainers.scenes.api import DEFAULT_MIN_SCORE, detection_targets
from xaidash.explainers.scenes.metrics import MATCH_IOU
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget, class_name
from xaidash.models.scenes.predictions import Detections, ScenePrediction, Segmentation


@dataclass(frozen=True)
class PairedTarget:
    """One object as both models see it: what it is (`name`), and model A's and model B's target for it (None when
    that model did not find it)."""

    name: str
    a: BoxTarget | RegionTarget | None
    b: BoxTarget | RegionTarget | None


def paired_targets(
    a: ScenePrediction,
    b: ScenePrediction,
    truth: SceneTarget | None,
    classes: tuple[str, ...],
    min_score: float = DEFAULT_MIN_SCORE,
) -> list[PairedTarget]:
    """The objects of a scene, each with the two models' targets: boxes for detectors, regions for segmenters.
    ValueError when one prediction is a detector's and the other a segmenter's."""
    if isinstance(a, Detections) and isinstance(b, Detections):
        return _paired_boxes(a, b, truth, classes, min_score)
    if isinstance(a, Segmentation) and isinstance(b, Segmentation):
        return _paired_regions(a, b, truth, classes)
    raise ValueError("Side by side needs two detectors or two segmenters.")


def _anchors(a: Detections, truth: SceneTarget | None, min_score: float) -> list[tuple[tuple[float, ...], int, str]]:
    """(box, label, what it is) per object: the true objects, else model A's boxes."""
    if truth is not None:
        return [(tuple(float(v) for v in truth.boxes[i]), int(truth.labels[i]), f"true object {i + 1}")
                for i in range(len(truth))]  # fmt: skip
    return [(t.box, t.label, f"A's box {k + 1}") for k, t in enumerate(detection_targets(a, min_score))]


def _own_box(prediction: Detections, box: tuple[float, ...], label: int, min_score: float) -> BoxTarget | None:
    """The model's box of class `label` (score >= min_score) overlapping `box` most, when by IoU >= 0.5."""
    found = [t for t in detection_targets(prediction, min_score) if t.label == label]
    if not found:
        return None
    ious = box_iou(torch.tensor([box], dtype=torch.float32), torch.tensor([t.box for t in found]))[0]
    best = int(ious.argmax())
    return found[best] if float(ious[best]) >= MATCH_IOU else None


def _paired_boxes(
    a: Detections, b: Detections, truth: SceneTarget | None, classes: tuple[str, ...], min_score: float
) -> list[PairedTarget]:
    out = []
    for box, label, what in _anchors(a, truth, min_score):
        name = f"{what}: {class_name(classes, label)}"
        out.append(PairedTarget(name, _own_box(a, box, label, min_score), _own_box(b, box, label, min_score)))
    return out


def _paired_regions(
    a: Segmentation, b: Segmentation, truth: SceneTarget | None, classes: tuple[str, ...]
) -> list[PairedTarget]:
    h, w = a.mask.shape
    if truth is not None:
        semantic = truth.semantic(h, w)
        labels = sorted({int(v) for v in truth.labels})
        regions = [(label, semantic == label, "its true pixels") for label in labels]
    else:
        labels = sorted(set(a.classes_present()) | set(b.classes_present()))
        regions = [(label, a.region(label) | b.region(label), "where either model paints it") for label in labels]
    out = []
    for label, mask, words in regions:
        if not bool(mask.any()):
            continue
        target = RegionTarget(label, mask, words)
        out.append(PairedTarget(f"{class_name(classes, label)}, {words}", target, target))
    return out
