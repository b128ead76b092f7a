"""How good a scene model is on a split: mAP for a detector (torchmetrics' MeanAveragePrecision, COCO's definition
through pycocotools), mIoU and pixel accuracy for a segmenter (from torchmetrics' confusion matrix)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchmetrics.classification import MulticlassConfusionMatrix
from torchmetrics.detection import MeanAveragePrecision

from xaidash.data.scenes.types import SceneSplit, SceneTarget
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.predictions import Detections, ScenePrediction, Segmentation

# The headline number of each task: what training reports per epoch and the runs table shows.
HEADLINE = {"detect": "map_50", "segment": "miou"}


def evaluate_scene_model(bundle: SceneBundle, split: SceneSplit, batch_size: int = 16) -> dict[str, float]:
    """A detector's "map" (IoU 0.50:0.95), "map_50", "map_75", "mar_100" and "ap/<class>"; a segmenter's "miou",
    "miou_objects", "pixel_accuracy" and "iou/<class>" (background included as "iou/background")."""
    predictions = bundle.predict(split.images, batch_size=batch_size)
    if bundle.task == "detect":
        return detection_metrics(predictions, split.targets, bundle.classes)
    truths = [split.semantic(i) for i in range(len(split))]
    return segmentation_metrics(predictions, truths, bundle.classes)


def detection_metrics(
    predictions: Sequence[ScenePrediction], targets: Sequence[SceneTarget], classes: tuple[str, ...]
) -> dict[str, float]:
    """COCO mAP of `predictions` (Detections) against `targets`; a class with no true object and no detection has no
    AP and is left out of "ap/<class>"."""
    metric = MeanAveragePrecision(box_format="xyxy", iou_type="bbox", class_metrics=True)
    preds = [p.as_torchvision() for p in predictions if isinstance(p, Detections)]
    if len(preds) != len(targets):
        raise ValueError("detection_metrics needs one Detections per target")
    metric.update(preds, [{"boxes": t.boxes.float(), "labels": t.labels.long()} for t in targets])
    result = metric.compute()
    out = {key: float(result[key]) for key in ("map", "map_50", "map_75", "mar_100")}
    per_class = result["map_per_class"].reshape(-1)
    labels = result["classes"].reshape(-1)
    for label, ap in zip(labels.tolist(), per_class.tolist(), strict=True):
        if 1 <= label <= len(classes) and ap >= 0:  # -1: the class never occurs
            out[f"ap/{classes[label - 1]}"] = float(ap)
    return out


def segmentation_metrics(
    predictions: Sequence[ScenePrediction], truths: Sequence[torch.Tensor], classes: tuple[str, ...]
) -> dict[str, float]:
    """Per-class IoU = TP / (TP + FP + FN) from one confusion matrix over every pixel of the split (not a mean of
    per-image IoUs). A class with no pixel in the truth or the predictions has no IoU and is left out of the means:
    torchmetrics' JaccardIndex would count it as 0 or 1 by a setting, which says nothing about the model. "miou"
    averages the classes and the background (PASCAL VOC's convention), "miou_objects" the object classes alone."""
    confusion = MulticlassConfusionMatrix(num_classes=len(classes) + 1)
    for prediction, truth in zip(predictions, truths, strict=True):
        if not isinstance(prediction, Segmentation):
            raise ValueError("segmentation_metrics needs Segmentation predictions")
        confusion.update(prediction.mask.reshape(-1), truth.reshape(-1).long())
    m = confusion.compute().double()  # [true, predicted]
    tp = m.diagonal()
    union = m.sum(0) + m.sum(1) - tp
    names = ("background", *classes)
    out: dict[str, float] = {}
    ious: list[float] = []
    for k, name in enumerate(names):
        if union[k] > 0:
            iou = float(tp[k] / union[k])
            out[f"iou/{name}"] = iou
            ious.append(iou)
    objects = [out[f"iou/{n}"] for n in classes if f"iou/{n}" in out]
    out["miou"] = sum(ious) / len(ious) if ious else 0.0
    out["miou_objects"] = sum(objects) / len(objects) if objects else 0.0
    out["pixel_accuracy"] = float(tp.sum() / m.sum()) if m.sum() > 0 else 0.0
    return out
