"""Your own table: `csv:<path>?target=<column>[&id=<column>][&categorical=a,b][&numeric=c][&drop=d,e]
[&missing=impute|refuse][&task=regression|classes][&unit=<text>]`.

The `csv:` prefix serves two kinds of file: a table of columns (this module: the options above, `target` required)
and texts with labels (data/sets/user_data.py: `csv:<path>[?text=<column>&label=<column>]`). The options given
decide which: any table option makes it a table, none (or `text=`/`label=`) a text data set, as before.

Rules (docs/tables.md, "Your own table" and "Numbers to predict"):
- The target is classes or a number to predict. `task=classes` or `task=regression` says which; without it, a target
  whose every value is a number is a number to predict when it has more than MAX_CLASSES different values or any
  value with a fraction (12.5), and classes otherwise (whole numbers such as 0/1 or ratings 1..5 stay classes); a
  target with any word is classes. The description says which was taken and why, as it shows the columns' kinds.
- Classes: the target's distinct values, in numeric order when every one is a number, else in text order.
- A number to predict: float32 labels in the target's units (`unit=` names them, e.g. unit=EUR), one "class" (the
  target's name: the model has one output), DatasetInfo.regression with the training split's mean, std and range;
  the split is stratified on the target's quintiles (data/sets/_common.regression_indices), so both sides span its
  range. A constant target, or a word in it with task=regression, is refused.
- A column is numeric when every value that is not missing reads as a finite number, categorical when fewer than
  half do; a column in between (mostly numbers, some words) is refused as mixed, naming a bad value and its line.
  Numbers stay numeric even with few distinct whole values (a 0/1 flag, a count): their order means something; list
  a column in `categorical=` to one-hot it instead. `numeric=` refuses any value that is not a number.
- Missing values are empty fields and NA, N/A, NaN, null, ? (any case). `missing=impute` (the default) fills a
  numeric column with its training split's median and gives a categorical column a "(missing)" category (that a
  value was missing can itself be telling, and a mode would hide it); rows without a target are dropped, with a note
  (for a number to predict as for classes: a guessed target would be trained on as if it were true).
  `missing=refuse` refuses the first column with a missing value, naming it and the line.
- The split is the stratified 80/20 of data/sets/_common.py. Numeric facts (range, mean, std, median: what the model
  standardises with) come from the training split only, so the test rows stay unseen; the categories come from the
  whole file, so a category that only a test row has still has a position in the one-hot input.
Every refusal is one DatasetError line raised before anything is loaded, trained or written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qsl

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.notes import warn_notes
from xaidash.data.registry import (
    DatasetInfo,
    RegressionTarget,
    SplitName,
    TableColumn,
    TableSplit,
    register_factory,
)
from xaidash.data.sets._common import NotedDatasetSource, regression_indices, stratified_indices
from xaidash.data.sets._csv_read import RawTable, read_table
from xaidash.data.sets._tables import as_rows, regression_target, table_columns
from xaidash.data.sets.user_data import csv_source as text_csv_source
from xaidash.data.sets.user_data import parse_argument

TABLE_OPTIONS = ("target", "id", "categorical", "numeric", "drop", "missing", "task", "unit")
TEXT_OPTIONS = ("text", "label")
MISSING_MODES = ("impute", "refuse")
TASKS = ("regression", "classes")
MISSING_TOKENS = frozenset({"", "na", "n/a", "nan", "null", "?"})
MISSING_CATEGORY = "(missing)"
MAX_CLASSES = 100
REGRESSION_MIN_ROWS = 25  # a number to predict: 5 test rows, one in each fifth of its range
MAX_CATEGORIES = 200
ID_LIKE_ROWS = 20  # a text column whose every value differs, over at least this many rows, is an identifier
# Readers of other kinds of file behind `csv:`, by its modality= option: each adds itself here (data/sets/csv_series.py
# adds "series"), as it reads this module's helpers: importing it from here would make an import cycle.
MODALITY_READERS: dict[str, Callable[[str], NotedDatasetSource]] = {}


@dataclass(frozen=True)
class TableOptions:
    target: str
    id: str | None = None
    categorical: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    missing: str = "impute"
    task: str | None = None  # "regression" or "classes"; None: inferred from the target's values
    unit: str = ""  # a number to predict: its unit


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


def table_options(arg: str, options: dict[str, str]) -> TableOptions:
    target = options.get("target", "").strip()
    if not target:
        raise DatasetError(f"csv:{arg}: no target column: name the column to predict, e.g. ?target=label.")
    missing = options.get("missing", "impute").strip().lower()
    if missing not in MISSING_MODES:
        raise DatasetError(f"missing={options['missing']!r}: write missing=impute or missing=refuse.")
    task = options.get("task", "").strip().lower() or None
    if task is not None and task not in TASKS:
        raise DatasetError(
            f"task={options['task']!r}: write task=regression (a number to predict) or task=classes, or leave it out "
            "to have it inferred from the target's values."
        )
    unit = options.get("unit", "").strip()
    if unit and task == "classes":
        raise DatasetError(f"unit={unit!r} is the unit of a number to predict; task=classes predicts classes.")
    opts = TableOptions(
        target=target,
        id=options.get("id", "").strip() or None,
        categorical=_names(options.get("categorical")),
        numeric=_names(options.get("numeric")),
        drop=_names(options.get("drop")),
        missing=missing,
        task=task,
        unit=unit,
    )
    both = sorted(set(opts.categorical) & set(opts.numeric))
    if both:
        raise DatasetError(f"Column {both[0]!r} is declared both categorical and numeric: pick one.")
    roles = {"categorical": opts.categorical, "numeric": opts.numeric, "drop": opts.drop, "id": (opts.id or "",)}
    for role, names in roles.items():
        if target in names:
            raise DatasetError(f"The target {target!r} cannot also be listed in {role}=.")
    if opts.id in opts.drop + opts.categorical + opts.numeric:
        raise DatasetError(f"The id column {opts.id!r} is left out of the inputs already: list it in no other option.")
    return opts


def _check_names(path: Path, header: Sequence[str], opts: TableOptions) -> None:
    available = ", ".join(header[:40]) + (f", ... ({len(header)} in all)" if len(header) > 40 else "")
    if opts.target not in header:
        raise DatasetError(f"{path} has no column {opts.target!r} for the target; its columns are: {available}.")
    named = [("id", opts.id)] if opts.id else []
    named += [(role, n) for role in ("categorical", "numeric", "drop") for n in getattr(opts, role)]
    for role, name in named:
        if name not in header:
            raise DatasetError(f"{path} has no column {name!r} (given in {role}=); its columns are: {available}.")
    if len(header) - 1 - (opts.id is not None) - len(opts.drop) < 1:
        raise DatasetError(f"{path}: no column is left to predict {opts.target!r} from.")


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _sorted_values(values: set[str]) -> list[str]:
    """Numbers in numeric order (2 before 10), anything else in text order."""
    numbers = {v: _number(v) for v in values}
    if all(n is not None for n in numbers.values()):
        return sorted(values, key=lambda v: (numbers[v], v))
    return sorted(values)


@dataclass(frozen=True)
class _Target:
    classes: tuple[str, ...]  # a number to predict: its one name (the model's one output)
    labels: np.ndarray  # (kept rows,) int64 class codes, or float64 values of a number to predict
    keep: np.ndarray  # (all rows,) bool: rows with a target
    number: bool = False  # a number to predict
    why: str = ""  # how the task was inferred, for the description ("" when given or when there was no choice)


def _target(path: Path, table: RawTable, opts: TableOptions, notes: list[str]) -> _Target:
    col = table.header.index(opts.target)
    values = [row[col] for row in table.rows]
    keep = np.array([v.lower() not in MISSING_TOKENS for v in values])
    if not keep.all():
        first = table.lines[int(np.argmin(keep))]
        if opts.missing == "refuse":
            raise DatasetError(
                f"{path}: the target {opts.target!r} is missing on line {first} ({int((~keep).sum())} rows in all); "
                "fill it in, remove those rows, or use missing=impute to leave them out."
            )
        notes.append(
            f"Left out {int((~keep).sum())} row(s) without a target {opts.target!r} (the first on line {first})."
        )
    kept = [v for v, k in zip(values, keep, strict=True) if k]
    if not kept:
        raise DatasetError(f"{path}: the target {opts.target!r} is empty on every row.")
    lines = [line for line, k in zip(table.lines, keep, strict=True) if k]
    numbers = np.fromiter((_as_float(v) for v in kept), dtype=np.float64, count=len(kept))
    number, why = _task(path, kept, numbers, lines, opts)
    if number:
        if numbers.min() == numbers.max():
            raise DatasetError(
                f"{path}: the target {opts.target!r} is {numbers[0]:g} on every row: there is no number to predict."
            )
        return _Target((opts.target,), numbers, keep, True, why)
    if opts.unit:
        raise DatasetError(
            f"unit={opts.unit!r} is given but the target {opts.target!r} is read as classes"
            f"{' (' + why.partition(';')[0] + ')' if why else ''}: add task=regression to predict it as a number."
        )
    classes, labels = _classes(path, kept, numbers, lines, opts)
    return _Target(classes, labels, keep, False, why)


def _task(path: Path, kept: list[str], numbers: np.ndarray, lines: list[int], opts: TableOptions) -> tuple[bool, str]:
    """(whether the target is a number to predict, why when it was inferred): the rule of the module docstring."""
    words = np.isnan(numbers)
    if opts.task == "regression":
        if words.any():
            raise _first_bad(
                path, opts.target, kept, words, lines, "is the target of task=regression but is not a number"
            )
        return True, ""
    if opts.task == "classes" or words.any():
        return False, ""
    distinct = len(np.unique(numbers))
    if distinct > MAX_CLASSES:
        return True, f"inferred from its {distinct:,} different numbers; task=classes to classify it"
    fraction = numbers != np.round(numbers)
    if fraction.any():
        example = kept[int(np.argmax(fraction))]
        return True, f"inferred from numbers with a fraction, such as {example}; task=classes to classify it"
    return False, "whole numbers, read as classes; task=regression to predict a number"


def _classes(
    path: Path, kept: list[str], numbers: np.ndarray, lines: list[int], opts: TableOptions
) -> tuple[tuple[str, ...], np.ndarray]:
    """The classes (sorted as _sorted_values) and each kept row's class code."""
    classes = _sorted_values(set(kept))
    if len(classes) < 2:
        raise DatasetError(
            f"{path}: the target {opts.target!r} has one value ({classes[0]!r}) on every row; a classifier needs at "
            "least 2 classes."
        )
    if len(classes) > MAX_CLASSES:
        words = np.flatnonzero(np.isnan(numbers))
        why = (
            "leave out task=classes to predict it as a number, or pick a column of classes"
            if not len(words)
            else f"not every value is a number ({kept[words[0]]!r} on line {lines[words[0]]}), so it is no number to "
            "predict either: pick a column of classes, or fix the values that are not numbers"
        )
        raise DatasetError(
            f"{path}: the target {opts.target!r} has {len(classes):,} different values (at most {MAX_CLASSES} "
            f"classes); {why}."
        )
    index = {c: i for i, c in enumerate(classes)}
    labels = np.array([index[v] for v in kept], dtype=np.int64)
    counts = np.bincount(labels, minlength=len(classes))
    if counts.min() < 2:
        rare = classes[int(np.argmin(counts))]
        raise DatasetError(
            f"{path}: class {rare!r} of the target {opts.target!r} has {int(counts.min())} row; every class needs at "
            "least 2 rows to be split 80/20 into train and test: add rows or remove that class's."
        )
    return tuple(classes), labels


