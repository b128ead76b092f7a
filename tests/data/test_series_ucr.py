"""The UCR/UEA archives read through sktime: shapes and splits as the archive documents them, class names in the
order of each .ts file's @classLabel line, values equal to sktime's own, per-channel statistics of the training
split, JapaneseVowels padded with each series' last value, and the published 1-NN accuracies reproduced on the loaded
splits (so the labels and the values line up as the archive's authors had them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from xaidash.data.errors import DatasetUnavailable
from xaidash.data.modalities.series import channel_stats
from xaidash.data.registry import SeriesSplit, get_info, get_source, load_split
from xaidash.data.sets import ucr

sktime = pytest.importorskip("sktime")

# name: (train size, test size, (channels, steps))
SIZES = {
    "gunpoint": (50, 150, (1, 150)),
    "arrowhead": (36, 175, (1, 251)),
    "italy_power": (67, 1029, (1, 24)),
    "basic_motions": (40, 40, (6, 100)),
    "japanese_vowels": (270, 370, (12, 29)),
}
ARCHIVE_OF = {a.name: a for a in ucr.ARCHIVES}


def _ts_file(archive: ucr.Archive, split: str) -> Path:
    folder = {
        "gunpoint": "GunPoint",
        "arrowhead": "ArrowHead",
        "italy_power": "ItalyPowerDemand",
        "basic_motions": "BasicMotions",
        "japanese_vowels": "JapaneseVowels",
    }[archive.name]
    return Path(sktime.__file__).parent / "datasets" / "data" / folder / f"{folder}_{split}.ts"


@pytest.mark.parametrize("name", list(SIZES))
def test_splits_have_the_archives_sizes_and_shapes(name: str) -> None:
    n_train, n_test, shape = SIZES[name]
    info = get_info(name)
    assert info.modality == "series" and info.builtin and not info.has_rationales
    assert info.input_shape == shape and len(info.channel_names) == shape[0] == len(info.mean) == len(info.std)
    for split, n in (("train", n_train), ("test", n_test)):
        data = load_split(name, split)
        assert data.series.shape == (n, *shape) and data.series.dtype == torch.float32
        assert data.labels.shape == (n,) and data.labels.dtype == torch.int64
        assert torch.isfinite(data.series).all()
        assert set(data.labels.tolist()) == set(range(info.num_classes))


@pytest.mark.parametrize("name", list(SIZES))
def test_class_codes_follow_the_ts_header(name: str) -> None:
    """The codes are the @classLabel line's, in its order (BasicMotions' header capitalises what its rows do not)."""
    archive = ARCHIVE_OF[name]
    header = next(
        line for line in _ts_file(archive, "TRAIN").read_text().splitlines() if line.startswith("@classLabel")
    )
    assert tuple(c.lower() for c in header.split()[2:]) == archive.codes
    assert len(get_info(name).classes) == len(archive.codes)


def test_readable_class_names_as_the_archive_describes_them() -> None:
    assert get_info("gunpoint").classes == ("gun", "point")
    assert get_info("italy_power").classes == ("Oct-Mar", "Apr-Sep")
    assert get_info("arrowhead").classes == ("Avonlea", "Clovis", "Mix")
    assert get_info("basic_motions").classes == ("standing", "running", "walking", "badminton")
    assert get_info("japanese_vowels").classes == tuple(f"speaker {i}" for i in range(1, 10))
    assert get_info("basic_motions").channel_names[0] == "accelerometer x"
    assert get_info("basic_motions").channel_names[5] == "gyroscope z"
    assert len(get_info("japanese_vowels").channel_names) == 12
    assert get_info("gunpoint").channel_names == ("value",)


@pytest.mark.parametrize("name", ["gunpoint", "basic_motions"])
def test_values_and_labels_are_sktimes(name: str) -> None:
    archive = ARCHIVE_OF[name]
    values, codes = getattr(sktime.datasets, archive.loader)(split="TEST", return_type="numpy3D")
    data = load_split(name, "test")
    np.testing.assert_array_equal(data.series.numpy(), values.astype(np.float32))
    assert [archive.codes[i] for i in data.labels.tolist()] == [str(c) for c in codes]


def test_japanese_vowels_padded_with_the_last_value() -> None:
    frame, _ = sktime.datasets.load_japanese_vowels(split="TRAIN", return_type="nested_univ")
    data = load_split("japanese_vowels", "train")
    assert data.lengths is not None and data.lengths.dtype == torch.int64
    real = [len(frame.iat[i, 0]) for i in range(len(frame))]
    assert data.lengths.tolist() == real and min(real) == 7 and max(real) <= 29
    assert max(load_split("japanese_vowels", "test").lengths.tolist()) == 29  # the longest is in the test split
    for i in (0, int(np.argmin(real)), len(real) - 1):
        n = real[i]
        for c in range(12):
            cell = np.asarray(frame.iat[i, c], dtype=np.float32)
            np.testing.assert_array_equal(data.series[i, c, :n].numpy(), cell)
            assert (data.series[i, c, n:] == cell[-1]).all()
    assert torch.bincount(data.labels).tolist() == [30] * 9
    assert "padded" in get_info("japanese_vowels").description


@pytest.mark.parametrize("name", list(SIZES))
def test_channel_stats_are_the_training_splits(name: str) -> None:
    data, info = load_split(name, "train"), get_info(name)
    x = data.series.double()
    for c in range(x.shape[1]):
        if data.lengths is None:
            values = x[:, c].reshape(-1)
        else:
            values = torch.cat([x[i, c, : int(n)] for i, n in enumerate(data.lengths)])
        assert info.mean[c] == pytest.approx(float(values.mean()), abs=1e-6)
        assert info.std[c] == pytest.approx(float(values.std()), rel=1e-6)
    assert (info.mean, info.std) == tuple(tuple(v) for v in channel_stats(data.series, data.lengths))


def _one_nn(train: torch.Tensor, train_labels: torch.Tensor, test: torch.Tensor, test_labels: torch.Tensor) -> float:
    d = torch.cdist(test.flatten(1).double(), train.flatten(1).double())
    return float((train_labels[d.argmin(1)] == test_labels).double().mean())


@pytest.mark.parametrize(("name", "published"), [("gunpoint", 0.913), ("arrowhead", 0.800), ("italy_power", 0.955)])
def test_published_euclidean_1nn_accuracy(name: str, published: float) -> None:
    """The UCR archive's table (Dau et al. 2018) lists 1-NN Euclidean test errors 0.087, 0.200 and 0.045."""
    train, test = load_split(name, "train"), load_split(name, "test")
    assert round(_one_nn(train.series, train.labels, test.series, test.labels), 3) == published
    assert f"{published:.1%} with Euclidean" in get_info(name).description


