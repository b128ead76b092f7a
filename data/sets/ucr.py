"""Real time series from the UCR/UEA archives that ship inside sktime's wheel, read through sktime's own loaders
(offline: nothing is downloaded). Univariate: `gunpoint`, `arrowhead`, `italy_power`; multivariate: `basic_motions`
(a smart watch's accelerometer and gyroscope) and `japanese_vowels` (12 LPC coefficients, 7 to 29 frames: padded to
the longest by repeating each series' last value, real lengths kept in `SeriesSplit.lengths`). Splits are the
archive's own TRAIN and TEST files; class names are the ones the archive's descriptions give its label codes."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from xaidash.data.errors import DatasetUnavailable
from xaidash.data.modalities.series import channel_stats
from xaidash.data.registry import DatasetInfo, Loader, SeriesSplit, SplitName, register
from xaidash.data.sets._tables import TableSource

MISSING = "needs the Python package sktime, whose wheel ships this archive: pip install sktime"


def sktime_installed() -> bool:
    return importlib.util.find_spec("sktime") is not None


@dataclass(frozen=True)
class Archive:
    """One archive problem: the sktime loader that reads it, its label codes in the order of `classes` (as the .ts
    file's @classLabel line lists them), and what a model and a reader need to know about it."""

    name: str
    loader: str  # the function in sktime.datasets
    codes: tuple[str, ...]
    classes: tuple[str, ...]
    input_shape: tuple[int, int]  # (channels, steps), the longest series for varying lengths
    description: str
    channel_names: tuple[str, ...] = ("value",)
    step_name: str = "step"
    url: str = ""
    varying: bool = False  # series of different lengths: padded to input_shape[1] by repeating the last value


def _nested_to_padded(frame: object, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """sktime's nested frame (one pd.Series per cell, a row per series, a column per channel) as (N, C, steps): each
    series padded to `steps` by repeating its last value; and each series' real length."""
    import pandas as pd

    assert isinstance(frame, pd.DataFrame)
    n, channels = frame.shape
    out = np.empty((n, channels, steps), dtype=np.float32)
    lengths = np.empty(n, dtype=np.int64)
    for i in range(n):
        cells = [np.asarray(frame.iat[i, c], dtype=np.float32) for c in range(channels)]
        length = len(cells[0])
        lengths[i] = length
        for c, values in enumerate(cells):
            out[i, c, :length] = values
            out[i, c, length:] = values[-1]
    return out, lengths


@lru_cache(maxsize=16)
def read(archive: Archive, split: SplitName) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(series (N, C, T) float32, labels (N,) int64 class indices, lengths (N,) or None) of one archive split."""
    if not sktime_installed():
        raise DatasetUnavailable(f"{archive.name} {MISSING}.")
    # through importlib: sktime ships no type information, and the loader is looked up by name anyway
    load = getattr(importlib.import_module("sktime.datasets"), archive.loader)
    if archive.varying:
        frame, codes = load(split=split.upper(), return_type="nested_univ")
        series, lengths = _nested_to_padded(frame, archive.input_shape[1])
    else:
        values, codes = load(split=split.upper(), return_type="numpy3D")
        series, lengths = np.ascontiguousarray(values, dtype=np.float32), None
    index = {code: i for i, code in enumerate(archive.codes)}
    labels = np.asarray([index[str(code)] for code in codes], dtype=np.int64)
    return series, labels, lengths


def _loader(archive: Archive) -> Loader:
    def load(split: SplitName, root: Path, download: bool) -> SeriesSplit:
        series, labels, lengths = read(archive, split)  # copies: a caller editing them cannot change the cache
        return SeriesSplit(
            series=torch.from_numpy(series.copy()),
            labels=torch.from_numpy(labels.copy()),
            lengths=None if lengths is None else torch.from_numpy(lengths.copy()),
        )

    return load


def _info(archive: Archive) -> DatasetInfo:
    """The archive's info; its per-channel mean and std are measured on its TRAIN split (over the real steps of a
    padded series). Without sktime the info still lists it, saying what it needs."""
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    description = archive.description
    if sktime_installed():
        series, _, lengths = read(archive, "train")
        m, s = channel_stats(torch.from_numpy(series), None if lengths is None else torch.from_numpy(lengths))
        mean, std = tuple(m), tuple(s)
    else:
        description = f"{description} Unavailable here: it {MISSING}."
    return DatasetInfo(
        name=archive.name,
        modality="series",
        classes=archive.classes,
        input_shape=archive.input_shape,
        mean=mean,
        std=std,
        description=description,
        builtin=True,
        channel_names=archive.channel_names,
        step_name=archive.step_name,
        source_url=archive.url,
    )


def _register(archive: Archive) -> None:
    register(TableSource(archive.name, lambda: _info(archive), _loader(archive), lambda root: sktime_installed()))


URL = "https://www.timeseriesclassification.com/description.php?Dataset="

GUNPOINT = Archive(
    "gunpoint",
    "load_gunpoint",
    ("1", "2"),
    ("gun", "point"),
    (1, 150),
    "UCR GunPoint: the x position of an actor's right hand over 150 video frames, drawing a replica gun from a hip "
    "holster (gun) or pointing a finger (point) at a target; 50 train / 150 test (the archive's split). Published "
    "1-NN test accuracy: 90.7% with DTW, 91.3% with Euclidean distance (UCR archive, Dau et al. 2018); convolutional "
    "networks reach about 100%. Shipped with sktime; works offline.",
    step_name="frame",
    url=URL + "GunPoint",
)
ARROWHEAD = Archive(
    "arrowhead",
    "load_arrow_head",
    ("0", "1", "2"),
    ("Avonlea", "Clovis", "Mix"),
    (1, 251),
    "UCR ArrowHead: outlines of projectile points (arrowheads) turned into a series of 251 angles along the outline; "
    "three classes of shape (Avonlea, Clovis, Mix), told apart by the presence and place of a notch; 36 train / 175 "
    "test (the archive's split). Published 1-NN test accuracy: 70.3% with DTW, 80.0% with Euclidean distance (UCR "
    "archive, Dau et al. 2018). Shipped with sktime; works offline.",
    step_name="point",
    url=URL + "ArrowHead",
)
ITALY_POWER = Archive(
    "italy_power",
    "load_italy_power_demand",
    ("1", "2"),
    ("Oct-Mar", "Apr-Sep"),
    (1, 24),
    "UCR ItalyPowerDemand: Italy's electrical power demand over the 24 hours of a day; is the day between October "
    "and March or between April and September; 67 train / 1,029 test (the archive's split). Published 1-NN test "
    "accuracy: 95.0% with DTW, 95.5% with Euclidean distance (UCR archive, Dau et al. 2018). Shipped with sktime; "
    "works offline.",
    step_name="hour",
    url=URL + "ItalyPowerDemand",
)
BASIC_MOTIONS = Archive(
    "basic_motions",
    "load_basic_motions",
    ("standing", "running", "walking", "badminton"),
    ("standing", "running", "walking", "badminton"),
    (6, 100),
    "UEA BasicMotions: a smart watch's 3-D accelerometer and 3-D gyroscope (6 channels) over 10 seconds sampled "
    "every 0.1 s (100 steps) while four students stood, walked, ran or played badminton; 40 train / 40 test (the "
    "archive's split). 1-NN with dependent DTW reaches 97.5% on the test split (UEA archive, Bagnall et al. 2018). "
    "Shipped with sktime; works offline.",
    channel_names=(
        "accelerometer x",
        "accelerometer y",
        "accelerometer z",
        "gyroscope x",
        "gyroscope y",
        "gyroscope z",
    ),
    step_name="sample (0.1 s)",
    url=URL + "BasicMotions",
)
JAPANESE_VOWELS = Archive(
    "japanese_vowels",
    "load_japanese_vowels",
    tuple(str(i) for i in range(1, 10)),
    tuple(f"speaker {i}" for i in range(1, 10)),
    (12, 29),
    "UEA JapaneseVowels: 9 Japanese men saying the vowels 'ae'; each utterance is 12 LPC cepstrum coefficients "
    "(12 channels) over 7 to 29 analysis frames; which speaker is it. The series vary in length: each is padded to "
    "29 frames by repeating its last frame, and its real length is kept. 270 train (30 per speaker) / 370 test (the "
    "archive's split). 1-NN with dependent DTW over the real lengths reaches 94.9% on the test split (UEA archive, "
    "Bagnall et al. 2018). Shipped with sktime; works offline.",
    channel_names=tuple(f"LPC {i}" for i in range(1, 13)),
    step_name="frame",
    url=URL + "JapaneseVowels",
    varying=True,
)
ARCHIVES = (GUNPOINT, ARROWHEAD, ITALY_POWER, BASIC_MOTIONS, JAPANESE_VOWELS)

for _archive in ARCHIVES:
    _register(_archive)