def _splits(path: Path, target: _Target, opts: TableOptions) -> dict[str, np.ndarray]:
    """The stratified 80/20 split: on the classes, or on a number's quintiles (both sides span its range)."""
    if not target.number:
        return {s: stratified_indices(target.labels, s) for s in ("train", "test")}
    n = len(target.labels)
    if n < REGRESSION_MIN_ROWS:
        raise DatasetError(
            f"{path}: {n} rows with a target {opts.target!r} are too few to split 80/20 with every fifth of its range "
            f"on both sides: give at least {REGRESSION_MIN_ROWS}."
        )
    try:
        return {s: regression_indices(target.labels, s) for s in ("train", "test")}
    except DatasetError:  # ties leave a fifth of the range with a single row
        raise DatasetError(
            f"{path}: the target {opts.target!r} repeats a few values so often that its {n} rows cannot be split "
            "80/20 with every fifth of its range on both sides: give more rows."
        ) from None


@dataclass(frozen=True)
class _Column:
    name: str
    values: np.ndarray  # (rows,) float64 raw values (codes for a categorical column); NaN where a number is missing
    missing: np.ndarray  # (rows,) bool
    categories: tuple[str, ...] | None  # None: numeric


def _first_bad(
    path: Path, name: str, values: Sequence[str], bad: np.ndarray, lines: Sequence[int], why: str
) -> DatasetError:
    where = np.flatnonzero(bad)
    more = f" and {len(where) - 1:,} more" if len(where) > 1 else ""
    return DatasetError(f"{path}: column {name!r} {why}: {values[where[0]]!r} on line {lines[where[0]]}{more}.")


