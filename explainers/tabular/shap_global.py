"""Global SHAP: per-row attributions of a table method (KernelSHAP by default, through `explainers.explain`) summed
up over a sample of rows: the mean |attribution| of each column, and a dependence plot per chosen column (its
attribution against its value) coloured by the column that interacts with it most strongly, as shap's
`approximate_interactions` finds it: the column whose values best explain the spread of the attributions among rows
of similar value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from xaidash.data.registry import RegressionTarget, TableColumn
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

DEFAULT_METHOD = "shap_kernel"
DEFAULT_SHAP_ROWS = 100


@dataclass
class ShapDependence:
    """One column's attributions (N,) against its raw values (N,), coloured by `colour_by`'s raw values (N,)."""

    column: str
    values: np.ndarray
    data: np.ndarray
    colour_by: str | None
    colour_data: np.ndarray | None
    colour_labels: tuple[str, ...] = ()  # the colouring column's categories, when it is categorical
    labels: tuple[str, ...] = ()  # this column's categories, when it is categorical


@dataclass
class GlobalShap:
    """`mean_abs` (F,) the mean |attribution| of each column over `rows` rows, in `units`; `values` (N, F) the
    attributions themselves, `data` (N, F) the rows' raw values."""

    method: str
    target: str
    units: str
    rows: int
    columns: list[str]
    mean_abs: list[float]
    values: np.ndarray
    data: np.ndarray
    dependence: list[ShapDependence]
    seconds: float

    def ranked(self) -> list[tuple[str, float]]:
        """(column, mean |attribution|), largest first."""
        return sorted(zip(self.columns, self.mean_abs, strict=True), key=lambda c: -c[1])


def strongest_interaction(values: np.ndarray, data: np.ndarray, column: int) -> int | None:
    """The column that interacts most with `column` (shap.utils.approximate_interactions over the attributions
    `values` (N, F) and raw `data` (N, F)); None when there is no other column."""
    if data.shape[1] < 2:
        return None
    from shap.utils import approximate_interactions

    order = [int(i) for i in approximate_interactions(column, values, data) if int(i) != column]
    return order[0] if order else None


def summarise(
    values: np.ndarray,
    data: np.ndarray,
    columns: Sequence[TableColumn],
    chosen: Sequence[int],
    *,
    method: str,
    target: str,
    seconds: float = 0.0,
    units: str | None = None,
) -> GlobalShap:
    """Mean |attribution| per column and the dependence of each `chosen` column, from (N, F) attributions. `units`:
    what an attribution is (default: a contribution to the predicted probability of class `target`)."""
    values, data = np.asarray(values, dtype=np.float64), np.asarray(data, dtype=np.float64)
    dependence = []
    for j in chosen:
        k = strongest_interaction(values, data, j)
        dependence.append(
            ShapDependence(
                column=columns[j].name,
                values=values[:, j],
                data=data[:, j],
                colour_by=None if k is None else columns[k].name,
                colour_data=None if k is None else data[:, k],
                colour_labels=() if k is None else tuple(columns[k].categories),
                labels=tuple(columns[j].categories),
            )
        )
    return GlobalShap(
        method=method,
        target=target,
        units=units or f"contribution to the predicted probability of class {target!r}",
        rows=len(values),
        columns=[c.name for c in columns],
        mean_abs=[float(v) for v in np.abs(values).mean(0)],
        values=values,
        data=data,
        dependence=dependence,
        seconds=seconds,
    )


def check_method(bundle: ModelBundle, method: str) -> None:
    """ExplainError in one line when `method` is not a method for this model's rows, before any work."""
    from xaidash.explainers.registry import get_method

    get_method(method, bundle.modality).check(bundle)


def global_shap(
    bundle: ModelBundle,
    rows: torch.Tensor,
    target: int,
    chosen: Sequence[int],
    *,
    method: str = DEFAULT_METHOD,
    seed: int = 0,
) -> GlobalShap:
    """Explain every row of `rows` (N, F raw) for class `target` with the table `method` and summarise; a model that
    predicts a number is explained by its predicted value, so the attributions are in the target's units."""
    from xaidash.explainers.api import explain

    columns = tuple(bundle.info.columns)
    result = explain(bundle, rows.cpu(), [target] * len(rows), method, seed=seed)
    values = np.asarray(result.attributions, dtype=np.float64)
    if values.shape != (len(rows), len(columns)):
        raise ExplainError(f"{method} gave attributions of shape {values.shape}, not one per column of each row.")
    summary = summarise(
        values,
        rows.double().cpu().numpy(),
        columns,
        chosen,
        method=method,
        target=bundle.info.classes[target],
        seconds=result.seconds,
        units=None if bundle.regression is None else value_contribution(bundle.regression),
    )
    return summary


def value_contribution(target: RegressionTarget) -> str:
    """What a regression model's attribution is, in the target's units: 'contribution to the predicted disease
    progression' (its unit added when the data set declares one: '... price (USD)')."""
    unit = f" ({target.unit})" if target.unit else ""
    return f"contribution to the predicted {target.name}{unit}"
