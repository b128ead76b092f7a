"""Your own time series: `csv:<path>?modality=series&label=<column>[&id=<column>]` (wide: one series per row) or
`csv:<path>?modality=series&label=<column>&id=<column>&time=<column>&value=<column>[,<column>...]` (long: one row
per step). The `csv:` factory (data/sets/csv_table.py) sends a name with `modality=series` here (this module adds
itself to its MODALITY_READERS); data/sets/_csv_read.py reads the file (UTF-8, or UTF-16 by its byte-order mark;
delimiter sniffed, every line as many fields as the header, refusals naming the line).

Rules (docs/cli.md, "Your own series"):
- Wide: every column but the label (and the id) is one time step, in file order; every value must be a number.
  A shorter series ends in empty cells (or NA, NaN, ...: the missing values of a table): it is padded to the longest
  with its own last value and its real length kept (`SeriesSplit.lengths`), and the description says how many were.
  A gap followed by a value (a cell missing in the middle of a row) is refused: steps would shift.
- Long: the rows of one id are one series, ordered by the time column (numbers, or ISO dates such as 2024-03-01);
  each value column is a channel. Steps are taken in time order, one per row (irregular times are not resampled);
  series of different lengths are padded as above. A missing value, a repeated time within an id, or a label that
  changes within an id is refused, naming the line.
- Refused as well, in one line before anything is loaded or written: a series with no value (NaN only), a series of
  one step, a label with one class (or a class with one series: the split needs two), a missing label, a value that
  is not a number (its line and column), an option naming no column.
- Classes are the label's distinct values (numeric order when all are numbers, else text order); the split is the
  stratified 80/20 of data/sets/_common.py (seed 0); the per-channel mean and std come from the training series'
  real steps (padding left out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.modalities.series import channel_stats
from xaidash.data.notes import warn_notes
from xaidash.data.registry import DatasetInfo, SeriesSplit, SplitName
from xaidash.data.sets._common import NotedDatasetSource, stratified_indices
from xaidash.data.sets._csv_read import RawTable, read_table
from xaidash.data.sets.csv_table import MAX_CLASSES, MISSING_TOKENS, MODALITY_READERS, _as_float, _sorted_values
from xaidash.data.sets.user_data import parse_argument

SERIES_OPTIONS = ("modality", "label", "id", "time", "value")
MODALITY = "series"


@dataclass(frozen=True)
class SeriesOptions:
    label: str
    id: str | None = None
    time: str | None = None  # long format: the column that orders an id's rows
    values: tuple[str, ...] = ()  # long format: the value columns, one channel each

    @property
    def long(self) -> bool:
        return self.time is not None


def series_options(arg: str, options: dict[str, str]) -> SeriesOptions:
    modality = options.get("modality", "").strip().lower()
    if modality != MODALITY:
        raise DatasetError(
            f"modality={options.get('modality', '')!r}: csv: reads modality=series; a table takes target=, texts "
            "text= and label= without modality=."
        )
    label = options.get("label", "").strip()
    if not label:
        raise DatasetError(f"csv:{arg}: no label column: name the column of classes, e.g. ?modality=series&label=y.")
    time = options.get("time", "").strip() or None
    values = tuple(v.strip() for v in options.get("value", "").split(",") if v.strip())
    ident = options.get("id", "").strip() or None
    if (time is None) != (not values):
        raise DatasetError(
            "A long file of series needs both time= (the column that orders the steps) and value= (the column or "
            "columns of values) as well as id=; a wide file (one series per row) takes neither."
        )
    if time is not None and ident is None:
        raise DatasetError("A long file of series needs id=: the column that tells which series a row belongs to.")
    named = [label, *([ident] if ident else []), *([time] if time else []), *values]
    twice = sorted({n for n in named if named.count(n) > 1})
    if twice:
        raise DatasetError(f"Column {twice[0]!r} is given for two roles (label=, id=, time=, value=): give it one.")
    return SeriesOptions(label=label, id=ident, time=time, values=values)


def _check_names(path: Path, header: Sequence[str], opts: SeriesOptions) -> None:
    available = ", ".join(header[:40]) + (f", ... ({len(header)} in all)" if len(header) > 40 else "")
    named = [("label", opts.label), ("id", opts.id), ("time", opts.time)] + [("value", v) for v in opts.values]
    for role, name in named:
        if name is not None and name not in header:
            raise DatasetError(f"{path} has no column {name!r} (given in {role}=); its columns are: {available}.")


def _missing(text: str) -> bool:
    return text.lower() in MISSING_TOKENS


def _classes(
    path: Path, labels: Sequence[str], lines: Sequence[int], column: str
) -> tuple[tuple[str, ...], np.ndarray]:
    """The classes (numeric order when all are numbers, else text order) and each series' class code."""
    for text, line in zip(labels, lines, strict=True):
        if _missing(text):
            raise DatasetError(f"{path}: the label {column!r} is missing on line {line}; give every series its class.")
    classes = _sorted_values(set(labels))
    if len(classes) < 2:
        raise DatasetError(
            f"{path}: the label {column!r} has one value ({classes[0]!r}) for every series; a classifier needs at "
            "least 2 classes."
        )
    if len(classes) > MAX_CLASSES:
        raise DatasetError(
            f"{path}: the label {column!r} has {len(classes):,} different values (at most {MAX_CLASSES} classes): "
            "is it the right column?"
        )
    index = {c: i for i, c in enumerate(classes)}
    codes = np.array([index[v] for v in labels], dtype=np.int64)
    counts = np.bincount(codes, minlength=len(classes))
    if counts.min() < 2:
        rare = classes[int(np.argmin(counts))]
        raise DatasetError(
            f"{path}: class {rare!r} of the label {column!r} has {int(counts.min())} series; every class needs at "
            "least 2 to be split 80/20 into train and test: add series or remove that class's."
        )
    return tuple(classes), codes