def _as_float(text: str) -> float:
    """The value as a finite number, else NaN (a word, an empty field, inf)."""
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def _column(path: Path, name: str, values: Sequence[str], lines: list[int], opts: TableOptions) -> _Column:
    """One input column typed by the rules of the module docstring (missing values as NaN, not filled yet)."""
    missing = np.fromiter((v.lower() in MISSING_TOKENS for v in values), dtype=bool, count=len(values))
    present = int((~missing).sum())
    if not present:
        raise DatasetError(f"{path}: column {name!r} has no values: leave it out with drop={name}.")
    parsed = np.fromiter((_as_float(v) for v in values), dtype=np.float64, count=len(values))
    words = ~missing & np.isnan(parsed)
    numbers = present - int(words.sum())
    if name in opts.numeric and words.any():
        raise _first_bad(path, name, values, words, lines, "is declared numeric but holds a value that is not a number")
    if name not in opts.categorical and not words.any():
        parsed[missing] = np.nan
        return _Column(name, parsed, missing, None)
    if name not in opts.categorical and numbers * 2 >= present:
        raise _first_bad(
            path,
            name,
            values,
            words,
            lines,
            f"mixes numbers and text ({numbers:,} of {present:,} values are numbers); fix the text, mark it "
            f"missing (empty or NA), or declare the column categorical={name}; the first that is not a number is",
        )
    seen = {v for v, gap in zip(values, missing, strict=True) if not gap}
    categories = _sorted_values(seen)
    if len(categories) > MAX_CATEGORIES or (len(categories) == present >= ID_LIKE_ROWS):
        raise DatasetError(
            f"{path}: column {name!r} has {len(categories):,} different text values in {present:,} rows: it "
            f"looks like an identifier or free text, not categories; leave it out with drop={name} (or id={name})."
        )
    if present < len(values):
        categories.append(MISSING_CATEGORY)
    index = {c: float(i) for i, c in enumerate(categories)}
    gap = index.get(MISSING_CATEGORY, math.nan)
    codes = np.fromiter((index.get(v, gap) for v in values), dtype=np.float64, count=len(values))
    return _Column(name, codes, missing, tuple(categories))


