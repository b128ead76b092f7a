"""Glassbox references: models you can read, trained with scikit-learn on the same training split the network was
trained on, scored on the same test split ("how much does the network gain over a model you can read?").

- logistic regression on standardised numeric columns and one-hot categorical ones; a column's importance is the
  sum over its encoded features of |coefficient| (averaged over the classes for more than two), comparable across
  columns because the inputs are standardised;
- a decision tree (depth `tree_depth`); a column's importance is the sum of its features' `feature_importances_`
  (the impurity each split on it removes).

For a model that predicts a number the references are regressors scored by their test R² (`compare_value_glassboxes`):
ridge regression (linear, L2 penalty alpha=1) on standardised numeric columns and one-hot categorical ones (importance:
|coefficient|, the change of the prediction in target units per training standard deviation), and a regression tree
(DecisionTreeRegressor, importance: its impurity decrease).

Each glassbox's importances are compared with the network's permutation importance by Spearman's rank correlation:
near 1, the readable model leans on the same columns as the network.

They are fitted on demand for a report, not stored as runs: they are references for explaining the network, like the
surrogate, and share its encoding of the columns (`encoding.py`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import r2_score
from sklearn.pipeline import Pipeline
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from xaidash.data.registry import TableColumn
from xaidash.explainers.tabular.encoding import encoder, per_column

DEFAULT_TREE_DEPTH = 5


@dataclass
class Glassbox:
    """One glassbox model: its test accuracy (a regressor: its test R², `score_name` says which), its own importance
    of each column (input order, what `importance_kind` says) and the Spearman correlation of those with the network's
    permutation importance (None when either is constant)."""

    name: str
    description: str
    accuracy: float
    importance_kind: str
    importances: list[float]
    spearman: float | None
    score_name: str = "accuracy"  # what `accuracy` holds: 'accuracy' or 'R²'

    @property
    def score(self) -> float:
        """The test score `score_name` names."""
        return self.accuracy


@dataclass
class GlassboxComparison:
    """The network's test accuracy beside each glassbox's, on the same split (a number to predict: test R², the
    field keeps its name and `score_name` says 'R²')."""

    network_accuracy: float
    test_rows: int
    train_rows: int
    models: list[Glassbox]
    score_name: str = "accuracy"

    @property
    def network_score(self) -> float:
        return self.network_accuracy

    def gain_over(self, name: str) -> float:
        """The network's score minus the named glassbox's (positive: the network does better)."""
        return self.network_accuracy - next(m.accuracy for m in self.models if m.name == name)


def _spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float | None:
    if np.ptp(np.asarray(a, dtype=float)) == 0 or np.ptp(np.asarray(b, dtype=float)) == 0:
        return None
    return float(stats.spearmanr(a, b).statistic)


def _logistic(columns: Sequence[TableColumn], seed: int) -> Pipeline:
    return Pipeline(
        [("encode", encoder(columns, scale=True)), ("model", LogisticRegression(max_iter=2000, random_state=seed))]
    )


def _tree(columns: Sequence[TableColumn], depth: int, seed: int) -> Pipeline:
    tree = DecisionTreeClassifier(max_depth=depth, random_state=seed)
    return Pipeline([("encode", encoder(columns, scale=False)), ("model", tree)])


def compare_glassboxes(
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    columns: Sequence[TableColumn],
    network_accuracy: float,
    network_importance: Sequence[float] | np.ndarray,
    *,
    tree_depth: int = DEFAULT_TREE_DEPTH,
    seed: int = 0,
) -> GlassboxComparison:
    """Fit both glassboxes on `train` (raw rows, labels), score them on `test`, and compare their importances with
    the network's permutation importance (one value per column, input order)."""
    (x_train, y_train), (x_test, y_test) = train, test
    logistic = _logistic(columns, seed).fit(x_train, y_train)
    tree = _tree(columns, tree_depth, seed).fit(x_train, y_train)
    coef = np.abs(logistic.named_steps["model"].coef_).mean(0)
    found = [
        (
            "logistic regression",
            "standardised numeric columns, one-hot categorical ones, L2 penalty (C=1)",
            logistic,
            "|coefficient| of the standardised inputs (summed over a column's one-hot features, averaged over classes)",
            per_column(coef, columns),
        ),
        (
            "decision tree",
            f"depth {tree_depth}, numeric columns as they are, one-hot categorical ones",
            tree,
            "impurity decrease (feature_importances_, summed over a column's one-hot features)",
            per_column(tree.named_steps["model"].feature_importances_, columns),
        ),
    ]
    models = _scored(found, lambda model: float((model.predict(x_test) == y_test).mean()), network_importance)
    return GlassboxComparison(float(network_accuracy), len(y_test), len(y_train), models)


def compare_value_glassboxes(
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    columns: Sequence[TableColumn],
    network_accuracy: float,
    network_importance: Sequence[float] | np.ndarray,
    *,
    tree_depth: int = DEFAULT_TREE_DEPTH,
    seed: int = 0,
) -> GlassboxComparison:
    """For a number to predict: ridge regression and a regression tree fitted on `train` (raw rows, values), their
    test R² beside the network's (`network_accuracy` holds its test R²), their importances compared with the network's permutation importance."""
    (x_train, y_train), (x_test, y_test) = train, test
    linear = Pipeline([("encode", encoder(columns, scale=True)), ("model", Ridge(alpha=1.0))]).fit(x_train, y_train)
    tree = Pipeline(
        [
            ("encode", encoder(columns, scale=False)),
            ("model", DecisionTreeRegressor(max_depth=tree_depth, random_state=seed)),
        ]
    ).fit(x_train, y_train)
    found = [
        (
            "ridge regression",
            "linear, standardised numeric columns, one-hot categorical ones, L2 penalty (alpha=1)",
            linear,
            "|coefficient| of the standardised inputs (target units per standard deviation; summed over a column's "
            "one-hot features)",
            per_column(np.abs(linear.named_steps["model"].coef_).reshape(-1), columns),
        ),
        (
            "regression tree",
            f"depth {tree_depth}, numeric columns as they are, one-hot categorical ones",
            tree,
            "impurity (squared error) decrease (feature_importances_, summed over a column's one-hot features)",
            per_column(tree.named_steps["model"].feature_importances_, columns),
        ),
    ]
    models = _scored(found, lambda model: float(r2_score(y_test, model.predict(x_test))), network_importance, "R²")
    return GlassboxComparison(float(network_accuracy), len(y_test), len(y_train), models, score_name="R²")


def _scored(
    found: list[tuple[str, str, Pipeline, str, np.ndarray]],
    score: Callable[[Pipeline], float],
    network_importance: Sequence[float] | np.ndarray,
    score_name: str = "accuracy",
) -> list[Glassbox]:
    """The fitted glassboxes (name, description, pipeline, importance kind, per-column importances) with their test
    `score` and the rank agreement of their importances with the network's."""
    return [
        Glassbox(
            name=name,
            description=description,
            accuracy=score(model),
            importance_kind=kind,
            importances=[float(v) for v in values],
            spearman=_spearman(values, network_importance),
            score_name=score_name,
        )
        for name, description, model, kind, values in found
    ]