def _number(path: Path, text: str, line: int, column: str) -> float:
    value = _as_float(text)
    if math.isnan(value):
        raise DatasetError(f"{path}: line {line}, column {column!r}: {text!r} is not a number; a series holds numbers.")
    return value


@dataclass(frozen=True)
class _Read:
    """Series as read, before padding: each (C, its length) float64, its label's text, the line it starts on, its
    id; the channels' names and what one step is."""

    series: list[np.ndarray]
    labels: list[str]
    lines: list[int]
    ids: list[str] | None
    channels: tuple[str, ...]
    step_name: str


def _wide_row(path: Path, row: Sequence[str], line: int, steps: Sequence[str]) -> np.ndarray:
    """One row's values (1, length): trailing missing cells shorten it, a gap before a value is refused."""
    missing = [_missing(v) for v in row]
    present = [i for i, gap in enumerate(missing) if not gap]
    if not present:
        raise DatasetError(f"{path}: line {line} holds no value (NaN or empty only): remove it or fill it in.")
    length = present[-1] + 1
    gap = next((i for i in range(length) if missing[i]), None)
    if gap is not None:
        raise DatasetError(
            f"{path}: line {line}, column {steps[gap]!r} is missing before later values; only a series' last cells "
            "may be empty (a shorter series): fill the gap or remove the row."
        )
    if length < 2:
        raise DatasetError(f"{path}: line {line} is a series of one step; a series needs at least 2.")
    return np.array([[_number(path, row[i], line, steps[i]) for i in range(length)]])


def _wide(path: Path, table: RawTable, opts: SeriesOptions) -> _Read:
    header = table.header
    steps = [n for n in header if n not in (opts.label, opts.id)]
    if len(steps) < 2:
        raise DatasetError(
            f"{path}: {len(steps)} column(s) besides the label{' and the id' if opts.id else ''}: a wide file holds "
            "one series per row, one column per time step, and a series needs at least 2 steps."
        )
    where = [header.index(n) for n in steps]
    label_at = header.index(opts.label)
    series = [
        _wide_row(path, [row[i] for i in where], line, steps) for row, line in zip(table.rows, table.lines, strict=True)
    ]
    ids = [row[header.index(opts.id)] for row in table.rows] if opts.id else None
    return _Read(series, [row[label_at] for row in table.rows], list(table.lines), ids, ("value",), "step")


