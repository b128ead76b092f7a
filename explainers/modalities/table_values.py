"""A table row's values as people give and read them, and the reference rows table methods hide columns with
(registers nothing).

- `parse_value` / `parse_row`: a typed value of a column (a number, or a category's name or code) checked against the
  training split's range, one clear line naming the column otherwise; `edit_row` is the what-if edit of a raw row
  by column name.
- `raw_rows`: prepared rows (standardised, one-hot) back to raw values, exactly (numeric x * std + mean, categorical
  the hot position), so a prepared background can serve methods that hide columns in raw space.
- `reference_rows`: what "hiding" a column puts in its place (`TABLE_BASELINES`): the training split's mean (a
  categorical column's most frequent category), its median, or the values of several background rows.
- `training_rows`: a seeded pick of the training split's raw rows (LIME's training data, the counterfactual's
  candidate values, the background)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from xaidash.data.errors import DatasetError, ExplainError
from xaidash.data.registry import DatasetInfo, TableColumn, TableSplit, load_split
from xaidash.models.bundle import ModelBundle

TABLE_BASELINES: tuple[str, ...] = ("mean", "median", "background")
BASELINE_HELP = (
    "What a hidden column is replaced by: mean (the training split's mean; a category column's most frequent "
    "category), median (its median; the most frequent category), or background (each of several training rows' "
    "values in turn, the model's output averaged over them)."
)
# A typed value may lie this share of the column's training range outside it (rounding in a typed number).
RANGE_SLACK = 1e-6


def _range_text(column: TableColumn) -> str:
    return f"{column.value_text(column.low)} to {column.value_text(column.high)}"


def parse_value(column: TableColumn, text: str | float) -> float:
    """One value of `column` as its raw number: a category's name (or its code) for a categorical column, a number
    within the training split's range for a numeric one; ExplainError naming the column otherwise."""
    given = str(text).strip()
    if column.categorical:
        if given in column.categories:
            return float(column.categories.index(given))
        folded = [c.casefold() for c in column.categories]
        if given.casefold() in folded:
            return float(folded.index(given.casefold()))
        try:
            code = float(given)
        except ValueError:
            code = math.nan
        if code.is_integer() and 0 <= code < len(column.categories):
            return code
        raise ExplainError(
            f"Column {column.name!r}: {given!r} is not one of its categories ({', '.join(column.categories)})."
        )
    try:
        value = float(given)
    except ValueError:
        raise ExplainError(f"Column {column.name!r}: {given!r} is not a number.") from None
    if not math.isfinite(value):
        raise ExplainError(f"Column {column.name!r}: {given!r} is not a finite number.")
    slack = RANGE_SLACK * max(abs(column.high - column.low), 1.0)
    if not column.low - slack <= value <= column.high + slack:
        raise ExplainError(
            f"Column {column.name!r}: {value:g} lies outside the training data's range ({_range_text(column)})."
        )
    if column.integer and not value.is_integer():
        raise ExplainError(f"Column {column.name!r} holds whole numbers; got {value:g}.")
    return value


def parse_row(info: DatasetInfo, values: Sequence[str | float]) -> torch.Tensor:
    """A row typed as one value per column, in column order -> (F,) raw float32."""
    if len(values) != len(info.columns):
        names = ", ".join(c.name for c in info.columns)
        raise ExplainError(f"A row of {info.name} has {len(info.columns)} values ({names}); got {len(values)}.")
    return torch.tensor([parse_value(c, v) for c, v in zip(info.columns, values, strict=True)], dtype=torch.float32)


def edit_row(info: DatasetInfo, row: torch.Tensor, changes: Mapping[str, str | float]) -> torch.Tensor:
    """What-if: a copy of the raw row (F,) with the named columns set to new values (numbers, or category names),
    each checked as `parse_value` does (within the training data's range; a known category)."""
    names = [c.name for c in info.columns]
    out = torch.as_tensor(row, dtype=torch.float32).reshape(-1).clone()
    if len(out) != len(names):
        raise ExplainError(f"A row of {info.name} has {len(names)} values; got {len(out)}.")
    for name, value in changes.items():
        if name not in names:
            raise ExplainError(f"{info.name} has no column {name!r}. Columns: {', '.join(names)}.")
        j = names.index(name)
        out[j] = parse_value(info.columns[j], value)
    return out


