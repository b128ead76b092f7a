"""Permutation importance agrees with scikit-learn's `permutation_importance` on the same network and rows (each
column's mean within the two 95 % intervals), for accuracy and log-loss, and is seeded."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.inspection import permutation_importance as sk_permutation_importance
from table_models import TorchClassifier, mixed_rows, mlp, softmax_of

from xaidash.explainers.tabular.importance import permutation_importance

REPEATS = 20
X = mixed_rows(200, seed=1)
NET = mlp(4, 3, seed=2)
SK = TorchClassifier(NET, 3).fit(X)


def _labels() -> np.ndarray:
    """The network's own classes with a fifth replaced at random: importances are then neither 0 nor 1."""
    rng = np.random.default_rng(5)
    y = SK.predict(X)
    flip = rng.random(len(y)) < 0.2
    y[flip] = rng.integers(0, 3, int(flip.sum()))
    return y


@pytest.mark.parametrize(("scoring", "sk_scoring"), [("accuracy", "accuracy"), ("log_loss", "neg_log_loss")])
def test_agrees_with_sklearn_within_the_intervals(scoring: str, sk_scoring: str) -> None:
    y = _labels()
    ref = sk_permutation_importance(SK, X, y, scoring=sk_scoring, n_repeats=REPEATS, random_state=0)
    ours = permutation_importance(
        softmax_of(NET), torch.as_tensor(X), torch.as_tensor(y), list("abcd"), repeats=REPEATS, scoring=scoring
    )
    t = stats.t.ppf(0.975, REPEATS - 1)
    for column, mean, std in zip(ours.columns, ref.importances_mean, ref.importances_std, strict=True):
        sk_half = t * std * np.sqrt(REPEATS / (REPEATS - 1)) / np.sqrt(REPEATS)  # scikit-learn's std is ddof=0
        assert abs(column.mean - mean) <= (column.high - column.mean) + sk_half, (column, mean)
        assert column.low <= column.mean <= column.high and len(column.values) == REPEATS
    assert ours.ranked()[0].column == "abcd"[int(np.argmax(ref.importances_mean))]
    assert ours.means().max() > 0.02, "a network that ignores every column would make this test vacuous"


def test_baseline_and_units() -> None:
    y = _labels()
    ours = permutation_importance(softmax_of(NET), torch.as_tensor(X), torch.as_tensor(y), list("abcd"), repeats=3)
    assert ours.baseline == pytest.approx(float((SK.predict(X) == y).mean()))
    assert ours.units == "drop in accuracy (share of rows)" and ours.rows == len(X) and ours.repeats == 3
    ll = permutation_importance(
        softmax_of(NET), torch.as_tensor(X), torch.as_tensor(y), list("abcd"), repeats=3, scoring="log_loss"
    )
    p = SK.predict_proba(X)[np.arange(len(y)), y]
    assert ll.baseline == pytest.approx(float(-np.log(p).mean()))
    assert "nats" in ll.units


def test_seeded_and_batch_size_free() -> None:
    y = torch.as_tensor(_labels())
    rows = torch.as_tensor(X)
    one = permutation_importance(softmax_of(NET), rows, y, list("abcd"), repeats=4, seed=7)
    two = permutation_importance(softmax_of(NET), rows, y, list("abcd"), repeats=4, seed=7, batch_rows=33)
    other = permutation_importance(softmax_of(NET), rows, y, list("abcd"), repeats=4, seed=8)
    assert [c.values for c in one.columns] == [c.values for c in two.columns]
    assert [c.values for c in one.columns] != [c.values for c in other.columns]
    assert torch.equal(rows, torch.as_tensor(X))


def test_a_column_the_model_ignores_scores_zero() -> None:
    net = mlp(4, 3, seed=2)
    with torch.no_grad():
        net[0].weight[:, 2] = 0.0  # column c no longer reaches the output
    y = torch.as_tensor(TorchClassifier(net, 3).fit(X).predict(X))
    ours = permutation_importance(softmax_of(net), torch.as_tensor(X), y, list("abcd"), repeats=5)
    c = ours.columns[2]
    assert c.mean == 0.0 and c.low == 0.0 and c.high == 0.0