def _times(path: Path, texts: Sequence[str], lines: Sequence[int], column: str) -> np.ndarray:
    """The time column as numbers, or as ISO dates (seconds since the epoch, for ordering)."""
    gap = next((line for text, line in zip(texts, lines, strict=True) if _missing(text)), None)
    if gap is not None:
        raise DatasetError(f"{path}: line {gap} has no time in column {column!r}; it orders each series' steps.")
    numbers = np.array([_as_float(t) for t in texts])
    if not np.isnan(numbers).any():
        return numbers
    out = np.empty(len(texts))
    for i, (text, line) in enumerate(zip(texts, lines, strict=True)):
        try:
            stamp = np.datetime64(text, "s")
            if np.isnat(stamp):
                raise ValueError(text)
            out[i] = stamp.astype(np.int64)
        except ValueError:
            raise DatasetError(
                f"{path}: line {line}, column {column!r}: {text!r} is neither a number nor an ISO date "
                "(2024-03-01, 2024-03-01T12:00); the time column orders each series' steps."
            ) from None
    return out


def _long_series(
    path: Path, ident: str, rows: list[int], table: RawTable, opts: SeriesOptions, times: np.ndarray
) -> np.ndarray:
    """One id's rows, ordered by time, as (channels, steps)."""
    rows = sorted(rows, key=lambda r: times[r])
    ordered = times[rows]
    same = np.flatnonzero(ordered[1:] == ordered[:-1])
    if same.size:
        first, second = (table.lines[rows[int(same[0]) + k]] for k in (0, 1))
        raise DatasetError(f"{path}: series {ident!r} has two rows at the same time (lines {first} and {second}).")
    out = np.empty((len(opts.values), len(rows)))
    for c, column in enumerate(opts.values):
        at = table.header.index(column)
        cells = [table.rows[r][at] for r in rows]
        if all(_missing(v) for v in cells):
            raise DatasetError(f"{path}: series {ident!r} has no value in column {column!r} (NaN or empty only).")
        for k, (text, r) in enumerate(zip(cells, rows, strict=True)):
            if _missing(text):
                raise DatasetError(
                    f"{path}: line {table.lines[r]}, column {column!r}: the value is missing; a long file has one "
                    "row per step: fill it in or remove the row."
                )
            out[c, k] = _number(path, text, table.lines[r], column)
    if len(rows) < 2:
        raise DatasetError(
            f"{path}: series {ident!r} (line {table.lines[rows[0]]}) is a series of one step; a series needs at least 2."
        )
    return out


def _long(path: Path, table: RawTable, opts: SeriesOptions) -> _Read:
    assert opts.id is not None and opts.time is not None
    header = table.header
    id_at, label_at = header.index(opts.id), header.index(opts.label)
    groups: dict[str, list[int]] = {}
    for r, row in enumerate(table.rows):
        if _missing(row[id_at]):
            raise DatasetError(f"{path}: line {table.lines[r]} has no id in column {opts.id!r}.")
        groups.setdefault(row[id_at], []).append(r)
    times = _times(path, [row[header.index(opts.time)] for row in table.rows], table.lines, opts.time)
    series, labels, lines = [], [], []
    for ident, rows in groups.items():
        first = table.rows[rows[0]][label_at]
        changed = next((r for r in rows if table.rows[r][label_at] != first), None)
        if changed is not None:
            raise DatasetError(
                f"{path}: the label of series {ident!r} changes from {first!r} (line {table.lines[rows[0]]}) to "
                f"{table.rows[changed][label_at]!r} (line {table.lines[changed]}); a series has one class."
            )
        series.append(_long_series(path, ident, rows, table, opts, times))
        labels.append(first)
        lines.append(table.lines[rows[0]])
    return _Read(series, labels, lines, list(groups), opts.values, opts.time)


