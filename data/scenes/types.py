"""What a scene data set hands out, shared by training, explaining and the pages.

A scene is one RGB image (3, H, W), float32 in [0, 1], with any number of objects. Object labels count from 1; 0 is
the background, as torchvision's detection models expect. An object's instance mask holds only its visible pixels
(an object drawn later hides what it covers), so the semantic mask is the instance masks painted in order."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class SceneTarget:
    """The ground truth of one scene: boxes (N, 4) float32 as x0, y0, x1, y1 in pixels (x1, y1 exclusive edges),
    labels (N,) int64 in 1..C, masks (N, H, W) bool (None when the annotations have no masks)."""

    boxes: torch.Tensor
    labels: torch.Tensor
    masks: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.labels.numel())

    def semantic(self, height: int, width: int) -> torch.Tensor:
        """(H, W) int64: each pixel's object class, 0 for the background; later objects over earlier ones. Without
        instance masks, the boxes are painted instead."""
        out = torch.zeros(height, width, dtype=torch.int64)
        for i in range(len(self)):
            if self.masks is not None:
                out[self.masks[i]] = self.labels[i]
            else:
                x0, y0, x1, y1 = (round(float(v)) for v in self.boxes[i])
                out[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = self.labels[i]
        return out

    def as_torchvision(self) -> dict[str, torch.Tensor]:
        """The target dict torchvision's detection models train on."""
        target = {"boxes": self.boxes.float(), "labels": self.labels.long()}
        if self.masks is not None:
            target["masks"] = self.masks.to(torch.uint8)
        return target


@dataclass
class SceneSplit:
    """One split of a scene set: images and their ground truth, in the same order. `classes` names the labels
    1..C (classes[k - 1] is label k). `names` says where each image came from (a file name, or `scene 12`)."""

    name: str
    classes: tuple[str, ...]
    images: list[torch.Tensor]
    targets: list[SceneTarget]
    names: list[str] = field(default_factory=list)
    has_masks: bool = True

    def __post_init__(self) -> None:
        if len(self.images) != len(self.targets):
            raise ValueError(f"{len(self.images)} images but {len(self.targets)} targets")
        if not self.names:
            self.names = [f"scene {i}" for i in range(len(self.images))]

    def __len__(self) -> int:
        return len(self.images)

    def semantic(self, index: int) -> torch.Tensor:
        """Scene `index`'s semantic mask (H, W), 0 the background."""
        image = self.images[index]
        return self.targets[index].semantic(int(image.shape[-2]), int(image.shape[-1]))

    def subset(self, indices: list[int]) -> SceneSplit:
        return SceneSplit(
            self.name,
            self.classes,
            [self.images[i] for i in indices],
            [self.targets[i] for i in indices],
            [self.names[i] for i in indices],
            self.has_masks,
        )