def _fill_missing(path: Path, column: _Column, train: np.ndarray, lines: list[int], opts: TableOptions) -> str | None:
    """Fill a numeric column's gaps in place with its training median; a note of what was done (or None)."""
    gaps = column.missing
    if not gaps.any():
        return None
    if opts.missing == "refuse":
        raise DatasetError(
            f"{path}: column {column.name!r} has {int(gaps.sum()):,} missing value(s), the first on line "
            f"{lines[int(np.argmax(gaps))]}; fill them, leave the column out with drop={column.name}, or use "
            "missing=impute."
        )
    if column.categories is not None:  # categorical gaps already have their own category
        return f"{column.name}: {int(gaps.sum()):,} as {MISSING_CATEGORY!r}"
    seen = column.values[train][~gaps[train]]
    if seen.size == 0:
        raise DatasetError(f"{path}: column {column.name!r} has no values in the training split: drop={column.name}.")
    median = float(np.median(seen))
    column.values[gaps] = median
    return f"{column.name}: {int(gaps.sum()):,} with the training median {median:.6g}"


@dataclass(frozen=True)
class _Scanned:
    classes: tuple[str, ...]
    columns: tuple[TableColumn, ...]
    rows: np.ndarray  # (N, F) float64
    labels: np.ndarray  # (N,) int64 class codes, or float64 values of a number to predict
    ids: tuple[str, ...] | None
    splits: dict[str, np.ndarray]  # split -> row indices
    notes: tuple[str, ...]
    regression: RegressionTarget | None = None
    why: str = ""  # how the task was inferred (the description shows it)

    def labels_of(self, split: SplitName) -> torch.Tensor:
        """A split's labels: int64 class codes, or float32 values in the target's units."""
        values = self.labels[self.splits[split]]
        return torch.from_numpy(values.astype(np.float32 if self.regression is not None else np.int64))


