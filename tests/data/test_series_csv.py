"""Your own series, `csv:<path>?modality=series&...`: wide (one series per row) and long (one row per step) files
read exactly as pandas reads them, shorter series padded with their last value, the stratified split of the tables,
and every bad file refused in one line with nothing written beside it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import xaidash.data  # noqa: F401  (registers every data set)
from xaidash.dashboard.cli import main
from xaidash.data.errors import DatasetError
from xaidash.data.modalities.series import SERIES, channel_stats
from xaidash.data.registry import SeriesSplit, get_source
from xaidash.data.sets._common import stratified_indices
from xaidash.models.runs.store import runs_root

CLASSES = ("rise", "fall", "flat")


def _wide(path: Path, n: int = 30, steps: int = 12, short: int = 0, sep: str = ",") -> Path:
    """id, label, then `steps` columns t0..: rise / fall / flat series with noise; the first `short` series end
    early (their last cells empty)."""
    rng = np.random.default_rng(4)
    lines = [sep.join(["id", "label", *(f"t{k}" for k in range(steps))])]
    for i in range(n):
        slope = (1.0, -1.0, 0.0)[i % 3]
        values = [f"{slope * k + rng.normal(0, 0.3):.5f}" for k in range(steps)]
        if i < short:
            values[steps - 3 - i % 4 :] = [""] * (3 + i % 4)
        lines.append(sep.join([f"s{i:02d}", CLASSES[i % 3], *values]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _long(path: Path, n: int = 24, dates: bool = False) -> Path:
    """sensor, at (shuffled times; numbers or ISO dates), temp and hum (two channels), label, and a note column;
    series of 8 to 11 steps."""
    rng = np.random.default_rng(6)
    rows = []
    for i in range(n):
        for k in range(8 + i % 4):
            at = f"2024-03-{k + 1:02d}" if dates else str(10 * k + 5)
            rows.append(f"m{i},{at},{rng.normal(20 + k * (i % 2), 1):.4f},{rng.normal(50, 5):.3f},{'ab'[i % 2]},ok")
    order = rng.permutation(len(rows))
    lines = ["sensor,at,temp,hum,label,note", *(rows[j] for j in order)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _splits(name: str) -> tuple[object, dict[str, SeriesSplit]]:
    source = get_source(name)
    splits = {}
    for split in ("train", "test"):
        data = source.load(split)
        assert isinstance(data, SeriesSplit)
        SERIES.check_split(data, name)
        splits[split] = data
    return source, splits


@pytest.mark.parametrize("sep", [",", ";", "\t"])
def test_wide_file_read_exactly_with_the_stratified_split(tmp_path: Path, sep: str) -> None:
    path = _wide(tmp_path / "w.csv", sep=sep)
    name = f"csv:{path}?modality=series&label=label&id=id"
    source, splits = _splits(name)
    info = source.info
    assert info.name == name and info.modality == "series" and info.input_shape == (1, 12)
    assert info.classes == ("fall", "flat", "rise") and info.channel_names == ("value",)
    frame = pd.read_csv(path, sep=sep)
    codes = frame["label"].map({c: i for i, c in enumerate(info.classes)}).to_numpy()
    for split, data in splits.items():
        idx = stratified_indices(codes, split)
        assert data.ids == frame["id"].iloc[idx].tolist() and data.lengths is None
        expected = frame.iloc[idx, 2:].to_numpy(dtype=np.float32)[:, None, :]
        np.testing.assert_array_equal(data.series.numpy(), expected)
        assert data.labels.tolist() == codes[idx].tolist()
    train = frame.iloc[stratified_indices(codes, "train"), 2:].to_numpy(dtype=np.float64)
    assert info.mean[0] == pytest.approx(train.mean()) and info.std[0] == pytest.approx(train.std(ddof=1))
    assert "24 train / 6 test" in info.description


def test_wide_shorter_series_are_padded_with_their_last_value(tmp_path: Path) -> None:
    path = _wide(tmp_path / "short.csv", short=5)
    source, splits = _splits(f"csv:{path}?modality=series&label=label&id=id")
    frame = pd.read_csv(path)
    by_id = {row["id"]: row.iloc[2:].dropna().to_numpy(dtype=np.float32) for _, row in frame.iterrows()}
    seen = 0
    for data in splits.values():
        assert data.lengths is not None and data.ids is not None
        for i, ident in enumerate(data.ids):
            real = by_id[ident]
            assert int(data.lengths[i]) == len(real)
            np.testing.assert_array_equal(data.series[i, 0, : len(real)].numpy(), real)
            assert (data.series[i, 0, len(real) :] == real[-1]).all()
            seen += len(real) < 12
    assert seen == 5
    assert "5 series are shorter (6 to 9 steps): each is padded to 12 steps by repeating its last value" in (
        source.info.description
    )
    train = splits["train"]
    assert source.info.mean == tuple(channel_stats(train.series, train.lengths)[0])  # padding left out


@pytest.mark.parametrize("dates", [False, True])
def test_long_file_one_series_per_id_ordered_by_time(tmp_path: Path, dates: bool) -> None:
    path = _long(tmp_path / "long.csv", dates=dates)
    name = f"csv:{path}?modality=series&label=label&id=sensor&time=at&value=temp,hum"
    with pytest.warns(UserWarning, match="Columns left out .*note"):
        source, splits = _splits(name)
    info = source.info
    assert info.input_shape == (2, 11) and info.channel_names == ("temp", "hum") and info.step_name == "at"
    frame = pd.read_csv(path)
    frame["order"] = pd.to_datetime(frame["at"]) if dates else frame["at"]
    for data in splits.values():
        assert data.ids is not None and data.lengths is not None
        for i, ident in enumerate(data.ids):
            rows = frame[frame["sensor"] == ident].sort_values("order")
            values = rows[["temp", "hum"]].to_numpy(dtype=np.float32).T
            n = values.shape[1]
            assert int(data.lengths[i]) == n and info.classes[int(data.labels[i])] == rows["label"].iloc[0]
            np.testing.assert_array_equal(data.series[i, :, :n].numpy(), values)
            assert torch.equal(data.series[i, :, n:], data.series[i, :, n - 1 : n].expand(2, 11 - n))
    assert sorted(splits["train"].ids + splits["test"].ids) == sorted(frame["sensor"].unique())
    assert "long: one row per step, ordered by 'at'" in info.description


GOOD_WIDE = "y,a,b,c\n" + "".join(f"{'pq'[i % 2]},{i},{i + 1},{i + 2}\n" for i in range(10))
LONG_HEAD = "id,t,v,y\n"


def _long_rows(n: int = 10) -> str:
    return "".join(f"s{i},{k},{i + k},{'pq'[i % 2]}\n" for i in range(n) for k in range(3))


S = "modality=series&label=y"
L = f"{S}&id=id&time=t&value=v"
# (file name, content, options, what the one line says)
BAD = [
    (
        "w.csv",
        GOOD_WIDE,
        "modality=table&label=y",
        r"modality='table': csv: reads modality=series; a table takes target=",
    ),
    ("w.csv", GOOD_WIDE, "modality=series", r"no label column"),
    ("w.csv", GOOD_WIDE, f"{S}&colour=red", r"Unknown option\(s\) colour"),
    ("w.csv", GOOD_WIDE, "modality=series&label=z", r"has no column 'z' \(given in label=\); its columns are: y, a, b"),
    ("w.csv", GOOD_WIDE, f"{S}&time=a", r"needs both time= .* and value="),
    ("w.csv", GOOD_WIDE, f"{S}&time=a&value=b", r"needs id="),
    ("w.csv", GOOD_WIDE, f"{S}&id=y", r"Column 'y' is given for two roles"),
    (  # a gap in the middle of a row: steps would shift
        "gap.csv",
        GOOD_WIDE + "p,1,,3\n",
        S,
        r"line 12, column 'b' is missing before later values; only a series' last cells may be empty",
    ),
    ("nan.csv", GOOD_WIDE + "q,NaN,,NA\n", S, r"line 12 holds no value \(NaN or empty only\)"),
    ("one_step.csv", GOOD_WIDE + "q,4,,\n", S, r"line 12 is a series of one step; a series needs at least 2"),
    ("one_col.csv", "y,a\n" + "p,1\nq,2\n" * 5, S, r"1 column\(s\) besides the label: .* at least 2 steps"),
    ("word.csv", GOOD_WIDE + "p,1,two,3\n", S, r"line 12, column 'b': 'two' is not a number"),
    ("inf.csv", GOOD_WIDE + "p,1,inf,3\n", S, r"line 12, column 'b': 'inf' is not a number"),
    ("single.csv", "y,a,b\n" + "p,1,2\n" * 10, S, r"label 'y' has one value \('p'\) for every series"),
    ("rare.csv", GOOD_WIDE + "r,1,2,3\n", S, r"class 'r' of the label 'y' has 1 series"),
    ("nolabel.csv", GOOD_WIDE + ",1,2,3\n", S, r"the label 'y' is missing on line 12"),
    ("ragged.csv", GOOD_WIDE + "p,1,2\n", S, r"line 12 has 3 fields, the header 4"),
    ("empty.csv", "", S, r"empty\.csv is empty"),
    ("latin.csv", "y,a,b\ncaf\xe9,1,2\n".encode("latin-1"), S, r"not UTF-8 text: byte 0xe9 at offset 9"),
    (  # long: the label changes within one id
        "changes.csv",
        LONG_HEAD + _long_rows() + "s0,9,1,q\n",
        L,
        r"the label of series 's0' changes from 'p' \(line 2\) to 'q' \(line 32\); a series has one class",
    ),
    ("dup_time.csv", LONG_HEAD + _long_rows() + "s3,1,5,q\n", L, r"series 's3' has two rows at the same time"),
    ("long_one.csv", LONG_HEAD + _long_rows() + "s99,0,1,p\n", L, r"series 's99' \(line 32\) is a series of one step"),
    ("long_nan.csv", LONG_HEAD + _long_rows() + "s99,0,,p\ns99,1,NaN,p\n", L, r"'s99' has no value in column 'v'"),
    (
        "long_gap.csv",
        LONG_HEAD + _long_rows() + "s99,0,1,p\ns99,1,,p\n",
        L,
        r"line 33, column 'v': the value is missing",
    ),
    (
        "long_word.csv",
        LONG_HEAD + _long_rows() + "s99,0,1,p\ns99,1,x,p\n",
        L,
        r"line 33, column 'v': 'x' is not a number",
    ),
    ("long_time.csv", LONG_HEAD + _long_rows() + "s99,soon,1,p\n", L, r"line 32, column 't': 'soon' is neither a num"),
    ("long_notime.csv", LONG_HEAD + _long_rows() + "s99,,1,p\n", L, r"line 32 has no time in column 't'"),
    ("long_noid.csv", LONG_HEAD + _long_rows() + ",3,1,p\n", L, r"line 32 has no id in column 'id'"),
    ("long_cols.csv", LONG_HEAD + _long_rows(), f"{S}&id=id&time=t&value=v,w", r"no column 'w' \(given in value=\)"),
]


@pytest.mark.parametrize(("file", "content", "options", "says"), BAD, ids=[f"{b[0]}?{b[2]}" for b in BAD])
def test_a_bad_file_is_one_line_and_nothing_is_written(tmp_path: Path, capsys, file, content, options, says) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / file
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    before = sorted(p.name for p in folder.rglob("*"))
    with pytest.raises(DatasetError, match=says) as refused:
        get_source(f"csv:{path}?{options}")
    assert "\n" not in str(refused.value)
    # The command line says the same in one line and starts no run (the file is refused before any model meets it).
    code = main(["train", "--dataset", f"csv:{path}?{options}", "--model", "tabular_mlp", "--epochs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert str(refused.value) in err
    assert not runs_root().exists() or not list(runs_root().iterdir())
    assert sorted(p.name for p in folder.rglob("*")) == before  # no cache or note written beside the file


def test_good_small_files_behind_the_refusals_load(tmp_path: Path) -> None:
    """The files the refusals extend are themselves good: each refusal is about the line it names."""
    wide, long = tmp_path / "w.csv", tmp_path / "l.csv"
    wide.write_text(GOOD_WIDE, encoding="utf-8")
    long.write_text(LONG_HEAD + _long_rows(), encoding="utf-8")
    assert get_source(f"csv:{wide}?{S}").info.input_shape == (1, 3)
    assert get_source(f"csv:{long}?{L}").info.input_shape == (1, 3)


def test_without_modality_time_and_value_are_unknown_options(tmp_path: Path) -> None:
    path = tmp_path / "l.csv"
    path.write_text(LONG_HEAD + _long_rows(), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"Unknown option\(s\) time, value .* series modality=series"):
        get_source(f"csv:{path}?label=y&id=id&time=t&value=v")
