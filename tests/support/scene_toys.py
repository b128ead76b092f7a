"""Scripted scene "models" for the scene explainers' tests: their outputs are known functions of the image (a box's
score is the brightness of one patch), so a map's right answer is known; and a stand-in bundle to carry them. (The
random-weight torchvision Faster R-CNN and segmenter are tests/explainers/scenes/conftest.py's fixtures.)"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

CLASSES = ("circle", "square", "triangle", "cross")


@dataclass(frozen=True)
class ToySpec:
    cam_layer: str = ""
    id: str = "scripted"


@dataclass
class ToyBundle:
    """What the scene explainers read of a SceneBundle: model (eval), spec, task, classes, device."""

    model: nn.Module
    task: str = "detect"
    classes: tuple[str, ...] = CLASSES
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    spec: ToySpec = field(default_factory=ToySpec)
    image_size: int = 96

    def __post_init__(self) -> None:
        self.model.eval()

    def predict(self, images: list[torch.Tensor]) -> list:
        """As `SceneBundle.predict`: Detections or Segmentation per image."""
        from xaidash.models.scenes.predictions import Detections, Segmentation

        with torch.no_grad():
            if self.task == "detect":
                return [Detections.from_output(o) for o in self.model(list(images))]
            return [Segmentation.from_logits(x) for x in self.model(torch.stack(list(images)))]


class BrightnessDetector(nn.Module):
    """A scripted detector: one detection per image at `box` with label `label` whose score is the mean brightness
    of the image inside `source` (y0, y1, x0, x1), so only those pixels matter to that box."""

    def __init__(
        self,
        box: tuple[float, float, float, float] = (10.0, 10.0, 40.0, 40.0),
        label: int = 1,
        source: tuple[int, int, int, int] = (10, 40, 10, 40),
    ) -> None:
        super().__init__()
        self.box, self.label, self.source = box, label, source
        self.calls: list[int] = []

    def forward(self, images: torch.Tensor | list[torch.Tensor]) -> list[dict[str, torch.Tensor]]:
        batch = torch.stack(list(images)) if isinstance(images, list) else images
        self.calls.append(len(batch))
        y0, y1, x0, x1 = self.source
        scores = batch[:, :, y0:y1, x0:x1].mean(dim=(1, 2, 3)).clamp(0, 1)
        return [
            {
                "boxes": torch.tensor([self.box], dtype=batch.dtype) + 0 * s,
                "labels": torch.tensor([self.label]),
                "scores": s[None],
            }
            for s in scores
        ]


class RegionSegmenter(nn.Module):
    """A scripted segmenter: class 1's logit everywhere is 4 x the mean brightness of `source` (y0, y1, x0, x1);
    the other classes' logits are 0."""

    def __init__(self, source: tuple[int, int, int, int] = (10, 40, 10, 40), num_classes: int = 4) -> None:
        super().__init__()
        self.source, self.num_classes = source, num_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y0, y1, x0, x1 = self.source
        level = 4 * x[:, :, y0:y1, x0:x1].mean(dim=(1, 2, 3))
        out = torch.zeros(len(x), self.num_classes + 1, *x.shape[-2:], dtype=x.dtype)
        return (
            out
            + torch.nn.functional.one_hot(torch.tensor(1), self.num_classes + 1).to(x.dtype)[None, :, None, None]
            * level[:, None, None, None]
        )


def toy_image(size: int = 96, seed: int = 0) -> torch.Tensor:
    """A (3, size, size) image in [0, 1]: a mid-grey noisy background."""
    gen = torch.Generator().manual_seed(seed)
    return (0.5 + 0.1 * torch.randn(3, size, size, generator=gen)).clamp(0, 1)