def _inputs(table: RawTable, opts: TableOptions) -> list[str]:
    left_out = {opts.target, *opts.drop} | ({opts.id} if opts.id else set())
    return [name for name in table.header if name not in left_out]


@lru_cache(maxsize=8)
def _scan(path: Path, stamp: tuple[int, int], opts: TableOptions) -> _Scanned:
    """The table read, typed, split and imputed (cached per file version and options)."""
    table = read_table(path)
    _check_names(path, table.header, opts)
    notes: list[str] = []
    target = _target(path, table, opts, notes)
    kept = np.flatnonzero(target.keep)
    rows = [table.rows[i] for i in kept]
    lines = [table.lines[i] for i in kept]
    splits = _splits(path, target, opts)
    train = np.zeros(len(rows), dtype=bool)
    train[splits["train"]] = True
    names = _inputs(table, opts)
    columns, filled = [], []
    by_column = list(zip(*rows, strict=True))  # one tuple of values per column of the file
    for name in names:
        column = _column(path, name, by_column[table.header.index(name)], lines, opts)
        note = _fill_missing(path, column, train, lines, opts)
        filled += [note] if note else []
        columns.append(column)
    if filled:
        notes.append("Missing values filled: " + "; ".join(filled) + ".")
    matrix = np.stack([c.values for c in columns], axis=1)
    categories = {i: c.categories for i, c in enumerate(columns) if c.categories is not None}
    ids = None
    if opts.id is not None:
        col = table.header.index(opts.id)
        ids = tuple(r[col] for r in rows)
        if len(set(ids)) < len(ids):
            notes.append(f"The id column {opts.id!r} repeats some values; rows are still told apart by position.")
    facts = table_columns(matrix[splits["train"]], names, categories)
    regression = regression_target(target.labels[splits["train"]], opts.target, opts.unit) if target.number else None
    return _Scanned(target.classes, facts, matrix, target.labels, ids, splits, tuple(notes), regression, target.why)


def _target_text(scanned: _Scanned) -> str:
    """'3 classes', or 'a number to predict, 12.5 EUR to 480 EUR in the training rows', and how it was inferred."""
    r = scanned.regression
    what = (
        f"{len(scanned.classes)} classes"
        if r is None
        else f"a number to predict, {r.value_text(r.low)} to {r.value_text(r.high)} in the training rows"
    )
    return what + (f"; {scanned.why}" if scanned.why else "")


