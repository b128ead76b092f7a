"""Small stand-ins of the scene models for the explainer tests: a torchvision Faster R-CNN with a light backbone
(min_size = max_size = 96, every box kept: box_score_thresh 0) and a tiny conv segmenter, random weights, with what a
scene method reads of a `SceneBundle` (model, spec.cam_layer, task, classes, device). They make the tests
independent of training; the trained models are tested through tests/support/scene_runs.py."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch
from torch import nn
from torchvision.models.detection import FasterRCNN
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.ops import MultiScaleRoIAlign

CLASSES = ("circle", "square", "triangle", "cross")


@dataclass(frozen=True)
class StandInSpec:
    cam_layer: str
    id: str = "stand_in"


@dataclass
class StandInBundle:
    model: nn.Module
    spec: StandInSpec
    task: str
    classes: tuple[str, ...] = CLASSES
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))


def tiny_detector(seed: int = 0) -> FasterRCNN:
    torch.manual_seed(seed)
    backbone = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, stride=2, padding=1),
        nn.ReLU(),
    )
    backbone.out_channels = 32  # type: ignore[assignment]
    anchors = AnchorGenerator(sizes=((16, 32, 48),), aspect_ratios=((0.5, 1.0, 2.0),))
    model = FasterRCNN(
        backbone,
        rpn_anchor_generator=anchors,
        box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2),
        box_head=TwoMLPHead(32 * 7 * 7, 64),
        box_predictor=FastRCNNPredictor(64, len(CLASSES) + 1),
        min_size=96,
        max_size=96,
        box_score_thresh=0.0,
        box_detections_per_img=20,
        rpn_post_nms_top_n_test=50,
    )
    return model.eval()


def tiny_segmenter(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.ConvTranspose2d(16, 8, 2, stride=2),
        nn.ReLU(),
        nn.Conv2d(8, len(CLASSES) + 1, 1),
    ).eval()


def scene_image(seed: int = 0, size: int = 96) -> torch.Tensor:
    """A smooth background with three bright rectangles: something for random weights to respond to."""
    g = torch.Generator().manual_seed(seed)
    image = torch.nn.functional.interpolate(torch.rand(1, 3, 6, 6, generator=g), size=(size, size), mode="bilinear")
    image = image[0] * 0.5
    for x0, y0, s in ((10, 12, 24), (50, 20, 30), (30, 60, 20)):
        image[:, y0 : y0 + s, x0 : x0 + s] = torch.rand(3, 1, 1, generator=g) * 0.5 + 0.5
    return image.clamp(0, 1)


@pytest.fixture(scope="module")
def detector_bundle() -> StandInBundle:
    return StandInBundle(tiny_detector(), StandInSpec("backbone.5"), "detect")


@pytest.fixture(scope="module")
def segmenter_bundle() -> StandInBundle:
    return StandInBundle(tiny_segmenter(), StandInSpec("3"), "segment")


@pytest.fixture(scope="module")
def image() -> torch.Tensor:
    return scene_image()
