"""Partial dependence and individual conditional expectation (ICE) of a table model, batched on its device.

For one column and a grid of G values, every row is copied G times with the column set to each value and the copies
go through the model in a few large passes (`batch_rows` rows each, the copies built on the rows' device), not one
call per grid point as scikit-learn's `partial_dependence(method="brute")` makes. ICE is each row's curve (N, G), the
partial dependence (PDP) their mean; centred ICE subtracts each curve's value at the grid's first point. A pair of
columns gives a (G1, G2) map. Values are what `predict` returns for the `target` column: the predicted probability
of that class for a classifier, the predicted value in the target's units for a model that predicts a number (its
one output; `units` and `axis` then say so: `value_units`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from xaidash.data.registry import RegressionTarget
from xaidash.explainers.tabular.passes import BATCH_ROWS, Predict, scored


@dataclass
class PDPResult:
    """One column's partial dependence. `grid` (G,) raw values of the column; `ice` (N, G) each row's predicted
    probability of the target with the column set to each grid value; `pdp` (G,) the mean of the ICE curves;
    `centred_ice` / `centred_pdp` the same minus each curve's first value; `data` (N,) the rows' own values (the rug)."""

    column: str
    grid: np.ndarray
    ice: np.ndarray
    pdp: np.ndarray
    centred_ice: np.ndarray
    centred_pdp: np.ndarray
    data: np.ndarray
    target: str
    units: str
    labels: tuple[str, ...] = ()  # categorical: the category name of each grid value; numeric: ()
    axis: str = ""  # a value's short name for an axis: 'P(malignant)', 'predicted disease progression'

    @property
    def spread(self) -> float:
        """The PDP's range (max - min): how far the mean prediction moves along the column."""
        return float(self.pdp.max() - self.pdp.min()) if self.pdp.size else 0.0


@dataclass
class PairResult:
    """The partial dependence of a pair of columns: `pdp` (G1, G2), the mean predicted probability of the target with
    the first column at `grid_a[i]` and the second at `grid_b[j]`."""

    columns: tuple[str, str]
    grid_a: np.ndarray
    grid_b: np.ndarray
    pdp: np.ndarray
    target: str
    units: str
    labels_a: tuple[str, ...] = ()
    labels_b: tuple[str, ...] = ()
    axis: str = ""


def _points_per_pass(n_rows: int, batch_rows: int) -> int:
    """How many grid points' copies of the rows fit in one pass (at least one)."""
    return max(1, int(batch_rows) // max(1, n_rows))


def ice_curves(
    predict: Predict,
    rows: torch.Tensor,
    columns: tuple[int, ...],
    points: torch.Tensor,
    target: int,
    batch_rows: int = BATCH_ROWS,
) -> torch.Tensor:
    """(N, P): each row's score with `columns` set to each of the P `points` (P, len(columns)). The copies of the rows
    for as many points as fit in `batch_rows` are built at once on the rows' device and scored in one pass."""
    n, p = len(rows), len(points)
    points = points.to(rows.device, rows.dtype)
    index = torch.tensor(columns, device=rows.device)
    chunk = _points_per_pass(n, batch_rows)
    out = []
    for start in range(0, p, chunk):
        block = points[start : start + chunk]  # (c, len(columns))
        copies = rows.unsqueeze(0).repeat(len(block), 1, 1)  # (c, N, F)
        copies[:, :, index] = block.unsqueeze(1).expand(-1, n, -1)
        out.append(scored(predict, copies.reshape(-1, rows.shape[1]), target, batch_rows).reshape(len(block), n))
    return torch.cat(out).T if out else torch.empty(n, 0, device=rows.device)


def partial_dependence(
    predict: Predict,
    rows: torch.Tensor,
    column: int,
    grid: torch.Tensor,
    target: int,
    *,
    name: str = "",
    target_name: str = "",
    labels: tuple[str, ...] = (),
    batch_rows: int = BATCH_ROWS,
    units: tuple[str, str] | None = None,
) -> PDPResult:
    """PDP and ICE of `column` over `grid` (G,) for `rows` (N, F) raw values; see the module's docstring. `units`:
    (units, axis) of a value (`value_units`), default a class probability's."""
    ice = ice_curves(predict, rows, (column,), grid.reshape(-1, 1), target, batch_rows).double().cpu().numpy()
    centred = ice - ice[:, :1]
    return PDPResult(
        column=name or str(column),
        grid=grid.double().cpu().numpy(),
        ice=ice,
        pdp=ice.mean(0),
        centred_ice=centred,
        centred_pdp=centred.mean(0),
        data=rows[:, column].double().cpu().numpy(),
        target=target_name or str(target),
        units=(units or value_units(target_name or str(target)))[0],
        labels=labels,
        axis=(units or value_units(target_name or str(target)))[1],
    )


def pair_dependence(
    predict: Predict,
    rows: torch.Tensor,
    columns: tuple[int, int],
    grids: tuple[torch.Tensor, torch.Tensor],
    target: int,
    *,
    names: tuple[str, str] = ("", ""),
    target_name: str = "",
    labels: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
    batch_rows: int = BATCH_ROWS,
    units: tuple[str, str] | None = None,
) -> PairResult:
    """The two-column partial dependence over `grids` (G1,), (G2,): (G1, G2) mean scores."""
    a, b = grids[0].to(rows.device, rows.dtype), grids[1].to(rows.device, rows.dtype)
    points = torch.cartesian_prod(a, b).reshape(-1, 2)  # first column slowest, as scikit-learn orders its grid
    ice = ice_curves(predict, rows, columns, points, target, batch_rows)
    pdp = ice.double().mean(0).reshape(len(a), len(b)).cpu().numpy()
    return PairResult(
        columns=(names[0] or str(columns[0]), names[1] or str(columns[1])),
        grid_a=a.double().cpu().numpy(),
        grid_b=b.double().cpu().numpy(),
        pdp=pdp,
        target=target_name or str(target),
        units=(units or value_units(target_name or str(target)))[0],
        labels_a=labels[0],
        labels_b=labels[1],
        axis=(units or value_units(target_name or str(target)))[1],
    )


def units_of(target_name: str) -> str:
    """What a partial dependence value of a classifier is."""
    return f"predicted probability of class {target_name!r}"


def value_units(target_name: str, regression: RegressionTarget | None = None) -> tuple[str, str]:
    """(units, axis) of a partial dependence value: a class's predicted probability ('P(malignant)'), or a
    regression model's predicted value in the target's units ('predicted disease progression', its unit added when
    the data set declares one)."""
    if regression is None:
        return units_of(target_name), f"P({target_name})"
    unit = f" ({regression.unit})" if regression.unit else ""
    words = f"predicted {regression.name}{unit}"
    return f"{words}, in the target's units", words
