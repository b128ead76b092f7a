"""torchvision's ResNet-18, starting from ImageNet weights when they can be had without waiting.

Weights: torch hub's cached `resnet18-f37072fd.pth` if present; else a download when not
offline (network probed with a short timeout first); else random initialisation, and the
built model says so in `model.xai_note` (also `weights_note()` before building).
Inputs are always normalised with ImageNet's mean and std (spec.input_mean/input_std): what
the pretrained weights expect, and as good as any other choice for a random start.
"""

from __future__ import annotations

import functools
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from xaidash.data.paths import offline
from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import ModelOption, ModelSpec, register
from xaidash.models.training.recipes import Recipe

if TYPE_CHECKING:  # torchvision is imported on use
    from torchvision.models import ResNet
    from torchvision.models.resnet import BasicBlock

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
MIN_SIDE = 32  # five stride-2 stages: smaller images leave nothing to pool
PROBE_TIMEOUT_S = 5.0


def weights_url() -> str:
    from torchvision.models import ResNet18_Weights

    return ResNet18_Weights.IMAGENET1K_V1.url


def weights_file() -> Path:
    """Where torch hub keeps (or would keep) the ImageNet checkpoint."""
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(weights_url())


def weights_note() -> str | None:
    """Why resnet18 would start from random weights right now, or None when ImageNet weights can load."""
    if weights_file().is_file() or not offline():
        return None
    return _missing_note("downloads are off (offline mode)")


def _missing_note(why: str) -> str:
    return (
        f"resnet18 starts from RANDOM weights: the ImageNet file {weights_file().name} is not in torch's cache "
        f"({weights_file().parent}) and {why}. To start from ImageNet weights, download {weights_url()} "
        f"and put it in that folder (or set TORCH_HOME)."
    )


@functools.lru_cache(maxsize=2)
def _read_state(path: str, mtime: float) -> dict[str, torch.Tensor]:
    """The checkpoint, read once per process (mtime in the key: a replaced file is read again)."""
    return torch.load(path, map_location="cpu", weights_only=True)


def _imagenet_state() -> tuple[dict[str, torch.Tensor] | None, str]:
    """(state dict, note) — the state dict is None when no weights could be had, and the note says why."""
    path = weights_file()
    if not path.is_file():
        if offline():
            return None, _missing_note("downloads are off (offline mode)")
        try:  # a quick probe, so a machine without network fails in seconds, not at the OS timeout
            urllib.request.urlopen(
                urllib.request.Request(weights_url(), method="HEAD"), timeout=PROBE_TIMEOUT_S
            ).close()
            torch.hub.load_state_dict_from_url(weights_url(), map_location="cpu", progress=False, check_hash=True)
        except (urllib.error.URLError, OSError, RuntimeError) as err:
            return None, _missing_note(f"the download failed ({err})")
    try:
        return _read_state(str(path), path.stat().st_mtime), f"ImageNet weights (IMAGENET1K_V1) from {path}."
    except (OSError, RuntimeError, EOFError) as err:
        return None, _missing_note(f"the cached file could not be read ({err}); delete it to download it again")


class SafeBasicBlock(nn.Module):
    """torchvision's BasicBlock with two separate, non-inplace ReLUs (it calls one in-place ReLU twice,
    which breaks DeepLift). Parameter names are unchanged, so pretrained weights load as they are."""

    def __init__(self, block: BasicBlock):
        super().__init__()
        self.conv1, self.bn1, self.conv2, self.bn2 = block.conv1, block.bn1, block.conv2, block.bn2
        self.downsample = block.downsample
        self.stride = block.stride
        self.relu1 = nn.ReLU()
        self.relu2 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + identity)


def deeplift_safe_resnet18() -> ResNet:
    """An untrained torchvision resnet18 whose every ReLU and pool is its own non-inplace module."""
    from torchvision.models import resnet18

    model = resnet18(weights=None)
    model.relu = nn.ReLU()
    model.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
    for name in ("layer1", "layer2", "layer3", "layer4"):
        layer = getattr(model, name)
        setattr(model, name, nn.Sequential(*(SafeBasicBlock(b) for b in layer)))
    return model


def build(info: DatasetInfo, pretrained: bool = True, **_: Any) -> nn.Module:
    model = deeplift_safe_resnet18()
    state, note = _imagenet_state() if pretrained else (None, "resnet18 starts from random weights (pretrained=False).")
    if state is not None:
        model.load_state_dict(state)
    model.fc = nn.Linear(model.fc.in_features, info.num_classes)
    model.xai_note = note  # shown by the dashboard: whether the ImageNet start was had
    model.pretrained_loaded = state is not None
    return model


def _fits(info: DatasetInfo) -> str | None:
    if len(info.input_shape) != 3 or info.input_shape[0] != 3:
        return "needs 3-channel (RGB) images"
    if min(info.input_shape[1:]) < MIN_SIDE:
        return f"needs images of at least {MIN_SIDE}x{MIN_SIDE} pixels"
    return None


# resnet18 starts from random weights offline (no ImageNet checkpoint here): the shapes figure is from scratch.
RECIPES = {
    "shapes": Recipe(epochs=3, batch_size=128, lr=1e-3, weight_decay=0.05, expected_acc=0.508),
    # Not measured: fine-tuning settings (a lower peak rate, so ImageNet features are adjusted, not erased).
    "cifar10": Recipe(epochs=5, batch_size=128, lr=1e-3, weight_decay=0.05, augment="shift+flip"),
    "image": Recipe(epochs=5, batch_size=64, lr=3e-4, weight_decay=0.05, augment="shift+flip"),
}

register(
    ModelSpec(
        name="resnet18",
        modality="image",
        build=build,
        description="torchvision ResNet-18 (11.7M parameters), from ImageNet weights when the checkpoint is "
        "cached or downloadable, else from random weights; a new final layer for the data set's classes.",
        fits=_fits,
        input_note=f"3-channel images of at least {MIN_SIDE}x{MIN_SIDE} (normalised with ImageNet's mean/std)",
        last_conv="layer4",
        conv_layers=("layer1", "layer2", "layer3", "layer4"),
        gap_classifier="fc",
        pretrained=True,
        input_mean=IMAGENET_MEAN,
        input_std=IMAGENET_STD,
        note=weights_note,
        recipes=RECIPES,
        options={"pretrained": ModelOption("bool", help="start from ImageNet weights")},
    )
)
