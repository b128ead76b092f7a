"""Your own table, `csv:<path>?target=...`: a good mixed file read as pandas and scikit-learn read it, and every bad
file refused in one line by the command line with nothing written (no run folder, nothing beside the file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import xaidash.data  # noqa: F401  (registers every data set)
from xaidash.dashboard.cli import main
from xaidash.data.errors import DatasetError
from xaidash.data.registry import TableSplit, TextSplit, get_info, get_source, load_split
from xaidash.data.sets._common import stratified_indices
from xaidash.data.sets.csv_table import MISSING_CATEGORY
from xaidash.models.runs.store import info_from_json, info_to_json, list_runs, load_bundle, runs_root

COLOURS = ("red", "green", "blue")


def _mixed(path: Path, n: int = 120, sep: str = ",") -> Path:
    """row_id, age (whole numbers, some empty), colour (text, some NA), size (0..3, declared categorical), income
    (decimals), label (yes/no, set by colour and income)."""
    rng = np.random.default_rng(3)
    lines = [sep.join(["row_id", "age", "colour", "size", "income", "label"])]
    for i in range(n):
        age = "" if i % 11 == 0 else str(int(rng.integers(18, 80)))
        colour = "NA" if i % 13 == 0 else COLOURS[i % 3]
        income = f"{rng.normal(50_000, 9_000):.2f}"
        label = "yes" if (colour == "red") != (float(income) > 50_000) else "no"
        lines.append(sep.join([f"id{i:03d}", age, colour, str(i % 4), income, label]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _quiet_source(name: str):
    with pytest.warns(UserWarning, match="Missing values filled"):
        return get_source(name)


@pytest.mark.parametrize("sep", [",", ";", "\t"])
def test_mixed_table_matches_pandas_and_the_stratified_split(tmp_path: Path, sep: str) -> None:
    path = _mixed(tmp_path / "people.csv", sep=sep)
    name = f"csv:{path}?target=label&id=row_id&categorical=size"
    source = _quiet_source(name)
    info = source.info
    assert info.name == name and info.modality == "table" and info.classes == ("no", "yes")
    assert [(c.name, c.kind) for c in info.columns] == [
        ("age", "numeric"),
        ("colour", "categorical"),
        ("size", "categorical"),
        ("income", "numeric"),
    ]
    assert info.input_shape == (4,)
    by = {c.name: c for c in info.columns}
    assert by["colour"].categories == ("blue", "green", "red", MISSING_CATEGORY)  # NA gets its own category
    assert by["size"].categories == ("0", "1", "2", "3")  # declared categorical: numbers in numeric order
    assert by["age"].integer and not by["income"].integer

    # The reference: pandas reads the same file, scikit-learn's stratified split (seed 0) picks the same rows.
    frame = pd.read_csv(path, sep=sep)
    labels = (frame["label"] == "yes").to_numpy().astype(np.int64)
    train_idx, test_idx = stratified_indices(labels, "train"), stratified_indices(labels, "test")
    train_median = float(frame["age"].iloc[train_idx].median())  # pandas skips the gaps
    age = frame["age"].fillna(train_median).to_numpy()
    colour = frame["colour"].map({"blue": 0, "green": 1, "red": 2}).fillna(3).to_numpy()
    expected = np.stack([age, colour, frame["size"].to_numpy(), frame["income"].to_numpy()], axis=1)
    train, test = source.load("train"), source.load("test")
    assert isinstance(train, TableSplit) and (len(train), len(test)) == (96, 24)
    for split, idx in ((train, train_idx), (test, test_idx)):
        assert torch.equal(split.labels, torch.from_numpy(labels[idx]))
        np.testing.assert_allclose(split.rows.numpy(), expected[idx], rtol=1e-6)
        assert split.ids == [f"id{i:03d}" for i in idx]
    # Numeric facts from the training split only (after filling its gaps with the training median).
    assert by["age"].median == pytest.approx(train_median)
    assert by["income"].mean == pytest.approx(frame["income"].iloc[train_idx].mean(), rel=1e-6)
    assert by["income"].std == pytest.approx(frame["income"].iloc[train_idx].std(ddof=0), rel=1e-6)
    assert (by["income"].low, by["income"].high) == pytest.approx(
        (frame["income"].iloc[train_idx].min(), frame["income"].iloc[train_idx].max())
    )
    assert "age: 11 with the training median" in info.description and "colour: 10 as '(missing)'" in info.description


def test_categories_come_from_the_whole_file_and_classes_sort_as_numbers(tmp_path: Path) -> None:
    """A category seen only in the test rows still has its position; integer classes sort 2 before 10."""
    path = tmp_path / "rare.csv"
    rows = [f"{i},{'common' if i else 'only_once'},{[2, 10][i % 2]}" for i in range(40)]
    path.write_text("x,kind,y\n" + "\n".join(rows) + "\n")
    source = get_source(f"csv:{path}?target=y")
    assert source.info.classes == ("2", "10")
    kind = source.info.columns[1]
    assert kind.categories == ("common", "only_once")
    seen = torch.cat([source.load("train").rows[:, 1], source.load("test").rows[:, 1]])
    assert sorted(seen.tolist()).count(1.0) == 1


def test_a_run_records_the_table_and_rebuilds_it(tmp_path: Path) -> None:
    """The run keeps the data set's name (path and options) and its columns: both give back the same table."""
    path = _mixed(tmp_path / "people.csv")
    name = f"csv:{path}?target=label&id=row_id&categorical=size&missing=impute"
    info = _quiet_source(name).info
    assert info_from_json(info_to_json(info)) == info
    with pytest.warns(UserWarning):
        assert get_info(info_from_json(info_to_json(info)).name) == info


