"""Time series: a raw series is a float tensor (C, T), C channels (1 for a univariate series) of T time steps, each
channel in its own units; the model reads it standardised per channel with the training split's mean and std
(`DatasetInfo.mean` / `std`), as (N, C, T). A map scores time steps: a method's output over (C, T) is summed over
the channels (the per-channel maps are kept for multivariate heatmaps)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from xaidash.data.errors import ExplainError
from xaidash.data.formatting import measured_text
from xaidash.data.modalities.base import MODALITIES, GroundTruth, Modality, cut
from xaidash.data.registry import DatasetInfo, SeriesSplit, Split


def as_series(raw: Any) -> torch.Tensor:
    """One raw series as a (C, T) float32 tensor: a 1-D sequence of values is one channel."""
    x = torch.as_tensor(raw, dtype=torch.float32)
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2:
        raise ExplainError(f"A series is (channels, steps); got shape {tuple(x.shape)}.")
    return x


def resample(series: torch.Tensor, steps: int) -> torch.Tensor:
    """(C, T) -> (C, steps) by linear interpolation over time (the series' first and last values kept)."""
    if series.shape[-1] == steps:
        return series
    if series.shape[-1] < 2:
        return series[..., :1].expand(*series.shape[:-1], steps).clone()
    out = torch.nn.functional.interpolate(series[None], size=steps, mode="linear", align_corners=True)
    return out[0]


def channel_stats(series: torch.Tensor, lengths: torch.Tensor | None = None) -> tuple[list[float], list[float]]:
    """Per channel mean and std of (N, C, T) raw series (over the real steps when `lengths` says where padding starts);
    a constant channel gets std 1 so standardising leaves it at zero."""
    x = series.double()
    if lengths is not None:
        keep = torch.arange(x.shape[-1])[None, :] < lengths[:, None]
        values = [x[:, c][keep] for c in range(x.shape[1])]
    else:
        values = [x[:, c].reshape(-1) for c in range(x.shape[1])]
    mean = [float(v.mean()) for v in values]
    std = [float(v.std()) if len(v) > 1 and float(v.std()) > 1e-12 else 1.0 for v in values]
    return mean, std


@dataclass(frozen=True)
class SeriesModality(Modality):
    def batch(self, raws: Sequence[Any]) -> torch.Tensor:
        if not raws:
            raise ExplainError("No series to explain: pick at least one.")
        series = [as_series(r) for r in raws]
        shapes = {tuple(s.shape) for s in series}
        if len(shapes) > 1:
            raise ExplainError(f"Series of different shapes cannot share a batch: {sorted(shapes)}.")
        return torch.stack(series)

    def as_batch(self, inputs: Any) -> torch.Tensor:
        x = torch.as_tensor(inputs, dtype=torch.float32)
        return x.reshape(1, 1, -1) if x.dim() == 1 else (x.unsqueeze(0) if x.dim() == 2 else x)

    def prepare(self, inputs: Any, info: DatasetInfo, tokenizer: Any, device: torch.device) -> torch.Tensor:
        x = self.as_batch(inputs).to(device)
        channels, steps = info.input_shape
        if x.dim() != 3 or x.shape[1] != channels or x.shape[2] != steps:
            raise ExplainError(
                f"A series of {info.name} has {channels} channel(s) of {steps} steps; got shape {tuple(x.shape[1:])}."
            )
        mean = torch.tensor(info.mean or [0.0] * channels, dtype=x.dtype, device=device).view(1, -1, 1)
        std = torch.tensor(info.std or [1.0] * channels, dtype=x.dtype, device=device).view(1, -1, 1)
        return (x - mean) / std

    def example(self, info: DatasetInfo, tokenizer: Any, n: int = 1) -> torch.Tensor:
        """Flat series at each channel's training mean."""
        channels, steps = info.input_shape
        mean = torch.tensor(info.mean or [0.0] * channels, dtype=torch.float32).view(1, -1, 1)
        return mean.expand(n, channels, steps).clone()

    def describe(self, input_shape: Sequence[int]) -> str:
        if len(input_shape) != 2:
            return "time series"
        channels, steps = input_shape
        return f"series of {steps} steps" if channels == 1 else f"series of {channels} channels x {steps} steps"

    def one_line(self, raw: Any, info: DatasetInfo, chars: int = 200) -> str:
        """'150 steps: 0.12, 0.15, …' (a multivariate series: its channels and steps)."""
        x = as_series(raw)
        head = ", ".join(measured_text(float(v)) for v in x[0, :8])
        what = f"{x.shape[1]} steps" if x.shape[0] == 1 else f"{x.shape[0]} channels x {x.shape[1]} steps"
        return cut(f"{what}: {head}{', …' if x.shape[1] > 8 else ''}", chars)

    def sparkline(self, raw: Any, points: int = 200) -> list[float] | None:
        """The first channel, resampled to at most `points` steps."""
        x = as_series(raw)[:1]
        return [float(v) for v in resample(x, min(points, x.shape[1]))[0]]

    def same_inputs(self, a: Sequence[int], b: Sequence[int]) -> bool:
        return tuple(a) == tuple(b)

    def item(self, split: Split, index: int) -> torch.Tensor:
        assert isinstance(split, SeriesSplit)
        return split.series[index].float()

    def items(self, split: Split, indices: Sequence[int]) -> torch.Tensor:
        assert isinstance(split, SeriesSplit)
        return split.series[torch.as_tensor([int(i) for i in indices], dtype=torch.long)].float()

    def ground_truth(self, split: Split, indices: Sequence[int]) -> GroundTruth:
        """The steps that set each label (a generated pattern's window), as the rationales the pointing game and
        energy read (one index per time step, as a text's are per word)."""
        if not isinstance(split, SeriesSplit) or not split.windows:
            return GroundTruth()
        return GroundTruth(rationales=[list(split.windows[int(i)]) for i in indices])

    def check_split(self, split: Split, dataset: str) -> None:
        if not isinstance(split, SeriesSplit):
            raise self.wrong_split(dataset)


SERIES = MODALITIES.register(
    SeriesModality(
        id="series",
        label="series",
        unit="step",
        units="steps",
        sample="series",
        local=True,
        generic_training=(("epochs", 100), ("batch_size", 16), ("lr", 1e-3), ("weight_decay", 1e-4)),
        sources=("values", "rows file"),  # typed comma-separated values; a CSV file of series, one per row
        upload_types=("csv",),
    )
)
