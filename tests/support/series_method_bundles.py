"""Small stand-in series models for the series method tests: a 1-D conv classifier with global average pooling
(its conv layers declared as `FeatureLayout("ncl")`, as `series_cnn` declares them), a GRU classifier (no conv
layers, `deeplift_ok=False`), and a model whose class 1 logit reads only a known window of steps (ground truth);
a `DatasetInfo` of modality "series" for them, random series in raw units, and the `MethodContext` a method's
compute gets (built here as `explain` builds it, so the computes are tested without the series adapter)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.explainers.registry import MethodContext, MethodOutput, get_method
from xaidash.models import ModelBundle
from xaidash.models.registry import FeatureLayout, ModelSpec

CLASSES = ("bump", "dip", "burst")


def series_info(channels: int = 1, steps: int = 64) -> DatasetInfo:
    """A series data set's info: per-channel training mean and std in raw units (not 0 and 1, so preparing matters)."""
    return DatasetInfo(
        name=f"standin_{channels}x{steps}",
        modality="series",
        classes=CLASSES,
        input_shape=(channels, steps),
        mean=tuple(2.0 + c for c in range(channels)),
        std=tuple(0.5 + 0.25 * c for c in range(channels)),
        channel_names=("value",) if channels == 1 else tuple(f"axis {c}" for c in range(channels)),
    )


class TinyConv(nn.Module):
    def __init__(self, channels: int, classes: int = len(CLASSES)):
        super().__init__()
        self.conv1 = nn.Conv1d(channels, 6, 5, padding=2)
        self.act1 = nn.ReLU()
        self.conv2 = nn.Conv1d(6, 8, 5, padding=2, stride=2)
        self.act2 = nn.ReLU()
        self.fc = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.act2(self.conv2(self.act1(self.conv1(x)))).mean(2))


class TinyGRU(nn.Module):
    def __init__(self, channels: int, classes: int = len(CLASSES)):
        super().__init__()
        self.rnn = nn.GRU(channels, 8, batch_first=True)
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x.transpose(1, 2))
        return self.head(out[:, -1])


class WindowModel(nn.Module):
    """Class 1's logit is the energy of the steps in [start, stop) of channel 0; the others are 0 and 1."""

    def __init__(self, start: int, stop: int):
        super().__init__()
        self.start, self.stop = start, stop

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        energy = x[:, 0, self.start : self.stop].pow(2).sum(1)
        zeros = torch.zeros_like(energy)
        return torch.stack([zeros, energy, zeros + 1.0], 1)


class TinyAttention(nn.Module):
    """One token per step, one attention layer of two heads, mean-pooled: what series_transformer exposes."""

    def __init__(self, channels: int, classes: int = len(CLASSES), width: int = 8):
        super().__init__()
        self.embed = nn.Conv1d(channels, width, 1)
        self.attn = nn.MultiheadAttention(width, 2, batch_first=True)
        self.head = nn.Linear(width, classes)

    def forward_with_attention(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        tokens = self.embed(x).transpose(1, 2)
        out, weights = self.attn(tokens, tokens, tokens, need_weights=True, average_attn_weights=False)
        return self.head(out.mean(1)), [weights]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with_attention(x)[0]


CONV_LAYERS = ("act1", "act2")


def conv_spec() -> ModelSpec:
    return ModelSpec(
        name="standin_series_cnn",
        modality="series",
        build=lambda info: TinyConv(info.input_shape[0]),
        last_conv="act2",
        conv_layers=CONV_LAYERS,
        gap_classifier="fc",
        feature_layouts={p: FeatureLayout("ncl") for p in CONV_LAYERS},
    )


def gru_spec() -> ModelSpec:
    return ModelSpec(
        name="standin_series_gru",
        modality="series",
        build=lambda info: TinyGRU(info.input_shape[0]),
        recurrent="rnn",
        deeplift_ok=False,
    )


def attention_spec() -> ModelSpec:
    return ModelSpec(
        name="standin_series_transformer",
        modality="series",
        build=lambda info: TinyAttention(info.input_shape[0]),
        attention=("attn",),
        deeplift_ok=False,
    )


def window_spec(start: int, stop: int) -> ModelSpec:
    return ModelSpec(name="standin_window", modality="series", build=lambda info: WindowModel(start, stop))


def bundle_of(spec: ModelSpec, info: DatasetInfo, seed: int = 0) -> ModelBundle:
    torch.manual_seed(seed)
    return ModelBundle(spec.build(info).eval(), spec, info, torch.device("cpu"))


def raw_series(info: DatasetInfo, n: int, seed: int = 1) -> torch.Tensor:
    """(n, C, T) random series in the data set's raw units: a smooth wave plus noise, per channel."""
    gen = torch.Generator().manual_seed(seed)
    channels, steps = info.input_shape
    t = torch.linspace(0, 6.28, steps)
    phase = torch.rand(n, channels, 1, generator=gen) * 6.28
    wave = torch.sin(t + phase) + 0.3 * torch.randn(n, channels, steps, generator=gen)
    mean = torch.tensor(info.mean).view(1, -1, 1)
    std = torch.tensor(info.std).view(1, -1, 1)
    return mean + std * wave


def context(bundle: ModelBundle, raw: torch.Tensor, targets: Any = None, *, batch_size: int = 256) -> MethodContext:
    x = bundle.prepare(raw)
    with torch.no_grad():
        t = bundle.logits(x).argmax(1) if targets is None else torch.as_tensor(targets).long().expand(len(x))
    return MethodContext(bundle=bundle, x=x, targets=t.clone(), raw=raw, batch_size=batch_size, seed=0)


def run(method: str, ctx: MethodContext, **params: Any) -> MethodOutput:
    """A series method's compute on `ctx` with its params resolved and checked, as `explain` calls it."""
    spec = get_method(method, "series")
    spec.check(ctx.bundle)
    return spec.compute(ctx, spec.resolve_for(ctx.bundle, params))
