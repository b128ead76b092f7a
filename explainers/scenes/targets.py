"""What one explained output of a scene model is, as a differentiable score of the model's output.

`BoxTarget` is one detected box: the score is the IoU with the best-overlapping detection of the same class plus that
detection's confidence, zero when none overlaps by more than `iou_threshold`. It is pytorch-grad-cam's
`FasterRCNNBoxScoreTarget` for one box, so Grad-CAM per box can be checked against that library's call. `RegionTarget`
is one class's logits summed over a region (a class's mask or a drawn box), pytorch-grad-cam's
`SemanticSegmentationTarget` and Seg-Grad-CAM's target."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torchvision.ops import box_iou


@dataclass(frozen=True)
class BoxTarget:
    """One box to explain: x0, y0, x1, y1 in the image's pixels, its class label (1..C), and which of the model's
    detections on the unchanged image it is (`index`, None for a box drawn by hand)."""

    box: tuple[float, float, float, float]
    label: int
    index: int | None = None
    iou_threshold: float = 0.5

    def score(self, output: dict[str, torch.Tensor]) -> torch.Tensor:
        """IoU + confidence of the detection in `output` (torchvision's dict of boxes, labels, scores) that overlaps
        this box most, when it overlaps by more than the threshold and has this class; else 0."""
        boxes = output["boxes"]
        if boxes.numel() == 0:
            return boxes.new_zeros(())
        mine = torch.tensor([self.box], dtype=boxes.dtype, device=boxes.device)
        ious = box_iou(mine, boxes)[0]
        best = int(ious.argmax())
        if float(ious[best].detach()) > self.iou_threshold and int(output["labels"][best]) == self.label:
            return ious[best] + output["scores"][best]
        return boxes.new_zeros(())

    def describe(self, classes: tuple[str, ...]) -> str:
        x0, y0, x1, y1 = (round(v) for v in self.box)
        which = f"box {self.index + 1}" if self.index is not None else "a drawn box"
        return f"{which}: {class_name(classes, self.label)} at ({x0}, {y0})-({x1}, {y1})"


@dataclass(frozen=True)
class RegionTarget:
    """One class's region to explain: the class label (1..C) and a (H, W) bool mask of the pixels whose logits count
    (the class's predicted mask, or a drawn box). `name` says what the region is ("its predicted mask")."""

    label: int
    mask: torch.Tensor
    name: str = "its predicted mask"

    def score(self, logits: torch.Tensor) -> torch.Tensor:
        """The class's logits (C + 1, H, W) summed over the region."""
        return (logits[self.label] * self.mask.to(logits.device, logits.dtype)).sum()

    def describe(self, classes: tuple[str, ...]) -> str:
        return f"{class_name(classes, self.label)}, {self.name} ({int(self.mask.sum())} px)"


SceneTargetSpec = BoxTarget | RegionTarget


def class_name(classes: tuple[str, ...], label: int) -> str:
    """The name of label `label` (1..C); 0 is the background."""
    if label == 0:
        return "background"
    return classes[label - 1] if 0 < label <= len(classes) else f"class {label}"
