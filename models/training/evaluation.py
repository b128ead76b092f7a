"""Measuring a model: loss, accuracy and confusion over a data set (`evaluate`), and the training metrics summed
on the device between two step records (`Interval`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xaidash.data.registry import DatasetInfo, RegressionTarget
from xaidash.models.device import autocast
from xaidash.models.task import ForecastSums, RegressionSums
from xaidash.models.training.batches import LoaderData, Shard, TensorData
from xaidash.models.training.distributed import SINGLE, DistContext


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: TensorData | LoaderData,
    device: torch.device,
    amp: bool,
    batch_size: int = 1024,
    num_classes: int | None = None,
    dist: DistContext = SINGLE,
    target: RegressionTarget | None = None,
    forecast: DatasetInfo | None = None,
) -> dict[str, Any]:
    """Loss, accuracy and (when num_classes is given) the confusion matrix [true][pred]; for a number to predict
    (`target`) the standardised squared error as the loss, R², RMSE and MAE in its units, and no accuracy. With
    several processes each evaluates its share and the sums are reduced: every rank gets the figures over the
    whole data. `forecast`: the data set of a series to forecast (with `target`), whose naive and seasonal-naive
    errors on the same windows and the model's errors per step ahead are added (`ForecastSums.scores`)."""
    model.eval()
    dist.sync_buffers(model)
    if target is not None:
        return _evaluate_regression(model, data, device, amp, batch_size, dist, target, forecast)
    # Sums stay on the device until the end: one host read for the whole pass, not one per batch.
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)
    n = 0
    bins = (num_classes or 1) ** 2
    confusion = torch.zeros(bins, dtype=torch.long, device=device)
    shard = Shard(dist.rank, dist.world_size, pad=False) if dist.active else None
    for x, y in data.batches(batch_size, shuffle=False, shard=shard):
        # float32 on the CPU: the accuracy reported is that of the model as the pages and explainers run it
        with autocast(device, amp and device.type != "cpu"):
            logits = model(x.to(device))
        y = y.to(device)
        loss_sum += nn.functional.cross_entropy(logits.float(), y, reduction="sum")
        pred = logits.argmax(1)
        correct += (pred == y).sum()
        n += len(y)
        if num_classes:
            confusion += torch.bincount(y * num_classes + pred, minlength=bins)
    if dist.active:
        summed = dist.sum([loss_sum, correct, n], device)
        loss, hits, n = summed[0], int(summed[1]), int(summed[2])
    else:  # read as they are (dist.sum works in float64, which MPS lacks)
        loss, hits = float(loss_sum), int(correct)
    out: dict[str, Any] = {"loss": loss / max(n, 1), "acc": hits / max(n, 1), "n": n}
    if num_classes:
        out["confusion"] = dist.sum_tensor(confusion).view(num_classes, num_classes).cpu().tolist()
    return out


def _evaluate_regression(
    model: nn.Module,
    data: TensorData | LoaderData,
    device: torch.device,
    amp: bool,
    batch_size: int,
    dist: DistContext,
    target: RegressionTarget,
    forecast: DatasetInfo | None = None,
) -> dict[str, Any]:
    sums = RegressionSums(device)
    steps = ForecastSums(forecast.forecast, device) if forecast is not None and forecast.forecast else None
    shard = Shard(dist.rank, dist.world_size, pad=False) if dist.active else None
    for x, y in data.batches(batch_size, shuffle=False, shard=shard):
        with autocast(device, amp and device.type != "cpu"):
            outputs = model(x.to(device))
        sums.add(outputs.float(), y.to(device))
        if steps is not None and forecast is not None:
            steps.add(forecast, x.to(device), outputs.float(), y.to(device))
    reduced = dist.sum(list(sums.sums), device) if dist.active else None
    n = int(reduced[0] if reduced is not None else float(sums.sums[0]))
    out: dict[str, Any] = {**sums.scores(target, reduced), "acc": None, "n": n}
    if steps is not None:
        out.update(steps.scores(dist.sum(list(steps.sums), device) if dist.active else None))
    return out


@dataclass
class Interval:
    """Sums of the training loss and hits over the steps since the last step record (epochs do not reset it)."""

    loss_sum: torch.Tensor | float = 0.0  # tensors stay on the device: no extra synchronisation per step
    correct: torch.Tensor | int = 0
    seen: int = 0
    steps: int = 0

    def add(self, loss_sum: torch.Tensor, correct: torch.Tensor, seen: int) -> None:
        self.loss_sum += loss_sum
        self.correct += correct
        self.seen += seen
        self.steps += 1

    def means(self, dist: DistContext = SINGLE, device: torch.device | None = None) -> tuple[float, float, int]:
        """(mean loss, accuracy, steps) over every rank's samples, and a fresh start for the next interval."""
        sums = [float(self.loss_sum), float(self.correct), float(self.seen)]
        if dist.active:
            sums = dist.sum([self.loss_sum, self.correct, self.seen], device or torch.device("cpu"))
        loss_sum, correct, seen = sums
        out = (loss_sum / max(seen, 1), correct / max(seen, 1), self.steps)
        self.loss_sum, self.correct, self.seen, self.steps = 0.0, 0, 0, 0
        return out
