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


# expected_acc: the test accuracy of `xaidash train --dataset D --model series_cnn` (seed 0, one CPU thread, AdamW and
# one-cycle; the network trains on the train split less its 10% validation share), with the time the training took.
# Beside it, 1-nearest-neighbour references on the same archive split: GunPoint's 1-NN DTW (full window) recomputed
# here with sktime's KNeighborsTimeSeriesClassifier(distance="dtw", n_neighbors=1): 136/150 = 0.907, what the UCR
# archive publishes (0.913 is its 1-NN Euclidean); the others as published (tests/data/test_series_ucr.py).
#   gunpoint (150 test):        99.3% in 4.5 s; 1-NN DTW 90.7%, 1-NN Euclidean 91.3%; Wang et al.'s FCN 100%
#   italy_power (1,029 test):   96.0% in 2.5 s; 1-NN Euclidean 95.5%
#   arrowhead (175 test):       80.6% in 19 s; 1-NN Euclidean 80.0%. 36 training series (32 after validation):
#                               batch 4 and weight decay 0.01 (batch 8, 1e-4: 63.4%; batch 4, 200 epochs: 73.1%)
#   basic_motions (40 test):    100% in 2.8 s; dependent 1-NN DTW 97.5%
#   japanese_vowels (370 test): 99.2% in 12 s (padded to 29 frames by repeating each series' last frame)
#   series_shapes (300 test):   96.0% in 20 s (30 epochs: 94.0%; 100: 95.7%)
#   series_shapes_mv (300 test): 80.7% in 40 s (60 epochs: 79.7%). The errors are bumps and dips taken for each
#                               other (a dip read as a bump in 42 of 100 at 60 epochs, batch 16): the pattern lies in one
#                               of three channels, and the other two's smooth random walks wander like it; the network
#                               fits its training split (99% train, 83% validation). Neither dropout 0.3 with weight
#                               decay 0.05 (69.0%) nor width 32 (76.7%) helped, and the GRU stayed at chance (32.0%).
RECIPES = {
    "gunpoint": Recipe(epochs=100, batch_size=16, lr=1e-3, weight_decay=1e-4, expected_acc=0.993, recommended=True),
    "italy_power": Recipe(epochs=100, batch_size=16, lr=1e-3, weight_decay=1e-4, expected_acc=0.960, recommended=True),
    "arrowhead": Recipe(epochs=300, batch_size=4, lr=1e-3, weight_decay=1e-2, expected_acc=0.806, recommended=True),
    "basic_motions": Recipe(epochs=100, batch_size=16, lr=1e-3, weight_decay=1e-4, expected_acc=1.0, recommended=True),
    "japanese_vowels": Recipe(
        epochs=100, batch_size=16, lr=1e-3, weight_decay=1e-4, expected_acc=0.992, recommended=True
    ),
    "series_shapes": Recipe(epochs=60, batch_size=32, lr=3e-3, weight_decay=1e-4, expected_acc=0.960, recommended=True),
    "series_shapes_mv": Recipe(
        epochs=100, batch_size=32, lr=3e-3, weight_decay=1e-4, expected_acc=0.807, recommended=True
    ),
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
