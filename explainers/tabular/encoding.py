"""Raw table rows as scikit-learn reads them: one transformer per column, in column order, so every encoded feature
is known to belong to one column. Numeric columns pass through (a tree) or are standardised (a linear model);
a categorical column (codes 0..k-1) becomes k one-hot features named `column=category`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from xaidash.data.registry import TableColumn


def encoder(columns: Sequence[TableColumn], *, scale: bool) -> ColumnTransformer:
    """A ColumnTransformer over raw rows (N, F): numeric columns standardised when `scale`, else passed through;
    categorical ones one-hot over all their categories (a code unseen in training gives all zeros)."""
    parts = []
    for j, column in enumerate(columns):
        if column.kind == "categorical":
            codes = [np.arange(len(column.categories), dtype=np.float64)]
            step: object = OneHotEncoder(categories=codes, handle_unknown="ignore", sparse_output=False)
        else:
            step = StandardScaler() if scale else "passthrough"
        parts.append((f"c{j}", step, [j]))
    return ColumnTransformer(parts, remainder="drop", sparse_threshold=0.0)


def encoded_names(columns: Sequence[TableColumn]) -> list[str]:
    """The name of each encoded feature, in the encoder's output order: `column` or `column=category`."""
    names: list[str] = []
    for column in columns:
        if column.kind == "categorical":
            names.extend(f"{column.name}={c}" for c in column.categories)
        else:
            names.append(column.name)
    return names


def encoded_owner(columns: Sequence[TableColumn]) -> np.ndarray:
    """(E,) the column index each encoded feature belongs to."""
    owner: list[int] = []
    for j, column in enumerate(columns):
        owner.extend([j] * (len(column.categories) if column.kind == "categorical" else 1))
    return np.array(owner, dtype=np.int64)


def per_column(values: np.ndarray, columns: Sequence[TableColumn]) -> np.ndarray:
    """(F,) the sum of each column's encoded features' `values` (E,)."""
    return np.bincount(encoded_owner(columns), weights=np.asarray(values, dtype=np.float64), minlength=len(columns))
