"""Table rows, explained: a row typed as comma-separated values or read from a CSV file with the data set's column
names as header, maps with one value per column (a method's output over the model's prepared input summed per
column), drawn as signed horizontal bars labelled with each column and the row's value in its own units, and
scored by hiding whole columns (replaced by the training split's mean; a category column's most frequent
category).

A map's labels are `column = value` (the row's value as people read it: a number in the column's units, a category's
name): the bars, the reports' tables and the figure JSON show which value of the row each attribution is about."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.table import TABLE, TableModality, prepared_width, to_columns
from xaidash.data.paths import is_file
from xaidash.data.registry import DatasetInfo
from xaidash.data.text_files import decode_text
from xaidash.explainers.figures import render
from xaidash.explainers.figures.bars import draw_bars
from xaidash.explainers.figures.png import png_bytes
from xaidash.explainers.modalities.base import ADAPTERS, Drawing, Maps, TypingGuide, extend
from xaidash.explainers.modalities.row_maps import RowMaps
from xaidash.explainers.modalities.table_curves import table_perturbation_curve
from xaidash.explainers.modalities.table_values import parse_row, row_problem, training_rows
from xaidash.explainers.perturbation_curves import CurveResult, Mode
from xaidash.explainers.registry import MethodOutput
from xaidash.models.bundle import ModelBundle

LABEL_SEP = " = "  # a map's label: column, LABEL_SEP, the row's value
MAX_CSV_BYTES = 20_000_000
COLORBAR_WIDTH = 420
COLORBAR_HEIGHT = 40
COLORBAR_FONT = 14


def value_labels(info: DatasetInfo, row: torch.Tensor) -> list[str]:
    """One label per column of a raw row: `column = value` in the column's own units (a category's name)."""
    return [f"{c.name}{LABEL_SEP}{c.value_text(float(v))}" for c, v in zip(info.columns, row.tolist(), strict=True)]


def split_label(label: str) -> tuple[str, str]:
    """(column, value text) of a map's label; the label itself and '' when it carries no value."""
    name, sep, value = label.partition(LABEL_SEP)
    return (name, value) if sep else (label, "")


def read_csv_rows(path: Path, info: DatasetInfo) -> torch.Tensor:
    """Every data row of a CSV file whose header names the data set's columns (in any order; other columns, such as
    an id or the label, are left out) -> (N, F) raw rows, each value checked; ExplainError naming what is wrong."""
    if not is_file(path):
        raise ExplainError(f"CSV file {str(path)!r} does not exist.")
    if path.stat().st_size > MAX_CSV_BYTES:
        raise ExplainError(f"{path.name} is larger than {MAX_CSV_BYTES // 1_000_000} MB: give the rows to explain.")
    text = decode_text(path.read_bytes(), path.name, error=ExplainError).text
    records = [r for r in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in r)]
    if not records:
        raise ExplainError(f"{path.name} is empty: it needs a header of column names and at least one row.")
    header = [h.strip() for h in records[0]]
    missing = [c.name for c in info.columns if c.name not in header]
    if missing:
        raise ExplainError(f"{path.name} has no column {', '.join(repr(m) for m in missing)} in its header.")
    if len(records) < 2:
        raise ExplainError(f"{path.name} has a header but no rows.")
    where = [header.index(c.name) for c in info.columns]
    rows = []
    for k, record in enumerate(records[1:], start=2):
        if len(record) != len(header):
            raise ExplainError(f"{path.name}, line {k}: {len(record)} values for {len(header)} header columns.")
        try:
            rows.append(parse_row(info, [record[j] for j in where]))
        except ExplainError as e:
            raise ExplainError(f"{path.name}, line {k}: {e}") from None
    return torch.stack(rows)


def _csv_spec(spec: str) -> tuple[Path, int | None] | None:
    """(path, data row number from 1 or None) when `spec` names a CSV file (`rows.csv` or `rows.csv:ROW`)."""
    head, sep, tail = spec.rpartition(":")
    if sep and tail.strip().isdigit() and head.lower().endswith(".csv"):
        return Path(head).expanduser(), int(tail)
    path = Path(spec).expanduser()
    return (path, None) if path.suffix.lower() == ".csv" else None


