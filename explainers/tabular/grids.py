"""The values a column is swept over for partial dependence: a categorical column's categories; a numeric column's
even grid between its training range (`TableColumn.low`..`high`) or the quantiles of the rows' values; whole numbers
only for an integer column."""

from __future__ import annotations

from typing import Literal

import torch

from xaidash.data.registry import TableColumn

GridKind = Literal["even", "quantile"]
GRID_KINDS: tuple[GridKind, ...] = ("even", "quantile")
DEFAULT_POINTS = 50


def column_grid(
    column: TableColumn, values: torch.Tensor, points: int = DEFAULT_POINTS, kind: GridKind = "even"
) -> tuple[torch.Tensor, tuple[str, ...]]:
    """(grid (G,) float32 raw values, the category name of each value for a categorical column, else ()).
    `values` are the rows' own values of the column (used by the quantile grid)."""
    if column.kind == "categorical":
        return torch.arange(len(column.categories), dtype=torch.float32), tuple(column.categories)
    points = max(2, int(points))
    if kind == "quantile" and len(values):
        grid = torch.quantile(values.double().cpu(), torch.linspace(0.0, 1.0, points, dtype=torch.float64))
    else:
        grid = torch.linspace(float(column.low), float(column.high), points, dtype=torch.float64)
    if column.integer:
        grid = grid.round()
    return torch.unique(grid).float(), ()
