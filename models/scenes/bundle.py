"""A scene model ready to use: the model in eval mode on its device, its spec, classes and image size, and the run it
came from. `predict` turns images into `Detections` or `Segmentation`s; explainers call `model` directly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xaidash.models.scenes.predictions import Detections, ScenePrediction, Segmentation
from xaidash.models.scenes.zoo import SceneModelSpec, SceneTask

PREDICT_BATCH = 16  # images per forward pass in predict()


@dataclass
class SceneBundle:
    """`model` (eval mode, on `device`), its `spec`, `classes` (classes[k - 1] names label k), the `image_size` it
    was built for, the `run` it was loaded from (a `Run`, None for a model built in memory) and its `dataset`."""

    model: nn.Module
    spec: SceneModelSpec
    classes: tuple[str, ...]
    image_size: int
    device: torch.device
    run: Any = None
    dataset: str | None = None

    @property
    def task(self) -> SceneTask:
        return self.spec.task

    @property
    def num_classes(self) -> int:
        """Object classes, without the background."""
        return len(self.classes)

    def cam_module(self) -> nn.Module:
        """The module whose output CAM methods weight (the spec's `cam_layer`)."""
        return self.model.get_submodule(self.spec.cam_layer)

    def forward(self, images: torch.Tensor | Sequence[torch.Tensor]) -> Any:
        """The model's own output on images already on the device (no grad switched off): torchvision's list of dicts
        for a detector, (B, C + 1, H, W) logits for a segmenter."""
        if self.task == "segment":
            batch = images if isinstance(images, torch.Tensor) else torch.stack(list(images))
            return self.model(batch)
        return self.model(list(images))

    @torch.no_grad()
    def predict(
        self, images: Sequence[torch.Tensor] | torch.Tensor, batch_size: int = PREDICT_BATCH
    ) -> list[ScenePrediction]:
        """One prediction per image ((3, H, W) float in [0, 1], any device), on the CPU."""
        items = list(images.unbind(0)) if isinstance(images, torch.Tensor) else list(images)
        out: list[ScenePrediction] = []
        for start in range(0, len(items), batch_size):
            chunk = [im.to(self.device, torch.float32) for im in items[start : start + batch_size]]
            if self.task == "detect":
                out.extend(Detections.from_output(o) for o in self.model(chunk))
            elif len({tuple(im.shape) for im in chunk}) == 1:
                out.extend(Segmentation.from_logits(lg) for lg in self.model(torch.stack(chunk)))
            else:  # images of several sizes: one at a time
                out.extend(Segmentation.from_logits(self.model(im[None])[0]) for im in chunk)
        return out
