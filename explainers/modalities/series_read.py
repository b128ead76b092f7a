"""A series as people give it (registers nothing): typed comma-separated values (a multivariate series: its channels
separated by ';'), or a numeric CSV file holding one series per row (an optional header row of names). A series of
another length than the model reads is resampled to it by linear interpolation and its description says so; what
cannot be read (a value that is not a finite number, the wrong number of channels, an empty series) is refused in
one line naming where."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from xaidash.data.errors import DatasetError, ExplainError
from xaidash.data.modalities.series import resample
from xaidash.data.paths import is_file
from xaidash.data.registry import DatasetInfo, SeriesSplit, load_split
from xaidash.data.text_files import decode_text
from xaidash.models.bundle import ModelBundle

MAX_CSV_BYTES = 20_000_000
CHANNEL_SEP = ";"


@dataclass(frozen=True)
class ReadSeries:
    """One series read from what a user gave: (C, T) raw values at the model's length, and what it is."""

    series: torch.Tensor
    description: str


def parse_number(text: str, where: str) -> float:
    """One value of a series; ExplainError naming `where` when it is not a finite number."""
    given = text.strip()
    try:
        value = float(given)
    except ValueError:
        raise ExplainError(f"{where}: {given!r} is not a number.") from None
    if not math.isfinite(value):
        raise ExplainError(f"{where}: {given!r} is not a finite number.")
    return value


def parse_values(cells: list[str], where: str) -> list[float]:
    """A row of values (empty cells at its end left out: rows of a file may differ in length)."""
    while cells and not cells[-1].strip():
        cells = cells[:-1]
    if not cells:
        raise ExplainError(f"{where} is empty: give at least one value.")
    return [parse_number(c, f"{where}, value {k}") for k, c in enumerate(cells, start=1)]


def channel_words(info: DatasetInfo) -> str:
    channels = info.input_shape[0]
    names = ", ".join(info.channel_names) if info.channel_names else ""
    return f"{channels} channel{'s' if channels != 1 else ''}" + (f" ({names})" if names and channels > 1 else "")


def fitted(values: list[list[float]], info: DatasetInfo, what: str) -> ReadSeries:
    """Channels of values -> (C, T) at the model's length (resampled when the length differs), described."""
    channels, steps = info.input_shape
    if len(values) != channels:
        raise ExplainError(
            f"A series of {info.name} has {channel_words(info)}; {what} has {len(values)} "
            f"(separate channels with '{CHANNEL_SEP}')."
        )
    lengths = {len(v) for v in values}
    if len(lengths) > 1:
        raise ExplainError(f"The channels of {what} differ in length ({', '.join(str(n) for n in sorted(lengths))}).")
    series = torch.tensor(values, dtype=torch.float32)
    given = series.shape[1]
    if given < 2 <= steps:
        raise ExplainError(
            f"{what} has one value: a series needs at least 2 {info.step_name}s (the model reads {steps})."
        )
    note = ""
    if given != steps:
        series = resample(series, steps)
        note = f", resampled from {given} to {steps} {info.step_name}s"
    return ReadSeries(series, f"{what}: {given} {info.step_name}{'s' if given != 1 else ''}{note}")


def typed_series(text: str, info: DatasetInfo) -> ReadSeries:
    """'1.2, 3.4, …' (one channel) or '1, 2, …; 3, 4, …' (one group of values per channel)."""
    if not text.strip():
        raise ExplainError(
            f"Give a series: comma-separated values ({channel_words(info)}, '{CHANNEL_SEP}' between channels), "
            "or a CSV file."
        )
    groups = text.strip().split(CHANNEL_SEP)
    values = [
        parse_values(next(csv.reader([g.strip()]), []), "The series" if len(groups) == 1 else f"Channel {c}")
        for c, g in enumerate(groups, start=1)
    ]
    return fitted(values, info, "typed series")


def csv_spec(spec: str) -> tuple[Path, int | None] | None:
    """(path, row number from 1 or None) when `spec` names a CSV file (`series.csv` or `series.csv:ROW`)."""
    head, sep, tail = spec.rpartition(":")
    if sep and tail.strip().isdigit() and head.lower().endswith(".csv"):
        return Path(head).expanduser(), int(tail)
    path = Path(spec).expanduser()
    return (path, None) if path.suffix.lower() == ".csv" else None


def _is_header(cells: list[str]) -> bool:
    """A first row with a cell that is not a number (nor empty) is a header of names."""
    for c in cells:
        if not c.strip():
            continue
        try:
            float(c)
        except ValueError:
            return True
    return False


def csv_rows(path: Path) -> list[list[str]]:
    """The data rows of a CSV file of series (its header row, if any, left out); ExplainError when unreadable."""
    if not is_file(path):
        raise ExplainError(f"CSV file {str(path)!r} does not exist.")
    if path.stat().st_size > MAX_CSV_BYTES:
        raise ExplainError(f"{path.name} is larger than {MAX_CSV_BYTES // 1_000_000} MB: give the series to explain.")
    text = decode_text(path.read_bytes(), path.name, error=ExplainError).text
    records = [r for r in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in r)]
    if records and _is_header(records[0]):
        records = records[1:]
    if not records:
        raise ExplainError(f"{path.name} holds no series: it needs at least one row of numbers.")
    return records


def file_series(path: Path, info: DatasetInfo, number: int | None) -> list[ReadSeries]:
    """Series of a CSV file, one per row: all of them (`number` None), or row `number` (from 1)."""
    if info.input_shape[0] != 1:
        raise ExplainError(
            f"A CSV file holds one univariate series per row; {info.name} has {channel_words(info)}: type the "
            f"series with '{CHANNEL_SEP}' between channels."
        )
    rows = csv_rows(path)
    if number is not None and not 1 <= number <= len(rows):
        raise ExplainError(f"{path.name} holds {len(rows)} series; row {number} is not one of them.")
    picked = range(len(rows)) if number is None else [number - 1]
    return [
        fitted([parse_values(rows[k], f"{path.name}, row {k + 1}")], info, f"row {k + 1} of {path.name}")
        for k in picked
    ]


def series_problem(info: DatasetInfo, series: torch.Tensor) -> str | None:
    """Why raw series (N, C, T) cannot go into the model (None: they can): the shape, a value not finite."""
    channels, steps = info.input_shape
    if series.dim() != 3 or tuple(series.shape[1:]) != (channels, steps):
        return f"a series of {info.name} has {channels} channel(s) of {steps} steps; got shape {tuple(series.shape)}"
    if not len(series):
        return "no series given"
    finite = torch.isfinite(series)
    if not bool(finite.all()):
        i, c, t = (int(v) for v in (~finite).nonzero()[0])
        return f"series {i + 1}, channel {c + 1}, {info.step_name} {t}: {float(series[i, c, t])} is not a finite number"
    return None


def training_series(bundle: ModelBundle, n: int, seed: int = 0) -> torch.Tensor | None:
    """Up to `n` raw series (N, C, T) of the model's training split (a seeded pick); None when there is none."""
    if n <= 0 or not bundle.has_dataset:
        return None
    try:
        split = load_split(bundle.info.name, "train")
    except DatasetError:
        return None
    if not isinstance(split, SeriesSplit) or not len(split.series):
        return None
    series = split.series.float()
    if len(series) <= n:
        return series.clone()
    pick = torch.randperm(len(series), generator=torch.Generator().manual_seed(int(seed)))[:n]
    return series[pick]
