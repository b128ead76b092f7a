"""What a model is trained to do, as its data set declares it: name a class (`DatasetInfo.classes`) or predict a
number (`DatasetInfo.regression`). Training, evaluation and the pages ask here for the loss, the counts behind
the headline score and how an output reads, instead of each testing the data set.

A series to forecast (`DatasetInfo.forecast`) is a regression with one output per step ahead: the loss and the
scores run over every step of the horizon, and its test scores stand beside those of the naive forecast (the window's
last value, at every step) and the seasonal-naive one (the value one season before the step forecast) on the same
test windows.

A regression model answers in the target's units (the zoo's tabular MLP ends in `TargetScale`), so a prediction,
an attribution (which sums to a difference of predictions) and an error are all in those units. It learns on the
standardised scale: the loss is the mean squared error divided by the target's variance, the same for every table.
"""

from __future__ import annotations

import torch
from torch import nn

from xaidash.data.registry import DatasetInfo, Forecast, RegressionTarget


class TargetScale(nn.Module):
    """The last layer of a regression network: from the standardised scale it learns on to the target's units (one
    mean and std for every output)."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, mean: float, std: float) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(float(mean)))
        self.register_buffer("std", torch.tensor(float(std)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z * self.std + self.mean


class StandardisedMSE(nn.Module):
    """Mean squared error of outputs (N, 1), or (N, H) for a forecast (over every step), in the target's units,
    divided by the target's variance: 1.0 is what predicting the mean scores, whatever the units."""

    def __init__(self, std: float) -> None:
        super().__init__()
        self.scale = 1.0 / float(std) ** 2

    def forward(self, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.mean((outputs.reshape(-1) - y.float().reshape(-1)) ** 2) * self.scale


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
        pred, y = outputs.reshape(-1).double(), y.reshape(-1).double()  # a forecast's (N, H): every step
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


def baseline_forecasts(info: DatasetInfo, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The naive and seasonal-naive forecasts (N, H) in the target's units of prepared windows x (N, 1, W): the
    window's last value at every step; for step h the value one season before it, y[W - s + (h - 1) mod s]
    (as the seasonal-naive forecast of Hyndman & Athanasopoulos, 'Forecasting: principles and practice', 5.2).
    The seasonal one needs a window of at least one season: absent otherwise."""
    f = info.forecast
    if f is None:
        return {}
    raw = x[:, 0].double() * info.std[0] + info.mean[0]
    out = {"naive": raw[:, -1:].expand(-1, f.horizon)}
    if f.window >= f.season:
        steps = torch.arange(f.horizon, device=x.device)
        out["seasonal_naive"] = raw[:, f.window - f.season + steps % f.season]
    return out


BASELINES = ("naive", "seasonal_naive")
# The keys ForecastSums.scores adds to a test evaluation (the summary has each with the prefix 'test_')
FORECAST_SCORES = (*(f"{b}_{m}" for b in BASELINES for m in ("mae", "rmse")), "mae_by_step", "rmse_by_step")


class ForecastSums:
    """Sums over batches (on the device) for a forecast's test scores beyond `RegressionSums`: each baseline's
    squared and absolute errors, and the model's absolute and squared error at each step ahead."""

    def __init__(self, forecast: Forecast, device: torch.device) -> None:
        self.horizon = forecast.horizon
        # per baseline: n, Σe², Σ|e| (n = 0: not formed); per step: Σ|e|, Σe²; then the windows
        self.sums = torch.zeros(3 * len(BASELINES) + 2 * self.horizon + 1, dtype=torch.float64, device=device)

    def add(self, info: DatasetInfo, x: torch.Tensor, outputs: torch.Tensor, y: torch.Tensor) -> None:
        y = y.double().reshape(len(y), self.horizon)
        baselines = baseline_forecasts(info, x)
        for i, name in enumerate(BASELINES):
            if name in baselines:
                err = baselines[name] - y
                self.sums[3 * i] += err.numel()
                self.sums[3 * i + 1] += (err**2).sum()
                self.sums[3 * i + 2] += err.abs().sum()
        err = outputs.double().reshape(len(y), self.horizon) - y
        start = 3 * len(BASELINES)
        self.sums[start : start + self.horizon] += err.abs().sum(0)
        self.sums[start + self.horizon : start + 2 * self.horizon] += (err**2).sum(0)
        self.sums[-1] += len(y)

    def scores(self, sums: list[float] | None = None) -> dict[str, object]:
        """{'naive_mae', 'naive_rmse', 'seasonal_naive_mae', 'seasonal_naive_rmse' (None where not formed),
        'mae_by_step', 'rmse_by_step' (lists over t+1 ... t+H)}; `sums` when reduced over processes."""
        values = sums if sums is not None else self.sums.tolist()
        out: dict[str, object] = {}
        for i, name in enumerate(BASELINES):
            n, sq, ab = values[3 * i : 3 * i + 3]
            out[f"{name}_mae"] = ab / n if n else None
            out[f"{name}_rmse"] = (sq / n) ** 0.5 if n else None
        start, windows = 3 * len(BASELINES), max(values[-1], 1.0)
        out["mae_by_step"] = [v / windows for v in values[start : start + self.horizon]]
        out["rmse_by_step"] = [(v / windows) ** 0.5 for v in values[start + self.horizon : start + 2 * self.horizon]]
        return out
