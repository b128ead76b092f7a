"""The scene models: detectors and segmenters trained here from random weights, each a `SceneModelSpec`.

A detector is torchvision's `FasterRCNN` (library code: its RPN, RoI heads, losses and post-processing) around a
light backbone of our own, sized for 64-128 px scenes on a CPU: the images are never upscaled (torchvision's
default resizes to 800 px), the anchors match objects of 10-48 px, and the RoI head is small. A segmenter is a small
U-Net (conv blocks and max-pool modules down, transposed convolutions and skip concatenation up).

Both take images as (B, 3, H, W) float in [0, 1] (a detector also takes a list, torchvision style); each normalises
inside. In eval mode the detector returns torchvision's list of dicts (boxes, labels, scores), the segmenter
(B, C + 1, H, W) logits, channel 0 the background. Every nonlinearity and pooling of OUR modules is its own module
instance, never in place, so captum's and pytorch-grad-cam's hooks see each one.

`cam_layer` is the module path whose output CAM methods weight: the detector's last backbone block (stride 8), the
U-Net's bottleneck.

The torchvision architectures at the end (`recipe` None) are never trained here: they hold checkpoints trained
elsewhere, brought in by `xaidash scenes import` (models/scenes/importing.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn
from torchvision.models.detection import FasterRCNN, fasterrcnn_mobilenet_v3_large_320_fpn
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.segmentation import lraspp_mobilenet_v3_large
from torchvision.ops import MultiScaleRoIAlign

from xaidash.data.specs import Registry, Spec
from xaidash.models.registry import ModelError

SceneTask = Literal["detect", "segment"]
MAX_CLASSES = 1000  # object classes a scene model may have (a COCO file names at most a few hundred)
MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)  # images in [0, 1] -> about [-2, 2]
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # what torchvision's checkpoints expect


@dataclass(frozen=True)
class SceneRecipe:
    """The documented default training of a scene model (what `SceneTrainSettings` None fields take).

    `optimizer` is 'adamw' or 'sgd'; the learning rate warms up linearly over `warmup` of the steps, then
    follows a cosine to zero. `flip`: random horizontal flips of the training images (and their targets)."""

    epochs: int
    lr: float
    batch_size: int
    optimizer: str = "adamw"
    weight_decay: float = 1e-4
    warmup: float = 0.05
    flip: bool = True
    train_count: int | None = None  # training images used by default (None: the whole split)
    measured: str = ""  # what the recipe reached where it was measured, in words (docs and the pages)
    # seconds per training image and epoch (validation included) on one thread of a 2-core CPU, nothing else running:
    # the Train page's expected time before this machine has its own runs
    seconds_per_image: float | None = None


@dataclass(frozen=True)
class SceneModelSpec(Spec):
    """One scene model. `build(num_classes, image_size)` takes the number of object classes WITHOUT the background
    and the side the model sees (images are neither up- nor downscaled past it)."""

    id: str
    label: str
    task: SceneTask
    build: Callable[[int, int], nn.Module] = field(compare=False)
    cam_layer: str
    description: str
    recipe: SceneRecipe | None  # None: imported only (`xaidash scenes import`), never trained here
    featured: int | None = None

    @property
    def trainable(self) -> bool:
        """Whether the Train page and `xaidash scenes train` offer it (an imported-only architecture has no recipe)."""
        return self.recipe is not None

    def training_recipe(self) -> SceneRecipe:
        """The recipe; ModelError (one line) for an imported-only architecture."""
        if self.recipe is None:
            trainable = ", ".join(s.id for s in SCENE_MODELS if s.trainable)
            raise ModelError(
                f"{self.id} is not trained here (it holds checkpoints brought in by `xaidash scenes import`): "
                f"train one of {trainable}."
            )
        return self.recipe

    def make(self, num_classes: int, image_size: int) -> nn.Module:
        """`build`, with the sizes checked first (one line, ModelError)."""
        if not 1 <= num_classes <= MAX_CLASSES:
            raise ModelError(f"{self.id} needs 1 to {MAX_CLASSES} object classes, not {num_classes}.")
        if not 16 <= image_size <= 2048:
            raise ModelError(f"{self.id} takes images of 16 to 2048 px per side, not {image_size}.")
        return self.build(num_classes, image_size)


def _check(spec: SceneModelSpec) -> None:
    if spec.task not in ("detect", "segment"):
        raise ValueError(f"scene model {spec.id}: task must be detect or segment, not {spec.task!r}")


SCENE_MODELS: Registry[SceneModelSpec] = Registry(
    "scene model",
    error=ModelError,
    unknown=lambda key, known: f"Unknown scene model {key!r}: choose one of {', '.join(known)}.",
    check=_check,
)


def scene_model(model_id: str) -> SceneModelSpec:
    """The spec registered under `model_id`; ModelError naming the known ones."""
    return SCENE_MODELS.get(model_id)


# ---- building blocks ------------------------------------------------------------------------------------------------


def conv_block(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    """Conv 3x3 -> BatchNorm -> ReLU, twice (the first with `stride`); each ReLU its own module."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(),
    )