def pad(series: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(N, C, T) float32, each series padded to the longest T by repeating its last value, and each real length."""
    lengths = np.array([s.shape[1] for s in series], dtype=np.int64)
    steps = int(lengths.max())
    out = np.empty((len(series), series[0].shape[0], steps), dtype=np.float32)
    for i, s in enumerate(series):
        out[i, :, : s.shape[1]] = s
        out[i, :, s.shape[1] :] = s[:, -1:]
    return out, lengths


@dataclass(frozen=True)
class _Scanned:
    series: np.ndarray  # (N, C, T) float32
    lengths: np.ndarray  # (N,) int64
    labels: np.ndarray  # (N,) int64
    classes: tuple[str, ...]
    ids: list[str] | None
    splits: dict[str, np.ndarray]
    channels: tuple[str, ...]
    step_name: str
    notes: tuple[str, ...]

    @property
    def padded(self) -> bool:
        return bool((self.lengths < self.series.shape[-1]).any())


@lru_cache(maxsize=8)
def _scan(path: Path, stamp: tuple[int, int], opts: SeriesOptions) -> _Scanned:
    """The file read, checked, padded and split (cached per file version and options)."""
    table = read_table(path)
    _check_names(path, table.header, opts)
    read = _long(path, table, opts) if opts.long else _wide(path, table, opts)
    classes, labels = _classes(path, read.labels, read.lines, opts.label)
    series, lengths = pad(read.series)
    splits = {s: stratified_indices(labels, s) for s in ("train", "test")}
    notes = []
    if read.ids is not None and len(set(read.ids)) < len(read.ids):
        notes.append(f"The id column {opts.id!r} repeats some values; series are still told apart by position.")
    if opts.long:
        ignored = [n for n in table.header if n not in (opts.label, opts.id, opts.time, *opts.values)]
        if ignored:
            notes.append(f"Columns left out (not named in value=): {', '.join(ignored[:10])}.")
    return _Scanned(series, lengths, labels, classes, read.ids, splits, read.channels, read.step_name, tuple(notes))


def _describe(path: Path, scanned: _Scanned, opts: SeriesOptions) -> str:
    n, channels, steps = scanned.series.shape
    layout = "long: one row per step, ordered by " + repr(opts.time) if opts.long else "wide: one series per row"
    what = f"{channels} channels ({', '.join(scanned.channels)})" if channels > 1 else "1 channel"
    parts = [
        f"Series {path.name} ({layout}): {n} series of {steps} steps, {what}; label {opts.label!r} with "
        f"{len(scanned.classes)} classes; {len(scanned.splits['train'])} train / {len(scanned.splits['test'])} test "
        "(stratified, seed 0)."
    ]
    if scanned.padded:
        short = scanned.lengths[scanned.lengths < steps]
        parts.append(
            f"{short.size} series are shorter ({int(short.min())} to {int(short.max())} steps): each is padded to {steps} "
            "steps by repeating its last value, and its real length is kept."
        )
    return " ".join(parts + list(scanned.notes))


def series_source(arg: str) -> NotedDatasetSource:
    """The source for 'csv:<path>?modality=series&label=<column>[&id=<column>][&time=<column>&value=<columns>]'."""
    path, options = parse_argument(arg, SERIES_OPTIONS)
    opts = series_options(arg, options)
    if not path.exists():
        raise DatasetError(f"CSV file {path} does not exist.")
    if not path.is_file():
        raise DatasetError(f"{path} is a folder, not a file; csv: reads one file of series.")
    path = path.resolve()
    stat = path.stat()
    scanned = _scan(path, (stat.st_mtime_ns, stat.st_size), opts)
    warn_notes(scanned.notes, f"csv {path}")
    train = scanned.splits["train"]
    lengths = torch.from_numpy(scanned.lengths)
    mean, std = channel_stats(torch.from_numpy(scanned.series[train]), lengths[train] if scanned.padded else None)

    def load(split: SplitName, root: Path, download: bool) -> SeriesSplit:
        idx = scanned.splits[split]
        return SeriesSplit(
            series=torch.from_numpy(scanned.series[idx].copy()),
            labels=torch.from_numpy(scanned.labels[idx].copy()),
            lengths=lengths[idx].clone() if scanned.padded else None,
            ids=[scanned.ids[i] for i in idx] if scanned.ids is not None else None,
        )

    info = DatasetInfo(
        name=f"csv:{arg}",
        modality="series",
        classes=scanned.classes,
        input_shape=tuple(scanned.series.shape[1:]),
        mean=tuple(mean),
        std=tuple(std),
        description=_describe(path, scanned, opts),
        channel_names=scanned.channels,
        step_name=scanned.step_name,
    )
    return NotedDatasetSource(info=info, loader=load, is_available=lambda root: path.is_file(), notes=scanned.notes)


MODALITY_READERS[MODALITY] = series_source
