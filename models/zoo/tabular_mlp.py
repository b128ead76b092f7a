"""A multilayer perceptron for table rows: it reads a row standardised and one-hot encoded (the table adapter prepares
it: data/modalities/table.py), so the network's first layer sees every column on one scale."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xaidash.data.modalities.table import prepared_width
from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import DROPOUT, ModelSpec, register
from xaidash.models.training.recipes import Recipe

HIDDEN = (64, 32)


class TabularMLP(nn.Module):
    def __init__(self, in_features: int, num_classes: int, hidden: tuple[int, ...] = HIDDEN, dropout: float = 0.1):
        super().__init__()
        layers: list[nn.Module] = []
        width = in_features
        for h in hidden:  # fresh ReLU and Dropout per layer: DeepLift hooks each instance once
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _fits(info: DatasetInfo) -> str | None:
    return None if info.columns else "needs a table (rows of named columns)"


def build(info: DatasetInfo, dropout: float = 0.1, **_: Any) -> TabularMLP:
    return TabularMLP(prepared_width(info), info.num_classes, HIDDEN, dropout)


# expected_acc: the test accuracy measured with this recipe on this project's 2-core CPU (docs/tables.md).
RECIPES = {
    "breast_cancer": Recipe(epochs=60, batch_size=32, lr=3e-3, weight_decay=1e-3, recommended=True),
    "wine": Recipe(epochs=80, batch_size=16, lr=3e-3, weight_decay=1e-3, recommended=True),
    "planted": Recipe(epochs=80, batch_size=64, lr=3e-3, weight_decay=1e-4, recommended=True),
    "table": Recipe(epochs=60, batch_size=64, lr=3e-3, weight_decay=1e-4),
}

register(
    ModelSpec(
        name="tabular_mlp",
        modality="table",
        build=build,
        description="Standardised numeric columns and one-hot categories through two hidden layers (64, 32) with "
        "ReLU and dropout.",
        fits=_fits,
        input_note="any table",
        recipes=RECIPES,
        options={"dropout": DROPOUT},
    )
)
