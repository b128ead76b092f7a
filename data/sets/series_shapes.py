"""`series_shapes` and `series_shapes_mv`: generated time series whose class is set by a short pattern at a random
time, with the pattern's time steps as ground truth (`SeriesSplit.windows`), as `shapes` is for images.

Each series is 128 steps of background (a smooth random walk plus white noise, so a flat threshold cannot find the
pattern) with one pattern of 16 to 24 steps added at a random start: a `bump` (a raised Hann window), a `dip` (the
same, negative) or a `burst` (a sine of period 4 to 6 steps under a Hann envelope: no mean change, only energy at a
frequency). `series_shapes_mv` has 3 channels of independent background and the pattern in one channel drawn at
random, so a map has to find the time and the channel. Every split is drawn from its own fixed seed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from xaidash.data.modalities.series import channel_stats
from xaidash.data.registry import DatasetInfo, Loader, SeriesSplit, SplitName, register
from xaidash.data.sets._tables import TableSource

CLASSES = ("bump", "dip", "burst")
STEPS = 128
MIN_WIDTH, MAX_WIDTH = 16, 24
AMPLITUDE = (1.2, 2.0)  # the pattern's peak
NOISE = 0.35  # white noise std
LEVEL = 1.0  # std of each series' level: a random offset, so a series' sum does not tell a bump from a dip
WALK = 0.05  # std of the random walk's steps before smoothing
SMOOTH = 9  # steps of the moving average that makes the walk smooth
SIZES = {"train": 900, "test": 300}
SEEDS = {"series_shapes": (20261127, 20261128), "series_shapes_mv": (20261129, 20261130)}  # (train, test)


@dataclass(frozen=True)
class Drawn:
    """A generated split and its parts: `series` = `background` + `patterns` (N, C, T); the pattern's channel and
    its steps per series."""

    series: np.ndarray
    labels: np.ndarray
    background: np.ndarray
    patterns: np.ndarray
    channels: np.ndarray
    windows: list[list[int]]


def _background(rng: np.random.Generator, n: int, channels: int) -> np.ndarray:
    """A smooth random walk around a random level plus white noise, (N, C, T)."""
    steps = rng.normal(0.0, WALK, size=(n, channels, STEPS + SMOOTH - 1))
    walk = np.cumsum(steps, axis=-1)
    sums = np.concatenate([np.zeros((n, channels, 1)), np.cumsum(walk, axis=-1)], axis=-1)
    smooth = (sums[..., SMOOTH:] - sums[..., :-SMOOTH]) / SMOOTH  # the moving average over SMOOTH steps
    smooth += rng.normal(0.0, LEVEL, size=(n, channels, 1)) - smooth.mean(axis=-1, keepdims=True)
    return smooth + rng.normal(0.0, NOISE, size=(n, channels, STEPS))


def _pattern(label: int, width: int, amplitude: float, period: float, phase: float) -> np.ndarray:
    """The class's pattern over `width` steps: a Hann envelope, raised (bump), lowered (dip) or filled with a sine
    (burst)."""
    envelope = np.hanning(width + 2)[1:-1]  # no zero ends: every step of the window carries the pattern
    if CLASSES[label] == "burst":
        t = np.arange(width)
        return amplitude * envelope * np.sin(2 * np.pi * t / period + phase)
    return (amplitude if CLASSES[label] == "bump" else -amplitude) * envelope


def draw(n: int, seed: int, channels: int = 1) -> Drawn:
    """`n` series of `channels` channels, classes balanced, drawn from `seed`."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % len(CLASSES)).astype(np.int64)
    background = _background(rng, n, channels)
    widths = rng.integers(MIN_WIDTH, MAX_WIDTH + 1, size=n)
    starts = rng.integers(0, STEPS - widths + 1)
    amplitudes = rng.uniform(*AMPLITUDE, size=n)
    periods = rng.uniform(4.0, 6.0, size=n)
    phases = rng.uniform(0.0, 2 * np.pi, size=n)
    where = rng.integers(0, channels, size=n)
    patterns = np.zeros_like(background)
    windows = []
    for i in range(n):
        start, width = int(starts[i]), int(widths[i])
        patterns[i, where[i], start : start + width] = _pattern(
            int(labels[i]), width, float(amplitudes[i]), float(periods[i]), float(phases[i])
        )
        windows.append(list(range(start, start + width)))
    series = (background + patterns).astype(np.float32)
    return Drawn(series, labels, background.astype(np.float32), patterns.astype(np.float32), where, windows)


@dataclass(frozen=True)
class _Generated:
    name: str
    channels: int
    seeds: tuple[int, int]  # (train, test)
    description: str

    def drawn(self, split: SplitName) -> Drawn:
        return _drawn(self, split)

    def info(self) -> DatasetInfo:
        """Mean and std per channel measured on the training split."""
        mean, std = channel_stats(torch.from_numpy(self.drawn("train").series))
        return DatasetInfo(
            name=self.name,
            modality="series",
            classes=CLASSES,
            input_shape=(self.channels, STEPS),
            mean=tuple(mean),
            std=tuple(std),
            description=self.description,
            builtin=True,
            has_rationales=True,
            channel_names=("value",) if self.channels == 1 else tuple(f"channel {c}" for c in range(self.channels)),
        )

    def loader(self) -> Loader:
        def load(split: SplitName, root: Path, download: bool) -> SeriesSplit:
            drawn = self.drawn(split)  # copies: a caller editing the tensors cannot change the cache
            return SeriesSplit(
                series=torch.from_numpy(drawn.series.copy()),
                labels=torch.from_numpy(drawn.labels.copy()),
                windows=[list(w) for w in drawn.windows],
            )

        return load


@lru_cache(maxsize=4)
def _drawn(generated: _Generated, split: SplitName) -> Drawn:
    return draw(SIZES[split], generated.seeds[split == "test"], generated.channels)


_PATTERNS = (
    "a bump (a raised Hann window), a dip (a lowered one) or a burst (a sine of period 4-6 steps under a Hann "
    "envelope) of 16-24 steps and peak 1.2-2 at a random time, added to a smooth random walk around a random level "
    "(std 1) plus white noise (std 0.35)"
)
UNIVARIATE = _Generated(
    "series_shapes",
    1,
    SEEDS["series_shapes"],
    f"Generated series of 128 steps with known truth: the class is set by {_PATTERNS}; the pattern's steps are "
    "recorded, so pointing game and energy in the window check every map. 900 train / 300 test, classes balanced; "
    "works offline.",
)
MULTIVARIATE = _Generated(
    "series_shapes_mv",
    3,
    SEEDS["series_shapes_mv"],
    f"Generated series of 3 channels x 128 steps with known truth: the class is set by {_PATTERNS}, placed in one "
    "channel drawn at random (the other two are background only); the pattern's steps are recorded. 900 train / 300 "
    "test, classes balanced; works offline.",
)

for _generated in (UNIVARIATE, MULTIVARIATE):
    register(TableSource(_generated.name, _generated.info, _generated.loader()))
