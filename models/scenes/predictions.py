"""What a scene model predicts for one image: boxes with classes and scores (`Detections`), or a mask per class
(`Segmentation`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Detections:
    """A detector's boxes (N, 4) float32 as x0, y0, x1, y1 in pixels, labels (N,) int64 in 1..C and scores (N,) in
    [0, 1], highest score first (torchvision's order), on the CPU."""

    boxes: torch.Tensor
    labels: torch.Tensor
    scores: torch.Tensor

    def __len__(self) -> int:
        return int(self.labels.numel())

    @classmethod
    def from_output(cls, output: dict[str, torch.Tensor]) -> Detections:
        """From torchvision's dict of one image (boxes, labels, scores), sorted by score."""
        scores = output["scores"].detach().float().cpu()
        order = torch.argsort(scores, descending=True)
        return cls(
            output["boxes"].detach().float().cpu()[order],
            output["labels"].detach().long().cpu()[order],
            scores[order],
        )

    def above(self, min_score: float) -> Detections:
        """Only the detections scoring at least `min_score`."""
        keep = self.scores >= min_score
        return Detections(self.boxes[keep], self.labels[keep], self.scores[keep])

    def as_torchvision(self) -> dict[str, torch.Tensor]:
        """The dict torchmetrics' MeanAveragePrecision and torchvision take."""
        return {"boxes": self.boxes, "labels": self.labels, "scores": self.scores}


@dataclass
class Segmentation:
    """A segmenter's logits (C + 1, H, W) float32 (channel 0 the background) and `mask` (H, W) int64, each pixel's
    argmax class, on the CPU."""

    logits: torch.Tensor
    mask: torch.Tensor

    @classmethod
    def from_logits(cls, logits: torch.Tensor) -> Segmentation:
        """From one image's logits (C + 1, H, W)."""
        logits = logits.detach().float().cpu()
        return cls(logits, logits.argmax(dim=0))

    def classes_present(self) -> list[int]:
        """The object labels (1..C) the mask holds, in order."""
        return [int(v) for v in torch.unique(self.mask) if int(v) != 0]

    def region(self, label: int) -> torch.Tensor:
        """(H, W) bool: the pixels predicted as `label`."""
        return self.mask == label


ScenePrediction = Detections | Segmentation