def _describe(path: Path, scanned: _Scanned, opts: TableOptions) -> str:
    cats = [c.name for c in scanned.columns if c.categorical]
    shown = ", ".join(cats[:8]) + (", ..." if len(cats) > 8 else "")
    n_train, n_test = (len(scanned.splits[s]) for s in ("train", "test"))
    parts = [
        f"Table {path.name}: target {opts.target!r} ({_target_text(scanned)}), {len(scanned.columns)} columns "
        f"({len(scanned.columns) - len(cats)} numeric, {len(cats)} categorical{': ' + shown if cats else ''}); "
        f"{n_train} train / {n_test} test rows."
    ]
    if opts.id:
        parts.append(f"Id column {opts.id!r} left out of the inputs.")
    if opts.drop:
        parts.append(f"Left out: {', '.join(opts.drop)}.")
    return " ".join(parts + list(scanned.notes))


def table_source(arg: str) -> NotedDatasetSource:
    """The source for 'csv:<path>?target=<column>[&...]' (the options in the module docstring)."""
    path, options = parse_argument(arg, TABLE_OPTIONS)
    opts = table_options(arg, options)
    if not path.exists():
        raise DatasetError(f"CSV file {path} does not exist.")
    if not path.is_file():
        raise DatasetError(f"{path} is a folder, not a file; csv: reads one table file.")
    path = path.resolve()
    stat = path.stat()
    scanned = _scan(path, (stat.st_mtime_ns, stat.st_size), opts)
    warn_notes(scanned.notes, f"csv {path}")

    def load(split: SplitName, root: Path, download: bool) -> TableSplit:
        idx = scanned.splits[split]
        ids = [scanned.ids[i] for i in idx] if scanned.ids is not None else None
        return TableSplit(rows=as_rows(scanned.rows[idx]), labels=scanned.labels_of(split), ids=ids)

    info = DatasetInfo(
        name=f"csv:{arg}",
        modality="table",
        classes=scanned.classes,
        input_shape=(len(scanned.columns),),
        description=_describe(path, scanned, opts),
        columns=scanned.columns,
        regression=scanned.regression,
    )
    return NotedDatasetSource(info=info, loader=load, is_available=lambda root: path.is_file(), notes=scanned.notes)


def csv_source(arg: str) -> NotedDatasetSource:
    """The source for 'csv:<path>[?text=<column>&label=<column>] (texts) or csv:<path>?target=<column>[&id=<column>&categorical=<columns>&numeric=<columns>&drop=<columns>&missing=impute|refuse&task=regression|classes&unit=<text>] (a table) or csv:<path>?modality=series&label=<column>[&id=<column>][&time=<column>&value=<columns>] (series)':
    series when modality=series is given (the reader in MODALITY_READERS), a table when a table option is, else texts
    with labels."""
    _, sep, query = arg.partition("?")
    keys = {k for k, _ in parse_qsl(query, keep_blank_values=True)} if sep else set()
    if "modality" in keys:  # another kind of file (series): its reader's own options and rules
        modality = dict(parse_qsl(query, keep_blank_values=True))["modality"].strip().lower()
        if modality not in MODALITY_READERS:
            raise DatasetError(
                f"modality={modality!r}: csv: reads modality={' or '.join(sorted(MODALITY_READERS))}; a table takes "
                "target=, texts text= and label=, without modality=."
            )
        return MODALITY_READERS[modality](arg)
    unknown = sorted(keys - set(TABLE_OPTIONS) - set(TEXT_OPTIONS))
    if unknown:
        raise DatasetError(
            f"Unknown option(s) {', '.join(unknown)} in {arg!r}; a table takes {', '.join(TABLE_OPTIONS)} "
            f"(target= required), a text data set {', '.join(TEXT_OPTIONS)}, series modality=series and its options."
        )
    if keys & set(TABLE_OPTIONS):
        if keys & set(TEXT_OPTIONS):
            raise DatasetError(
                f"{arg!r} mixes a text data set's options (text=, label=) with a table's (target=, ...): give one kind."
            )
        return table_source(arg)
    return text_csv_source(arg)


register_factory("csv", csv_source)
