"""A multilayer perceptron on flattened pixels: the baseline with no notion of space."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import DROPOUT, ModelSpec, register
from xaidash.models.training.recipes import Recipe

HIDDEN = (256, 128)


class MLP(nn.Module):
    def __init__(self, in_features: int, num_classes: int, hidden: tuple[int, ...] = HIDDEN, dropout: float = 0.2):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_features
        for h in hidden:  # fresh ReLU and Dropout per layer: DeepLift hooks each instance once
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _fits(info: DatasetInfo) -> str | None:
    if len(info.input_shape) != 3:
        return "needs images (C, H, W)"
    return None


def build(info: DatasetInfo, dropout: float = 0.2, **_: Any) -> MLP:
    return MLP(math.prod(info.input_shape), info.num_classes, HIDDEN, dropout)


# Tested on this project's 2-core CPU; expected_acc is the test accuracy measured there (README: Recipes).
RECIPES = {
    "shapes": Recipe(epochs=10, batch_size=128, lr=1e-3, weight_decay=0.01, expected_acc=0.371),
    "digits": Recipe(epochs=20, batch_size=64, lr=3e-3, weight_decay=0.01, expected_acc=0.975),
    "mnist": Recipe(epochs=3, batch_size=128, lr=3e-3, weight_decay=0.01, expected_acc=0.979),
    "fashion_mnist": Recipe(epochs=3, batch_size=128, lr=3e-3, weight_decay=0.01, expected_acc=0.874),
    "image": Recipe(epochs=10, batch_size=128, lr=1e-3, weight_decay=0.01),
}

register(
    ModelSpec(
        name="mlp",
        modality="image",
        build=build,
        description="Flattened pixels through two hidden layers (256, 128) with ReLU and dropout.",
        fits=_fits,
        input_note="any image (parameters grow with the pixel count)",
        recipes=RECIPES,
        options={"dropout": DROPOUT},
    )
)
