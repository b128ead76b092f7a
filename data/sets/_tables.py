"""What every table data set shares: its columns' facts measured on the training split, and a source whose info (which
needs those facts) is built the first time it is asked for, so importing the data sets reads no table."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaidash.data.registry import DatasetInfo, DatasetSource, Loader, RegressionTarget, TableColumn


def table_columns(
    rows: np.ndarray,
    names: Sequence[str],
    categories: Mapping[int, Sequence[str]] | None = None,
) -> tuple[TableColumn, ...]:
    """The columns of raw training rows (N, F): a numeric column's range, mean, std and median, whether it holds
    whole numbers only; a categorical one (index in `categories`) its category names and most frequent code."""
    categories = categories or {}
    out = []
    for i, name in enumerate(names):
        values = rows[:, i].astype(np.float64)
        if i in categories:
            counts = np.bincount(values.astype(np.int64), minlength=len(categories[i]))
            out.append(TableColumn(str(name), "categorical", tuple(categories[i]), median=float(np.argmax(counts))))
            continue
        std = float(values.std())
        out.append(
            TableColumn(
                str(name),
                low=float(values.min()),
                high=float(values.max()),
                mean=float(values.mean()),
                std=std if std > 1e-12 else 1.0,  # a constant column standardises to zero, not to NaN
                median=float(np.median(values)),
                integer=bool(np.all(values == np.round(values))),
            )
        )
    return tuple(out)


def regression_target(values: np.ndarray, name: str, unit: str = "") -> RegressionTarget:
    """The facts of a number to predict, measured on the training split's values."""
    values = np.asarray(values, dtype=np.float64)
    std = float(values.std())
    return RegressionTarget(
        name=name,
        unit=unit,
        mean=float(values.mean()),
        std=std if std > 1e-12 else 1.0,
        low=float(values.min()),
        high=float(values.max()),
    )


def as_rows(values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))


class TableSource(DatasetSource):
    """A table data set whose `info` is made by `make_info()` on first use (its columns' facts come from its
    training split)."""

    def __init__(
        self,
        name: str,
        make_info: Callable[[], DatasetInfo],
        loader: Loader,
        is_available: Callable[[Path], bool] = lambda root: True,
    ) -> None:
        self._name = name
        self._make_info = make_info
        self.loader = loader
        self.is_available = is_available
        self.params = ()
        self.featured = None

    @property
    def id(self) -> str:
        return self._name

    @cached_property
    def info(self) -> DatasetInfo:  # type: ignore[override]
        return self._make_info()

    def __repr__(self) -> str:
        return f"TableSource({self._name!r})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TableSource) and other._name == self._name

    def __hash__(self) -> int:
        return hash(self._name)