@dataclass(frozen=True)
class TableAdapter(RowMaps, TableModality):
    # ---- reading inputs ----------------------------------------------------------------------------------------
    def read_input(self, spec: str, bundle: ModelBundle, fit: str = "crop") -> tuple[Any, str]:
        """A CSV file of rows (`rows.csv` holding one row, or `rows.csv:ROW`, ROW counting data rows from 1), else a
        line of comma-separated values, one per column in column order (category names or codes for categories)."""
        info, named = bundle.info, _csv_spec(spec.strip())
        if named is not None:
            path, number = named
            rows = read_csv_rows(path, info)
            if number is None and len(rows) > 1:
                raise ExplainError(
                    f"{path.name} holds {len(rows)} rows: name one as {path.name}:ROW (1 to {len(rows)})."
                )
            number = number or 1
            if not 1 <= number <= len(rows):
                raise ExplainError(f"{path.name} holds {len(rows)} rows; row {number} is not one of them.")
            return rows[number - 1], f"row {number} of {path.name}"
        if not spec.strip():
            raise ExplainError(f"Give a row: {len(info.columns)} comma-separated values, or a CSV file.")
        values = next(csv.reader([spec.strip()]))
        row = parse_row(info, values)
        preview = ", ".join(value_labels(info, row)[:4])
        return row, f"typed row: {preview}{', …' if len(row) > 4 else ''}"

    def read_inputs(self, spec: str, bundle: ModelBundle) -> list[tuple[Any, str]]:
        """Every row of a CSV file (`rows.csv`), or the one row `read_input` reads."""
        named = _csv_spec(spec.strip())
        if named is None or named[1] is not None:
            return [self.read_input(spec, bundle)]
        rows = read_csv_rows(named[0], bundle.info)
        return [(r, f"row {k} of {named[0].name}") for k, r in enumerate(rows, start=1)]

    def input_cells(self, info: Any, raw: Any) -> tuple[str, ...] | None:
        return tuple(value_labels(info, self.as_batch(raw)[0]))

    def typing_guide(self, info: Any, example: Any) -> TypingGuide:
        names = ", ".join(c.name for c in info.columns)
        values = self.as_batch(example)[0].tolist()
        return TypingGuide(
            caption="Columns, in order: " + ", ".join(f"**{c.name}**" for c in info.columns),
            label="Rows: one a line, values separated by commas",
            help="numbers in each column's own units (within the training data's range); a category column by its "
            "category's name",
            example=", ".join(c.value_text(float(v)) for c, v in zip(info.columns, values, strict=True)),
            empty="Type a row: one value per column, separated by commas.",
            file_label="A .csv file with a header naming the columns (other columns, such as an id or the label, "
            "are left out)",
            file_hint=f"Upload a UTF-8 .csv file with the columns {names}.",
        )

    def preview(self, info: Any, raws: Sequence[Any]) -> Any:
        """Rows as a table: numbers in their columns' units, a category column by its categories' names."""
        import pandas as pd

        values = np.asarray([np.asarray(r, dtype=np.float64).reshape(-1) for r in raws]).reshape(len(raws), -1)
        data: dict[str, Any] = {}
        for j, column in enumerate(info.columns):
            col = values[:, j]
            data[column.name] = [column.value_text(v) for v in col] if column.categorical else col
        return pd.DataFrame(data)

    def sample_problem(self, raw: Any, bundle: ModelBundle, name: str) -> str | None:
        problem = row_problem(bundle.info, self.as_batch(raw))
        return None if problem is None else f"{name}: {problem}."

    def checked(self, bundle: ModelBundle, inputs: Any) -> torch.Tensor:
        try:
            rows = self.as_batch(inputs).detach().float().cpu()
        except (TypeError, ValueError, RuntimeError):
            raise ExplainError(f"Table rows must be numbers, one per column of {bundle.info.name}.") from None
        if rows.dim() != 2 or not len(rows):
            raise ExplainError(f"Give at least one row of {len(bundle.info.columns)} values.")
        problem = row_problem(bundle.info, rows)
        if problem:
            raise ExplainError(f"Cannot explain these rows: {problem}.")
        return rows

    def background(self, bundle: ModelBundle, n: int, seed: int) -> torch.Tensor | None:
        rows = training_rows(bundle, n, seed)
        return None if rows is None else bundle.prepare(rows)

    # ---- maps --------------------------------------------------------------------------------------------------
    def to_maps(self, bundle: ModelBundle, raw: Any, out: MethodOutput) -> Maps:
        """(N, D) over the model's prepared input -> (N, F), each column's positions summed; (N, F) as it is."""
        info = bundle.info
        attr = torch.as_tensor(out.attributions).detach().float()
        if attr.dim() != 2 or attr.shape[1] not in (len(info.columns), prepared_width(info)):
            raise ExplainError(
                f"A table map has one value per column ({len(info.columns)}) or per input position "
                f"({prepared_width(info)}); the method gave shape {tuple(attr.shape)}."
            )
        if attr.shape[1] != len(info.columns):
            attr = to_columns(attr, info)
        rows = self.as_batch(raw)
        return Maps(attr.cpu().numpy().astype(np.float32), [value_labels(info, r) for r in rows])

    def map_labels(self, labels: list[list[str]] | None, index: int) -> list[str] | None:
        return None if not labels else labels[index]

    def stored(self, maps: Any, labels: list[str] | None) -> tuple[Any, list[list[str]] | None]:
        return np.asarray(maps, dtype=np.float32).reshape(1, -1), None if labels is None else [list(labels)]

    # ---- drawing -----------------------------------------------------------------------------------------------
    def draw(
        self,
        values: np.ndarray,
        *,
        signed: bool,
        scale: float,
        clipped: bool,
        units: str,
        display: str,
        background: np.ndarray | None,
        labels: Sequence[str] | None,
        upscale: int,
    ) -> Drawing:
        v = np.asarray(values, np.float32).reshape(-1)
        names = list(labels) if labels is not None and len(labels) == v.size else [f"column {j}" for j in range(v.size)]
        img = draw_bars(v, names, signed=signed, scale=scale, units=units)
        bar = render.colorbar(
            signed,
            scale,
            width=min(img.width, COLORBAR_WIDTH),
            height=COLORBAR_HEIGHT,
            label=units,
            font_size=COLORBAR_FONT,
            clipped=clipped,
        )
        return Drawing(map_png=png_bytes(img), figure_png=png_bytes(render.with_legend(img, bar)), labels=tuple(names))

    def figure_json(self, values: np.ndarray, labels: Sequence[str] | None) -> dict[str, Any]:
        parts = [split_label(label) for label in labels or ()]
        return {
            "words": list(labels or ()),  # the bars' labels, as a stored figure is drawn again with them
            "columns": [name for name, _ in parts],
            "row_values": [value for _, value in parts],
            "attributions": [float(v) if np.isfinite(v) else None for v in np.asarray(values, np.float64).ravel()],
        }

    def labels_from_json(self, d: dict[str, Any]) -> tuple[str, ...] | None:
        """`column = value` per column, from the figure JSON's columns and the row's values."""
        if "columns" not in d:
            return None
        values = d.get("row_values") or [""] * len(d["columns"])
        return tuple(f"{c}{LABEL_SEP}{v}" if v else str(c) for c, v in zip(d["columns"], values, strict=False))

    # ---- metrics (the maps: RowMaps) -------------------------------------------------------------------------
    def perturbation_curve(
        self, bundle: ModelBundle, raw: Any, attributions: Any, *, mode: Mode, steps: int, batch_size: int = 256
    ) -> CurveResult:
        """Columns replaced by the training split's mean (most frequent category) in order of |attribution|
        (deletion), or put back into that mean row (insertion)."""
        rows = self.checked(bundle, raw)
        return table_perturbation_curve(bundle, rows, attributions, mode=mode, steps=steps, batch_size=batch_size)


TABLE_ADAPTER = ADAPTERS.register(
    extend(
        TABLE,
        TableAdapter,
        displays=("bars",),
        metrics=(
            "deletion_auc",
            "insertion_auc",
            "truth_recall",
            "completeness_gap",
            "sparseness",
            "complexity",
            "random_logit",
            "seconds",
        ),
        region="column",
        gradient_unit="standardised column",
        map_files="png",
        stores_values=True,
        attackable=False,
        counterfactuals=("column changes",),  # explainers/robust/searches.py COLUMNS
    )
)
