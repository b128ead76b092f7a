"""What a model is trained to do, as its data set declares it: name a class (`DatasetInfo.classes`) or predict a
number (`DatasetInfo.regression`). Training, evaluation and the pages ask here for the loss, the counts behind
the headline score and how an output reads, instead of each testing the data set.

A regression model answers in the target's units (the zoo's tabular MLP ends in `TargetScale`), so a prediction,
an attribution (which sums to a difference of predictions) and an error are all in those units. It learns on the
standardised scale: the loss is the mean squared error divided by the target's variance, the same for every table.
"""

from __future__ import annotations

import torch
from torch import nn

from xaidash.data.registry import DatasetInfo, RegressionTarget


class TargetScale(nn.Module):
    """The last layer of a regression network: from the standardised scale it learns on to the target's units."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, mean: float, std: float) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(float(mean)))
        self.register_buffer("std", torch.tensor(float(std)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z * self.std + self.mean


class StandardisedMSE(nn.Module):
    """Mean squared error of outputs (N, 1) in the target's units, divided by the target's variance: 1.0 is what
    predicting the mean scores, whatever the units."""

    def __init__(self, std: float) -> None:
        super().__init__()
        self.scale = 1.0 / float(std) ** 2

    def forward(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.mean((outputs.reshape(-1) - y.float()) ** 2) * self.scale


def loss_function(info: DatasetInfo, label_smoothing: float = 0.0) -> nn.Module:
    """The training loss: cross-entropy over the classes, or the standardised squared error."""
    if info.regression is not None:
        return StandardisedMSE(info.regression.std)
    return nn.CrossEntropyLoss(label_smoothing=label_smoothing)


def correct_count(info: DatasetInfo, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """How many outputs name their label's class (on the device); 0 for a number to predict (no accuracy)."""
    if info.regression is not None:
        return torch.zeros((), dtype=torch.long, device=outputs.device)
    return (outputs.argmax(1) == y).sum()


class RegressionSums:
    """Sums over batches (on the device) from which R², RMSE and MAE of a whole pass follow."""

    def __init__(self, device: torch.device) -> None:
        self.sums = torch.zeros(5, dtype=torch.float64, device=device)  # n, Σe², Σ|e|, Σy, Σy²

    def add(self, outputs: torch.Tensor, y: torch.Tensor) -> None:
        pred, y = outputs.reshape(-1).double(), y.double()
        err = pred - y
        self.sums += torch.stack(
            [
                torch.tensor(float(len(y)), device=y.device, dtype=torch.float64),
                (err**2).sum(),
                err.abs().sum(),
                y.sum(),
                (y**2).sum(),
            ]
        )

    def scores(self, target: RegressionTarget, sums: list[float] | None = None) -> dict[str, float]:
        """{'loss' (standardised MSE), 'r2', 'rmse', 'mae'} over the pass; `sums` when reduced over processes."""
        n, sq, ab, sy, syy = sums if sums is not None else self.sums.tolist()
        n = max(n, 1.0)
        total = syy - sy * sy / n  # the pass's own spread around its mean: R² as scikit-learn's r2_score has it
        return {
            "loss": sq / n / target.std**2,
            "r2": 1.0 - sq / total if total > 1e-12 else 0.0,
            "rmse": (sq / n) ** 0.5,
            "mae": ab / n,
        }
