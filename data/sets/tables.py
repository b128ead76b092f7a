"""Built-in tables, offline: scikit-learn's bundled breast cancer and wine tables (classes), its diabetes table (a number
to predict: disease progression), and `planted`, a generated table
whose label is set by three known columns (two of them through their product), the rest noise, so every method can
be checked against the truth as `shapes` is for images. Each has a stratified 80/20 train/test split (seed 0; the
diabetes table's is stratified on its target's quintiles)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from xaidash.data.registry import DatasetInfo, Loader, SplitName, TableSplit, register
from xaidash.data.sets._common import regression_indices, stratified_indices
from xaidash.data.sets._tables import TableSource, as_rows, regression_target, table_columns

PLANTED_ROWS = 2000
PLANTED_SEED = 7
PLANTED_TRUTH = ("x0", "x1", "x2")
PLANTED_NOISE = ("x3", "x4", "x5", "x6", "x7")
PLANTED_GROUPS = ("red", "green", "blue")


@lru_cache(maxsize=1)
def planted_table() -> tuple[np.ndarray, np.ndarray]:
    """(rows, labels): x0..x7 with different scales, a categorical `group`; label 1 where x0 * x1 + x2 > 0.
    x0 ~ N(0, 1), x1 ~ U(-2, 2), x2 ~ N(5, 2) shifted so its threshold is 5, the noise columns on scales from 0.1 to
    100 (standardisation has to matter), `group` uniform over three categories and unrelated to the label."""
    rng = np.random.default_rng(PLANTED_SEED)
    n = PLANTED_ROWS
    x0 = rng.normal(0.0, 1.0, n)
    x1 = rng.uniform(-2.0, 2.0, n)
    x2 = rng.normal(5.0, 2.0, n)
    noise = [rng.normal(0.0, s, n) for s in (1.0, 0.1, 10.0, 100.0)] + [rng.integers(0, 50, n).astype(float)]
    group = rng.integers(0, len(PLANTED_GROUPS), n).astype(float)
    labels = (x0 * x1 + (x2 - 5.0) > 0).astype(np.int64)
    return np.stack([x0, x1, x2, *noise, group], axis=1), labels


def _sklearn_table(loader_name: str, **options: bool) -> Callable[[], tuple[np.ndarray, np.ndarray, list[str]]]:
    @lru_cache(maxsize=1)
    def load() -> tuple[np.ndarray, np.ndarray, list[str]]:
        import sklearn.datasets  # imported on use: keeps `import data.sets` light

        bunch = getattr(sklearn.datasets, loader_name)(**options)
        target = bunch.target.astype(np.float64 if loader_name == "load_diabetes" else np.int64)
        return bunch.data, target, [str(n) for n in bunch.feature_names]

    return load


_breast_cancer = _sklearn_table("load_breast_cancer")
_wine = _sklearn_table("load_wine")
_diabetes = _sklearn_table(
    "load_diabetes", scaled=False
)  # the columns in their units (years, mm Hg, mg/dl), not scaled


def _planted() -> tuple[np.ndarray, np.ndarray, list[str]]:
    rows, labels = planted_table()
    return rows, labels, [*PLANTED_TRUTH, *PLANTED_NOISE, "group"]


Read = Callable[[], tuple[np.ndarray, np.ndarray, list[str]]]


def _split(labels: np.ndarray, split: str) -> np.ndarray:
    """Stratified on the classes, or on a number's quintiles (float labels: a regression target)."""
    return regression_indices(labels, split) if labels.dtype.kind == "f" else stratified_indices(labels, split)


def _loader(read: Read) -> Loader:
    def load(split: SplitName, root: Path, download: bool) -> TableSplit:
        rows, labels, _ = read()
        idx = _split(labels, split)
        values = labels[idx].astype(np.float32 if labels.dtype.kind == "f" else np.int64)
        return TableSplit(rows=as_rows(rows[idx]), labels=torch.from_numpy(values))

    return load


@dataclass(frozen=True)
class _Table:
    """A built-in table: how its rows are read and what it declares; its columns' facts come from its training
    split when its info is first asked for."""

    name: str
    read: Read
    classes: tuple[str, ...]
    description: str
    truth: tuple[str, ...] = ()
    url: str = ""
    categories: dict[int, tuple[str, ...]] | None = None
    unit: str = ""  # a regression target's unit (its one "class" is its name)

    def info(self) -> DatasetInfo:
        rows, labels, names = self.read()
        train = _split(labels, "train")
        columns = table_columns(rows[train], names, self.categories)
        regression = None
        if labels.dtype.kind == "f":
            regression = regression_target(labels[train], self.classes[0], self.unit)
        return DatasetInfo(
            name=self.name,
            modality="table",
            classes=self.classes,
            input_shape=(len(columns),),
            description=self.description,
            builtin=True,
            columns=columns,
            truth_columns=self.truth,
            source_url=self.url,
            regression=regression,
        )


def _register(table: _Table) -> None:
    register(TableSource(table.name, table.info, _loader(table.read)))


_register(
    _Table(
        "breast_cancer",
        _breast_cancer,
        ("malignant", "benign"),
        "scikit-learn's Wisconsin breast cancer table: 30 measurements of cell nuclei per biopsy, malignant or benign; "
        "455 train / 114 test rows (stratified, seed 0); works offline.",
        url="https://archive.ics.uci.edu/dataset/17/breast+cancer+wisconsin+diagnostic",
    )
)
_register(
    _Table(
        "wine",
        _wine,
        ("cultivar 1", "cultivar 2", "cultivar 3"),
        "scikit-learn's wine table: 13 chemical measurements of wines from three cultivars; 142 train / 36 test rows "
        "(stratified, seed 0); works offline.",
        url="https://archive.ics.uci.edu/dataset/109/wine",
    )
)
_register(
    _Table(
        "diabetes",
        _diabetes,
        ("disease progression",),
        "scikit-learn's diabetes table: age, sex, BMI, blood pressure and six blood serum measurements of 442 "
        "patients; the number to predict is a measure of disease progression one year later (25 to 346); 353 train / "
        "89 test rows (stratified on the target's quintiles, seed 0); works offline.",
        url="https://www4.stat.ncsu.edu/~boos/var.select/diabetes.html",
    )
)
_register(
    _Table(
        "planted",
        _planted,
        ("negative", "positive"),
        "Generated table with known truth: the label is positive where x0 * x1 + (x2 - 5) > 0 (x0 and x1 interact), "
        "x3..x7 and the categorical `group` are noise on scales from 0.1 to 100; 1,600 train / 400 test rows; "
        "works offline.",
        truth=PLANTED_TRUTH,
        categories={8: PLANTED_GROUPS},
    )
)