def test_a_trained_run_records_the_table_and_is_explained_from_it(tmp_path: Path, capsys) -> None:
    """Train on the command line, then load the run: the name it recorded gives back the same columns, and the run
    predicts the table's rows (what explaining it later needs)."""
    path = _mixed(tmp_path / "people.csv")
    name = f"csv:{path}?target=label&id=row_id&categorical=size"
    with pytest.warns(UserWarning, match="Missing values filled"):
        code = main(["train", "--dataset", name, "--model", "tabular_mlp", "--epochs", "2", "--seed", "0", "--quiet"])
    assert code == 0, capsys.readouterr().err
    (run,) = list_runs()
    config = run.config()
    assert config["dataset"] == name and config["modality"] == "table"
    with pytest.warns(UserWarning):
        info = get_info(config["dataset"])
    assert info_from_json(config["dataset_info"]).columns == info.columns
    bundle = load_bundle(run.id, device="cpu")
    with pytest.warns(UserWarning):
        test = load_split(config["dataset"], "test")
    assert isinstance(test, TableSplit)
    probs = bundle.predict_proba(test.rows)
    assert probs.shape == (len(test), 2) and torch.allclose(probs.sum(1), torch.ones(len(test)))


def test_missing_refuse_names_the_column_and_line(tmp_path: Path) -> None:
    path = _mixed(tmp_path / "people.csv")
    with pytest.raises(DatasetError, match=r"column 'age' has 11 missing value\(s\), the first on line 2;"):
        get_source(f"csv:{path}?target=label&id=row_id&missing=refuse")
    with pytest.raises(DatasetError, match=r"column 'colour' has 10 missing"):
        get_source(f"csv:{path}?target=label&id=row_id&drop=age&missing=refuse")


def test_rows_without_a_target_are_left_out_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "gaps.csv"
    path.write_text("x,y\n" + "".join(f"{i},{'a' if i % 2 else 'b'}\n" for i in range(20)) + "7,\n8,NA\n")
    with pytest.warns(UserWarning, match=r"Left out 2 row\(s\) without a target 'y' \(the first on line 22\)"):
        source = get_source(f"csv:{path}?target=y")
    assert len(source.load("train")) + len(source.load("test")) == 20


def test_text_csv_is_still_a_text_data_set(tmp_path: Path) -> None:
    """`csv:` without table options reads texts and labels as before; its refusal points to target= for tables."""
    path = tmp_path / "reviews.csv"
    path.write_text("text,label\n" + "".join(f"text {i},{i % 2}\n" for i in range(20)))
    assert isinstance(get_source(f"csv:{path}").load("train"), TextSplit)
    numbers = _mixed(tmp_path / "people.csv")
    with pytest.raises(DatasetError, match=r"no text column.*target=<column>"):
        get_source(f"csv:{numbers}")


def _write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _rows(n: int, line: str) -> str:
    return "".join(line.format(i=i, c="ab"[i % 2]) for i in range(n))