def row_problem(info: DatasetInfo, rows: torch.Tensor) -> str | None:
    """Why raw rows (N, F) cannot go into the model (None: they can): the width, a value that is not finite, a
    categorical code outside its categories."""
    if rows.dim() != 2 or rows.shape[1] != len(info.columns):
        return f"a row of {info.name} has {len(info.columns)} values (one per column); got shape {tuple(rows.shape)}"
    finite = torch.isfinite(rows)
    if not bool(finite.all()):
        i, j = (int(v) for v in (~finite).nonzero()[0])
        return f"row {i + 1}, column {info.columns[j].name!r}: {float(rows[i, j])} is not a finite number"
    for j, column in enumerate(info.columns):
        if not column.categorical:
            continue
        codes = rows[:, j]
        bad = (codes != codes.round()) | (codes < 0) | (codes >= len(column.categories))
        if bool(bad.any()):
            i = int(bad.nonzero()[0])
            return (
                f"row {i + 1}, column {column.name!r}: {float(codes[i]):g} is not a category code "
                f"(0..{len(column.categories) - 1}: {', '.join(column.categories)})"
            )
    return None


def raw_rows(prepared: torch.Tensor, info: DatasetInfo) -> torch.Tensor:
    """Prepared rows (N, D) -> raw rows (N, F): numeric columns un-standardised, categorical ones their hot code."""
    out, start = [], 0
    for column in info.columns:
        part = prepared[:, start : start + column.width].float()
        start += column.width
        if column.categorical:
            out.append(part.argmax(1).float())
        else:
            out.append(part[:, 0] * (column.std or 1.0) + column.mean)
    return torch.stack(out, dim=1) if out else prepared[:, :0].float()


def reference_rows(kind: str, info: DatasetInfo, background: torch.Tensor | None) -> torch.Tensor:
    """(B, F) raw rows a hidden column takes its value from: one row for 'mean' and 'median', the background rows
    for 'background' (ExplainError when there are none)."""
    if kind == "mean":
        return torch.tensor([[c.median if c.categorical else c.mean for c in info.columns]], dtype=torch.float32)
    if kind == "median":
        return torch.tensor([[c.median for c in info.columns]], dtype=torch.float32)
    if kind != "background":
        raise ExplainError(f"Unknown baseline {kind!r}: choose one of {', '.join(TABLE_BASELINES)}.")
    if background is None or not len(background):
        raise ExplainError(
            "The background baseline needs training rows, and this model has no training split to draw them "
            "from: choose the mean or median baseline."
        )
    return torch.as_tensor(background, dtype=torch.float32)


def background_reference(
    kind: str, info: DatasetInfo, background: torch.Tensor | None, size: int, seed: int
) -> torch.Tensor:
    """`reference_rows` of a method's `baseline` choice, from the prepared background `explain` gave: with the
    'background' baseline, up to `size` of its rows (a seeded pick) turned back into raw values. The one rule the
    table methods and the completeness metric share, so both find the same reference."""
    rows = None
    if kind == "background" and background is not None and len(background):
        bg = torch.as_tensor(background, dtype=torch.float32)
        if len(bg) > size:
            pick = torch.randperm(len(bg), generator=torch.Generator().manual_seed(int(seed)))[: int(size)]
            bg = bg[pick.to(bg.device)]
        rows = raw_rows(bg, info)
    return reference_rows(kind, info, rows)


def training_rows(bundle: ModelBundle, n: int, seed: int = 0) -> torch.Tensor | None:
    """Up to `n` raw rows of the model's training split (a seeded pick, in split order when all are taken); None
    when the model has no data set or its training split cannot be loaded."""
    if n <= 0 or not bundle.has_dataset:
        return None
    try:
        split = load_split(bundle.info.name, "train")
    except DatasetError:
        return None
    if not isinstance(split, TableSplit) or not len(split.rows):
        return None
    rows = split.rows.float()
    if len(rows) <= n:
        return rows.clone()
    pick = torch.randperm(len(rows), generator=torch.Generator().manual_seed(int(seed)))[:n]
    return rows[pick]
