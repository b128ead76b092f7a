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
    code = main(["train", "--dataset", name, "--model", "tabular_mlp", "--epochs", "2", "--seed", "0", "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    # The note in the command's own words (issue 36): a `warning:` line, not Python's `path:line: UserWarning: ...`.
    assert any(line.startswith(f"warning: csv {path}: Missing values filled") for line in err.splitlines()), err
    assert "UserWarning" not in err
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
    (  # 150 different words: too many classes, and no number to predict (150 different numbers are one: below)
        "many.csv",
        "x,y\n" + "".join(f"{i},v{i}\n{i},v{i}\n" for i in range(150)),
        "target=y",
        r"target 'y' has 150 different values \(at most 100 classes\); not every value is a number \('v0' on line 2\)",
    ),
    (
        "many_classes.csv",
        "x,y\n" + "".join(f"{i},{i}\n{i},{i}\n" for i in range(150)),
        "target=y&task=classes",
        r"has 150 different values \(at most 100 classes\); leave out task=classes to predict it as a number",
    ),
    ("task.csv", GOOD, "target=y&task=maybe", r"task='maybe': write task=regression \(a number to predict\) or task="),
    (
        "unit.csv",
        GOOD,
        "target=y&task=classes&unit=EUR",
        r"unit='EUR' is the unit of a number to predict; task=classes",
    ),
    (
        "unit_classes.csv",
        "x,y\n" + "".join(f"{i},{i % 3}\n" for i in range(30)),
        "target=y&unit=kg",
        r"unit='kg' is given but the target 'y' is read as classes \(whole numbers, read as classes\): add task=regression",
    ),
    (
        "words.csv",
        "x,y\n" + _rows(30, "{i},{i}.5\n") + "31,lots\n32,lots\n",
        "target=y&task=regression",
        r"column 'y' is the target of task=regression but is not a number: 'lots' on line 32 and 1 more\.",
    ),
    (
        "constant.csv",
        "x,y\n" + _rows(30, "{i},2.5\n"),
        "target=y",
        r"target 'y' is 2\.5 on every row: there is no number",
    ),
    ("constant_whole.csv", "x,y\n" + _rows(30, "{i},7\n"), "target=y&task=regression", r"'y' is 7 on every row"),
    (
        "few_numbers.csv",
        "x,y\n" + _rows(24, "{i},{i}.5\n"),
        "target=y",
        r"24 rows with a target 'y' are too few to split 80/20 with every fifth of its range on both sides: give at",
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
    (  # UTF-16 with its byte-order mark is read (tests/data/test_text_encodings.py); without it, it is not text
        "utf16.csv",
        "x,y\n1,a\n".encode("utf-16-le"),
        "target=y",
        r"not a text file: it holds a NUL byte at offset 1 \(binary data, or UTF-16 text without a byte-order mark",
    ),
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


# --- a number to predict -------------------------------------------------------------------------------------------

WEIGHTS = (3.0, -2.0, 0.5)  # the generated linear table: price = 40 + 3a - 2b + 0.5c (+ a little noise), in EUR


def _linear(path: Path, n: int = 300, noise: float = 0.05, gaps: int = 0) -> Path:
    """a, b, c (numeric), colour (noise), price: a linear function of a, b, c in its own units; the first `gaps`
    rows have no price (NA)."""
    rng = np.random.default_rng(5)
    x = rng.normal(0, 1, (n, 3)) * (1.0, 2.0, 4.0)
    price = 40 + x @ np.array(WEIGHTS) + rng.normal(0, noise, n)
    lines = ["a,b,c,colour,price"]
    for i in range(n):
        value = "NA" if i < gaps else f"{price[i]:.4f}"
        lines.append(f"{x[i, 0]:.4f},{x[i, 1]:.4f},{x[i, 2]:.4f},{COLOURS[i % 3]},{value}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_numeric_target_is_a_number_to_predict_split_on_its_quintiles(tmp_path: Path) -> None:
    """Inferred (300 different numbers): float32 labels in the target's units, one output named after it, the facts
    of the training split, and the split of data/sets/_common.regression_indices, all as pandas reads the file."""
    from xaidash.data.sets._common import regression_indices

    path = _linear(tmp_path / "prices.csv")
    source = get_source(f"csv:{path}?target=price&unit=EUR")
    info = source.info
    assert info.classes == ("price",) and info.num_classes == 1
    assert [c.name for c in info.columns] == ["a", "b", "c", "colour"]
    frame = pd.read_csv(path)
    price = frame["price"].to_numpy()
    train_idx, test_idx = regression_indices(price, "train"), regression_indices(price, "test")
    target = info.regression
    assert target is not None and (target.name, target.unit) == ("price", "EUR")
    assert target.mean == pytest.approx(price[train_idx].mean()) and target.std == pytest.approx(price[train_idx].std())
    assert (target.low, target.high) == pytest.approx((price[train_idx].min(), price[train_idx].max()))
    for split, idx in (("train", train_idx), ("test", test_idx)):
        loaded = source.load(split)
        assert loaded.labels.dtype == torch.float32
        np.testing.assert_allclose(loaded.labels.numpy(), price[idx], rtol=1e-6)
        np.testing.assert_allclose(loaded.rows[:, 0].numpy(), frame["a"].to_numpy()[idx], rtol=1e-5)
    # both sides span the target's range: each fifth of it has test rows
    fifths = np.searchsorted(np.quantile(price, [0.2, 0.4, 0.6, 0.8]), price[test_idx], side="right")
    assert sorted(set(fifths.tolist())) == [0, 1, 2, 3, 4]
    assert (
        f"target 'price' (a number to predict, {target.value_text(target.low)} to {target.value_text(target.high)} "
        "in the training rows; inferred from its 300 different numbers; task=classes to classify it)"
    ) in info.description
    assert info_from_json(info_to_json(info)) == info  # a run records it and gets it back


@pytest.mark.parametrize(
    ("values", "options", "number", "says"),
    [
        ([f"{i % 4}.5" for i in range(40)], "", True, "inferred from numbers with a fraction, such as 0.5"),
        ([str(1 + i % 5) for i in range(40)], "", False, "5 classes; whole numbers, read as classes; task=regression"),
        ([str(1 + i % 5) for i in range(40)], "&task=regression&unit=stars", True, "1 stars to 5 stars in the"),
        ([f"{i % 4}.5" for i in range(40)], "&task=classes", False, "(4 classes), "),
        ([["low", "high"][i % 2] for i in range(40)], "", False, "(2 classes), "),
    ],
)
def test_the_task_is_given_or_inferred_and_said(tmp_path: Path, values, options, number, says) -> None:
    path = tmp_path / "t.csv"
    path.write_text("x,y\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    info = get_info(f"csv:{path}?target=y{options}")
    assert (info.regression is not None) == number and says in info.description, info.description
    labels = load_split(info.name, "train").labels
    assert labels.dtype == (torch.float32 if number else torch.int64)


def test_rows_without_a_number_to_predict_are_left_out_or_refused(tmp_path: Path) -> None:
    """The rule the classes follow: missing=impute (the default) leaves them out with a note, missing=refuse names
    the target and the line; a number is never guessed for a target."""
    path = _linear(tmp_path / "prices.csv", gaps=3)
    with pytest.warns(UserWarning, match=r"Left out 3 row\(s\) without a target 'price' \(the first on line 2\)"):
        source = get_source(f"csv:{path}?target=price")
    assert len(source.load("train")) + len(source.load("test")) == 297
    assert torch.isfinite(source.load("train").labels).all()
    with pytest.raises(DatasetError, match=r"the target 'price' is missing on line 2 \(3 rows in all\)"):
        get_source(f"csv:{path}?target=price&missing=refuse")


def test_a_network_learns_a_linear_table_through_the_engine(tmp_path: Path, capsys) -> None:
    """`xaidash train` on the generated linear table (the user-table recipe): test R² near 1, the run's R², RMSE and
    MAE equal scikit-learn's metrics of its own predictions in EUR, as good as a linear regression within 0.02."""
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

    torch.set_num_threads(1)
    name = f"csv:{_linear(tmp_path / 'prices.csv')}?target=price&unit=EUR"
    assert main(["train", "--dataset", name, "--model", "tabular_mlp", "--seed", "0", "--quiet"]) == 0
    (run,) = list_runs()
    summary = run.summary()
    assert summary["state"] == "completed" and summary["test_acc"] is None
    bundle = load_bundle(run.id, device="cpu")
    assert bundle.regression is not None and bundle.regression.unit == "EUR"
    train, test = load_split(name, "train"), load_split(name, "test")
    predicted = bundle.predict_proba(test.rows)[:, 0].numpy()  # a number to predict: the values in EUR
    truth = test.labels.numpy()
    assert summary["test_r2"] == pytest.approx(r2_score(truth, predicted), abs=1e-4)
    assert summary["test_rmse"] == pytest.approx(mean_squared_error(truth, predicted) ** 0.5, rel=1e-3)
    assert summary["test_mae"] == pytest.approx(mean_absolute_error(truth, predicted), rel=1e-3)
    reference = LinearRegression().fit(train.rows[:, :3].numpy(), train.labels.numpy())
    linear = reference.score(test.rows[:, :3].numpy(), truth)
    assert linear > 0.999  # the table is as linear as it says
    assert summary["test_r2"] >= linear - 0.02, summary  # R² near 1 (a decimal target is learnt as it is, not cut)
