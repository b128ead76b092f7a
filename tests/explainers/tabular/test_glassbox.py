"""Glassbox references on the planted table: trained on the given training split and scored on the test split as an
independent scikit-learn pipeline scores them, importances summed per column, compared by Spearman's rank correlation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import xaidash.data.sets  # noqa: F401  (registers the tables)
from xaidash.data.registry import TableSplit, get_info, load_split
from xaidash.explainers.tabular.glassbox import compare_glassboxes


def _planted() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    parts = []
    for split in ("train", "test"):
        s = load_split("planted", split)
        assert isinstance(s, TableSplit)
        parts.append((s.rows.double().numpy(), s.labels.numpy()))
    return parts[0], parts[1]


def test_accuracies_importances_and_agreement() -> None:
    info = get_info("planted")
    train, test = _planted()
    network = [0.0, 0.5, 1.0, 0.1, 0.1, 0.2, 0.0, 0.3, 0.4]  # a stand-in for the network's importances
    got = compare_glassboxes(train, test, info.columns, 0.97, network)
    logistic, tree = got.models
    assert (logistic.name, tree.name) == ("logistic regression", "decision tree")
    assert got.train_rows == 1600 and got.test_rows == 400 and got.network_accuracy == 0.97

    numeric = [j for j, c in enumerate(info.columns) if not c.categorical]
    reference = make_pipeline(
        ColumnTransformer([("n", StandardScaler(), numeric), ("c", OneHotEncoder(sparse_output=False), [8])]),
        LogisticRegression(max_iter=2000, random_state=0),
    ).fit(*train)
    assert logistic.accuracy == pytest.approx(float((reference.predict(test[0]) == test[1]).mean()), abs=1e-9)
    coef = np.abs(reference[-1].coef_).mean(0)
    expected = [*coef[: len(numeric)], coef[len(numeric) :].sum()]  # the one-hot group summed into `group`
    np.testing.assert_allclose(logistic.importances, expected, rtol=1e-6)

    assert sum(tree.importances) == pytest.approx(1.0)
    assert int(np.argmax(tree.importances)) == 2, "x2 alone sets most labels: the tree splits on it first"
    for model in got.models:
        assert model.spearman == pytest.approx(stats.spearmanr(model.importances, network).statistic)
        assert model.importance_kind
    assert got.gain_over("decision tree") == pytest.approx(0.97 - tree.accuracy)
    assert 0.8 < logistic.accuracy < 0.97 and 0.8 < tree.accuracy < 0.99


def test_constant_importances_have_no_rank_correlation() -> None:
    train, test = _planted()
    got = compare_glassboxes(train, test, get_info("planted").columns, 0.9, [0.0] * 9)
    assert all(m.spearman is None for m in got.models)