def _dtw(a: np.ndarray, b: np.ndarray, a_lengths: np.ndarray, b_lengths: np.ndarray) -> np.ndarray:
    """Full-window DTW (squared differences summed over channels: the archives' dependent DTW) between every series
    of a (M, C, T) and b (K, C, S), over each series' real length: (M, K)."""
    steps = b.shape[-1]
    prev = np.full((len(a), len(b), steps + 1), np.inf)
    prev[:, :, 0] = 0.0
    out = np.full((len(a), len(b)), np.inf)
    for i in range(a.shape[-1]):
        cur = np.full_like(prev, np.inf)
        for j in range(steps):
            cost = ((a[:, None, :, i] - b[None, :, :, j]) ** 2).sum(-1)
            cur[:, :, j + 1] = cost + np.minimum(np.minimum(prev[:, :, j], prev[:, :, j + 1]), cur[:, :, j])
        ended = a_lengths == i + 1  # the series of `a` whose last real step this is
        out[ended] = cur[ended][:, np.arange(len(b)), b_lengths]
        prev = cur
    return out


def _lengths(split: SeriesSplit) -> np.ndarray:
    return np.full(len(split), split.series.shape[-1]) if split.lengths is None else split.lengths.numpy()


DTW = [  # published 1-NN DTW test accuracy (UCR archive, Dau et al. 2018: errors 0.093, 0.050, 0.297; UEA archive,
    # Bagnall et al. 2018: dependent DTW): the references the series models must beat
    pytest.param("gunpoint", 0.907),
    pytest.param("italy_power", 0.950),
    pytest.param("basic_motions", 0.975),
    pytest.param("arrowhead", 0.703, marks=pytest.mark.slow),
    pytest.param("japanese_vowels", 0.949, marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("name", "published"), DTW)
def test_published_dtw_1nn_accuracy(name: str, published: float) -> None:
    train, test = load_split(name, "train"), load_split(name, "test")
    d = _dtw(test.series.double().numpy(), train.series.double().numpy(), _lengths(test), _lengths(train))
    accuracy = float((train.labels.numpy()[d.argmin(1)] == test.labels.numpy()).mean())
    assert round(accuracy, 3) == published
    assert f"{published:.1%}" in get_info(name).description


def test_loaded_tensors_are_copies() -> None:
    load_split("gunpoint", "train").series.zero_()
    assert load_split("gunpoint", "train").series.abs().sum() > 0


def test_without_sktime_it_says_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    archive = ucr.Archive("nowhere", "load_gunpoint", ("1", "2"), ("a", "b"), (1, 150), "A test archive.")
    monkeypatch.setattr(ucr, "sktime_installed", lambda: False)
    info = ucr._info(archive)
    assert info.mean == () and "needs the Python package sktime" in info.description
    with pytest.raises(DatasetUnavailable, match="pip install sktime"):
        ucr.read(archive, "train")
    assert not get_source("gunpoint").is_available(Path("/nonexistent"))