class Normalise(nn.Module):
    """(x - mean) / std per channel, as buffers: images come in [0, 1]."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, mean: tuple[float, ...] = MEAN, std: tuple[float, ...] = STD, persistent: bool = True) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=persistent)
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1), persistent=persistent)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


# ---- the detector ---------------------------------------------------------------------------------------------------


class SceneBackbone(nn.Module):
    """Four conv blocks, stride 8 in all: 96 px scenes give a 12x12 map of `out_channels` features (torchvision's
    detectors read `out_channels`). `stage4` is the block CAMs weight."""

    def __init__(self, widths: tuple[int, int, int, int] = (16, 32, 64, 96)) -> None:
        super().__init__()
        self.stem = conv_block(3, widths[0])
        self.stage2 = conv_block(widths[0], widths[1], stride=2)
        self.stage3 = conv_block(widths[1], widths[2], stride=2)
        self.stage4 = conv_block(widths[2], widths[3], stride=2)
        self.out_channels = widths[3]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stage4(self.stage3(self.stage2(self.stem(x))))


class SceneFasterRCNN(FasterRCNN):
    """torchvision's FasterRCNN that also takes a (B, 3, H, W) batch (a list of images is what torchvision takes)."""

    def forward(self, images: Any, targets: Any = None) -> Any:
        if isinstance(images, torch.Tensor) and images.dim() == 4:
            images = list(images.unbind(0))
        return super().forward(images, targets)


def build_fasterrcnn_small(num_classes: int, image_size: int) -> nn.Module:
    """A Faster R-CNN for small scenes: our 4-block backbone (stride 8, 96 channels), 12 anchors per place
    (sides 12-48 px, aspect ratios 0.5, 1, 2), RoIAlign 7x7 into a 2-layer MLP of 256, few sampled RoIs."""
    backbone = SceneBackbone()
    anchors = AnchorGenerator(sizes=((12, 20, 32, 48),), aspect_ratios=((0.5, 1.0, 2.0),))
    # One bilinear sample per bin: torchvision's CPU RoIAlign backward was half of a training step at 2 samples.
    roi_pool = MultiScaleRoIAlign(featmap_names=["0"], output_size=7, sampling_ratio=1)
    representation = 256
    box_head = TwoMLPHead(backbone.out_channels * 7 * 7, representation)
    return SceneFasterRCNN(
        backbone,
        num_classes=None,
        min_size=image_size,
        max_size=image_size,
        image_mean=list(MEAN),
        image_std=list(STD),
        rpn_anchor_generator=anchors,
        rpn_pre_nms_top_n_train=600,
        rpn_pre_nms_top_n_test=300,
        rpn_post_nms_top_n_train=300,
        rpn_post_nms_top_n_test=100,
        rpn_batch_size_per_image=128,
        box_roi_pool=roi_pool,
        box_head=box_head,
        box_predictor=FastRCNNPredictor(representation, num_classes + 1),
        box_batch_size_per_image=64,
        box_score_thresh=0.05,
        box_detections_per_img=30,
    )


# ---- the segmenter --------------------------------------------------------------------------------------------------


class UpBlock(nn.Module):
    """Transposed convolution (x2), the skip concatenated, then a conv block."""

    def __init__(self, c_in: int, c_skip: int, c_out: int) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(c_in, c_out, 2, stride=2)
        self.conv = conv_block(c_out + c_skip, c_out)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.cat([self.up(x), skip], dim=1))


