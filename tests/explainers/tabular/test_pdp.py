"""Partial dependence and ICE equal scikit-learn's `partial_dependence(method="brute", kind="both")` on the same grid,
for a numeric column, a categorical one and a pair, whatever the pass size."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.inspection import partial_dependence as sk_partial_dependence
from table_models import TorchClassifier, mixed_rows, mlp, softmax_of

from xaidash.explainers.tabular.pdp import pair_dependence, partial_dependence

X = mixed_rows()
NET = mlp(4, 3)
SK = TorchClassifier(NET, 3).fit(X)


@pytest.mark.parametrize("batch_rows", [65_536, 7, 300])  # one pass, passes smaller than the rows, a few points each
@pytest.mark.parametrize("target", [0, 2])
def test_numeric_column_equals_sklearn(batch_rows: int, target: int) -> None:
    grid = np.linspace(0.0, 10.0, 13)
    ref = sk_partial_dependence(SK, X, [1], custom_values={1: grid}, method="brute", kind="both")
    ours = partial_dependence(
        softmax_of(NET), torch.as_tensor(X), 1, torch.as_tensor(grid), target, batch_rows=batch_rows
    )
    np.testing.assert_allclose(ours.grid, ref["grid_values"][0])
    np.testing.assert_allclose(ours.ice, ref["individual"][target], atol=1e-12)
    np.testing.assert_allclose(ours.pdp, ref["average"][target], atol=1e-12)
    assert ours.ice.shape == (len(X), len(grid))
    np.testing.assert_allclose(ours.centred_ice, ours.ice - ours.ice[:, :1])
    np.testing.assert_allclose(ours.centred_pdp[0], 0.0)
    np.testing.assert_array_equal(ours.data, X[:, 1])
    assert ours.spread > 0.01, "the network should depend on the column: a flat curve would make this test vacuous"


def test_categorical_column_equals_sklearn() -> None:
    codes = np.arange(3.0)
    ref = sk_partial_dependence(
        SK, X, [3], categorical_features=[3], custom_values={3: codes}, method="brute", kind="both"
    )
    ours = partial_dependence(
        softmax_of(NET), torch.as_tensor(X), 3, torch.as_tensor(codes), 1, labels=("red", "green", "blue")
    )
    np.testing.assert_allclose(ours.ice, ref["individual"][1], atol=1e-12)
    np.testing.assert_allclose(ours.pdp, ref["average"][1], atol=1e-12)
    assert ours.labels == ("red", "green", "blue")


def test_binary_classifier_matches_sklearns_positive_class() -> None:
    net = mlp(4, 2, seed=3)
    grid = np.linspace(-2.0, 2.0, 9)
    ref = sk_partial_dependence(
        TorchClassifier(net, 2).fit(X), X, [0], custom_values={0: grid}, method="brute", kind="both"
    )
    ours = partial_dependence(softmax_of(net), torch.as_tensor(X), 0, torch.as_tensor(grid), 1, target_name="yes")
    np.testing.assert_allclose(ours.ice, ref["individual"][0], atol=1e-12)
    assert ours.units == "predicted probability of class 'yes'"


@pytest.mark.parametrize("batch_rows", [65_536, 100])
def test_pair_equals_sklearn(batch_rows: int) -> None:
    a, b = np.linspace(-2.0, 2.0, 6), np.arange(3.0)
    ref = sk_partial_dependence(
        SK, X, [0, 3], categorical_features=[3], custom_values={0: a, 3: b}, method="brute", kind="average"
    )
    ours = pair_dependence(
        softmax_of(NET),
        torch.as_tensor(X),
        (0, 3),
        (torch.as_tensor(a), torch.as_tensor(b)),
        2,
        names=("x", "colour"),
        batch_rows=batch_rows,
    )
    assert ours.pdp.shape == (6, 3)
    np.testing.assert_allclose(ours.pdp, ref["average"][2], atol=1e-12)
    assert ours.columns == ("x", "colour")


def test_rows_are_left_as_they_were() -> None:
    rows = torch.as_tensor(X).clone()
    partial_dependence(softmax_of(NET), rows, 0, torch.linspace(-1, 1, 5).double(), 0, batch_rows=64)
    assert torch.equal(rows, torch.as_tensor(X))