GOOD = "x,colour,y\n" + _rows(20, "{i},red,{c}\n")
# (file name, content or None for no file, options, what the one line says)
BAD = [
    ("missing.csv", None, "target=y", r"missing\.csv does not exist"),
    ("folder", "DIR", "target=y", r"is a folder, not a file"),
    ("good.csv", GOOD, "id=x", r"no target column: name the column to predict"),
    ("good.csv", GOOD, "target=label", r"has no column 'label' for the target; its columns are: x, colour, y\."),
    ("good.csv", GOOD, "target=y&id=row", r"no column 'row' \(given in id=\); its columns are: x, colour, y"),
    ("good.csv", GOOD, "target=y&missing=maybe", r"write missing=impute or missing=refuse"),
    ("good.csv", GOOD, "target=y&categorical=x&numeric=x", r"'x' is declared both categorical and numeric"),
    ("good.csv", GOOD, "target=y&colour=red", r"Unknown option\(s\) colour"),
    ("good.csv", GOOD, "target=y&text=x", r"mixes a text data set's options"),
    ("one.csv", "x,y\n" + _rows(20, "{i},same\n"), "target=y", r"target 'y' has one value \('same'\) on every row"),
    ("rare.csv", "x,y\n" + _rows(20, "{i},a\n") + "1,b\n", "target=y", r"class 'b' of the target 'y' has 1 row"),
    ("few.csv", "x,y\n1,a\n2,a\n3,b\n4,b\n", "target=y", r"too few to split 80/20"),
    (
        "many.csv",
        "x,y\n" + "".join(f"{i},{i}\n{i},{i}\n" for i in range(150)),
        "target=y",
        r"target 'y' has 150 different values",
    ),
    (
        "mixed.csv",
        "x,y\n" + _rows(20, "{i},{c}\n") + "oops,a\n",
        "target=y",
        r"column 'x' mixes numbers and text \(20 of 21 values are numbers\).*'oops' on line 22",
    ),
    (
        "declared.csv",
        "x,z,y\n" + _rows(20, "{i},{c},{c}\n"),
        "target=y&numeric=z",
        r"column 'z' is declared numeric but holds a value that is not a number: 'a' on line 2 and 19 more",
    ),
    ("inf.csv", "x,y\n" + _rows(19, "{i},{c}\n") + "inf,a\n", "target=y&numeric=x", r"'inf' on line 21"),
    ("names.csv", "x,y\n" + _rows(30, "name{i},{c}\n"), "target=y", r"column 'x' has 30 different text values"),
    ("empty.csv", "", "target=y", r"empty\.csv is empty"),
    ("blank.csv", "\n \n\n", "target=y", r"blank\.csv is empty"),
    ("header.csv", "x,colour,y\n", "target=y", r"has a header \(x, colour, y\) but no rows"),
    ("single.csv", "y\na\nb\n", "target=y", r"has one column \('y'\)"),
    (
        "dup.csv",
        "x,y,x\n" + _rows(20, "1,{c},2\n"),
        "target=y",
        r"the column name 'x' appears twice \(columns 1 and 3\)",
    ),
    ("noname.csv", "x,,y\n" + _rows(20, "1,2,{c}\n"), "target=y", r"column 2 of the header has no name"),
    ("ragged.csv", "x,z,y\n" + _rows(20, "1,2,{c}\n") + "1,2\n", "target=y", r"line 22 has 2 fields, the header 3"),
    ("wide.csv", ",".join(f"c{i}" for i in range(10_000)) + ",y\n", "target=y", r"has 10,001 columns; at most 2,000"),
    ("empty_col.csv", "x,z,y\n" + _rows(20, "{i},,{c}\n"), "target=y", r"column 'z' has no values: leave it out"),
    ("nothing_left.csv", "x,y\n" + _rows(20, "{i},{c}\n"), "target=y&id=x", r"no column is left to predict 'y'"),
    ("binary.csv", b"x,y\n1,a\n\x00\x01\x02", "target=y", r"not a text file: it holds a NUL byte at offset 8 "),
    ("latin.csv", "x,y\ncaf\xe9,a\n".encode("latin-1"), "target=y", r"not UTF-8 text: byte 0xe9 at offset 7 "),
    ("utf16.csv", "x,y\n1,a\n".encode("utf-16"), "target=y", r"is UTF-16 text: save it as UTF-8"),
    (
        "quote.csv",
        'x,y\n"1,a\n2,b\n',
        "target=y",
        r"cannot read line 3 as a table row \(unexpected end of data\): is a quote",
    ),
]


@pytest.mark.parametrize(("file", "content", "options", "says"), BAD, ids=[f"{b[0]}?{b[2]}" for b in BAD])
def test_a_bad_table_is_one_line_and_nothing_is_written(tmp_path, capsys, file, content, options, says) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / file
    if content == "DIR":
        path.mkdir()
    elif content is not None:
        _write(path, content)
    before = sorted(p.name for p in folder.rglob("*"))
    with pytest.raises(DatasetError, match=says):
        get_source(f"csv:{path}?{options}")
    code = main(["train", "--dataset", f"csv:{path}?{options}", "--model", "tabular_mlp", "--epochs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not runs_root().exists() or not list(runs_root().iterdir())
    assert sorted(p.name for p in folder.rglob("*")) == before  # no cache or note written beside the file


def test_a_missing_path_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"No path given"):
        get_source("csv:?target=y")