class SceneUNet(nn.Module):
    """A U-Net: a conv block then a max-pool module per level down (`downs`, `pools`), a `bottleneck` block, and per
    level up a transposed convolution with the level's skip concatenated (`ups`), then a 1x1 conv to C + 1 logits.
    Any image size: padded (replicating the border) to a multiple of 2^levels inside and cropped back."""

    def __init__(self, num_classes: int, widths: tuple[int, ...] = (16, 32, 64, 128)) -> None:
        super().__init__()
        *levels, deepest = widths
        self.normalise = Normalise()
        self.downs = nn.ModuleList(
            conv_block(c_in, c_out) for c_in, c_out in zip((3, *levels[:-1]), levels, strict=True)
        )
        self.pools = nn.ModuleList(nn.MaxPool2d(2) for _ in levels)
        self.bottleneck = conv_block(levels[-1], deepest)
        self.ups = nn.ModuleList(
            UpBlock(c_in, c_skip, c_skip)
            for c_in, c_skip in zip((*levels[1:], deepest)[::-1], levels[::-1], strict=True)
        )
        self.head = nn.Conv2d(levels[0], num_classes + 1, 1)
        self.multiple = 2 ** len(levels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        pad_h, pad_w = (-h) % self.multiple, (-w) % self.multiple
        x = self.normalise(x)
        if pad_h or pad_w:  # replicate the border: zeros would be a dark frame the model has never seen
            x = nn.functional.pad(x, (0, pad_w, 0, pad_h), mode="replicate")
        skips = []
        for down, pool in zip(self.downs, self.pools, strict=True):
            x = down(x)
            skips.append(x)
            x = pool(x)
        x = self.bottleneck(x)
        for up, skip in zip(self.ups, skips[::-1], strict=True):
            x = up(x, skip)
        return self.head(x)[..., :h, :w]


def build_unet_small(num_classes: int, image_size: int) -> nn.Module:
    return SceneUNet(num_classes)


# ---- the registered models ------------------------------------------------------------------------------------------

SCENE_MODELS.register(
    SceneModelSpec(
        id="fasterrcnn_small",
        label="Faster R-CNN (small, from scratch)",
        task="detect",
        build=build_fasterrcnn_small,
        cam_layer="backbone.stage4",
        description=(
            "torchvision's Faster R-CNN (region proposals, RoIAlign, box head) on a light 4-block backbone of our "
            "own (stride 8, 96 channels), trained from random weights at the scenes' own size."
        ),
        # Measured on `scenes` (one thread of a loaded 2-core CPU): validation map_50 0.69 after epoch 1, 0.95 after
        # epoch 2, 0.97 after 3, 0.98 after 4-6; map (IoU 0.50:0.95) still rose to epoch 5.
        recipe=SceneRecipe(
            epochs=6,
            lr=2e-3,
            batch_size=16,
            optimizer="adamw",
            seconds_per_image=0.032,
            measured="test map 0.844, map_50 0.979, map_75 0.915 on scenes, in 382 s of one CPU thread",
        ),
        featured=1,
    )
)

SCENE_MODELS.register(
    SceneModelSpec(
        id="unet_small",
        label="U-Net (small)",
        task="segment",
        build=build_unet_small,
        cam_layer="bottleneck",
        description=(
            "A small U-Net: conv blocks and max-pooling down (16-32-64 channels), a 128-channel bottleneck, "
            "transposed convolutions and skip connections up; one logit per class and the background per pixel."
        ),
        # Batch 8 rather than 16: twice the updates for the same time; at batch 16 one epoch left mIoU at 0.26.
        # Validation mIoU 0.33 after epoch 1, 0.81 after epoch 2 (CE + Dice loss, models/scenes/batches.py).
        recipe=SceneRecipe(
            epochs=3,
            lr=3e-3,
            batch_size=8,
            optimizer="adamw",
            seconds_per_image=0.035,
            measured="test mIoU 0.887 (object classes 0.859, pixel accuracy 0.988) on scenes, in 209 s of one CPU thread",
        ),
        featured=1,
    )
)


# ---- torchvision architectures, imported only -----------------------------------------------------------------------


class TorchvisionSegmenter(nn.Module):
    """A torchvision segmentation model as the scene bundle expects it: [0, 1] images normalised inside with
    ImageNet's mean and std, and the (B, C + 1, H, W) logits of its "out" entry. `net` holds the torchvision model, so
    its state dict is the checkpoint's under "net." (the normalisation is not stored)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.normalise = Normalise(IMAGENET_MEAN, IMAGENET_STD, persistent=False)
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(self.normalise(x))["out"]
        return out


def build_fasterrcnn_mobilenet(num_classes: int, image_size: int) -> nn.Module:
    # torchvision's own sizes (320 px inside, whatever the image): what its checkpoints were trained at
    return fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=num_classes + 1)


def build_lraspp_mobilenet(num_classes: int, image_size: int) -> nn.Module:
    net = lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=num_classes + 1)
    return TorchvisionSegmenter(net)


SCENE_MODELS.register(
    SceneModelSpec(
        id="fasterrcnn_mobilenet_v3_large_320_fpn",
        label="Faster R-CNN MobileNetV3-Large 320 FPN (torchvision, imported)",
        task="detect",
        build=build_fasterrcnn_mobilenet,
        cam_layer="backbone.body.16",  # MobileNetV3's last block (960 channels), before the FPN's dict of maps
        description=(
            "torchvision's fasterrcnn_mobilenet_v3_large_320_fpn with a checkpoint trained elsewhere (imported as a "
            "safetensors state dict); images are resized to 320 px inside, as torchvision does."
        ),
        recipe=None,
    )
)

SCENE_MODELS.register(
    SceneModelSpec(
        id="lraspp_mobilenet_v3_large",
        label="LR-ASPP MobileNetV3-Large (torchvision, imported)",
        task="segment",
        build=build_lraspp_mobilenet,
        cam_layer="net.backbone.16",  # MobileNetV3's last block (960 channels, stride 16)
        description=(
            "torchvision's lraspp_mobilenet_v3_large with a checkpoint trained elsewhere (imported as a safetensors "
            "state dict); ImageNet normalisation inside, the 'out' logits at the image's size."
        ),
        recipe=None,
    )
)
