"""Each built-in table's recipe trains tabular_mlp to within a few points of a tuned scikit-learn model on the same
train/test split (the better of a standardised logistic regression and gradient boosting, each with the
hyperparameters cross-validation picked for it on the train split, recorded in models/zoo/tabular_mlp.py), and to
about the accuracy the recipe records; diabetes, a number to predict, the same in test R² against ridge regression and
gradient boosting regression. One torch thread, seconds per table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.data.modalities import modality_of
from xaidash.data.registry import get_info, load_split
from xaidash.models.registry import get_spec
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train

POINTS = 0.03  # "within a few points" of scikit-learn
# R² on diabetes' 89 test rows: the network is level with ridge (0.424 vs 0.426) and 5.4 points below boosting
# (0.478); the seed moves the network by 2 to 3 points (seeds 1, 2, 3: 0.453, 0.441, 0.441). Held within 3 points
# of ridge, the readable model, and within 6 of the better of the two.
R2_POINTS = 0.06
# The hyperparameters 5-fold cross-validation on each train split chose (grids in models/zoo/tabular_mlp.py).
LOGISTIC_C = {"breast_cancer": 1.0, "wine": 0.01, "planted": 0.01}
BOOSTING = {
    "breast_cancer": {"n_estimators": 300, "max_depth": 3, "learning_rate": 0.1},
    "wine": {"n_estimators": 300, "max_depth": 2, "learning_rate": 0.1},
    "planted": {"n_estimators": 300, "max_depth": 3, "learning_rate": 0.1},
}
# The regressors' counterparts, chosen by the same 5-fold cross-validation on diabetes' train split (seed 0).
RIDGE_ALPHA = {"diabetes": 10.0}
BOOSTING_REGRESSOR = {"diabetes": {"n_estimators": 100, "max_depth": 2, "learning_rate": 0.05}}


def sklearn_reference(dataset: str) -> float:
    """The better test accuracy of the two tuned scikit-learn models, fitted on the whole train split."""
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression

    info = get_info(dataset)
    adapter = modality_of(info.modality)
    train_split, test_split = load_split(dataset, "train"), load_split(dataset, "test")

    def prepared(rows: torch.Tensor) -> np.ndarray:  # standardised and one-hot, as the network reads them
        return adapter.prepare(rows, info, None, torch.device("cpu")).numpy()

    y, y_test = train_split.labels.numpy(), test_split.labels.numpy()
    logistic = LogisticRegression(C=LOGISTIC_C[dataset], max_iter=5000).fit(prepared(train_split.rows), y)
    boosting = GradientBoostingClassifier(random_state=0, **BOOSTING[dataset]).fit(train_split.rows.numpy(), y)
    return max(logistic.score(prepared(test_split.rows), y_test), boosting.score(test_split.rows.numpy(), y_test))


def sklearn_regressors(dataset: str) -> dict[str, float]:
    """Test R² of the two tuned scikit-learn regressors, fitted on the whole train split: ridge on the standardised
    rows, gradient boosting on the raw rows."""
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import Ridge

    info = get_info(dataset)
    adapter = modality_of(info.modality)
    train_split, test_split = load_split(dataset, "train"), load_split(dataset, "test")

    def prepared(rows: torch.Tensor) -> np.ndarray:
        return adapter.prepare(rows, info, None, torch.device("cpu")).numpy()

    y, y_test = train_split.labels.numpy(), test_split.labels.numpy()
    ridge = Ridge(alpha=RIDGE_ALPHA[dataset]).fit(prepared(train_split.rows), y)
    boosting = GradientBoostingRegressor(random_state=0, **BOOSTING_REGRESSOR[dataset])
    boosting.fit(train_split.rows.numpy(), y)
    return {
        "ridge": float(ridge.score(prepared(test_split.rows), y_test)),
        "boosting": float(boosting.score(test_split.rows.numpy(), y_test)),
    }


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("dataset", ["breast_cancer", "wine", "planted"])
def test_the_recipe_reaches_scikit_learn_on_the_same_split(dataset: str, one_thread) -> None:
    recipe = get_spec("tabular_mlp").recipes[dataset]
    result = train(TrainConfig(dataset=dataset, model="tabular_mlp", device="cpu"))
    summary = result.run.summary()
    assert summary["state"] == "completed" and summary["epochs_done"] == recipe.epochs
    acc = summary["test_acc"]
    reference = sklearn_reference(dataset)
    assert acc >= reference - POINTS, (dataset, acc, reference)
    assert recipe.expected_acc is not None and abs(acc - recipe.expected_acc) <= POINTS, (acc, recipe.expected_acc)


def test_the_regression_recipe_reaches_scikit_learn_on_the_same_split(one_thread) -> None:
    """diabetes through the engine: the test R² the recipe records (0.424), level with ridge and within R2_POINTS of
    the better of ridge and boosting (whose R² are those models/zoo/tabular_mlp.py records), its RMSE and MAE in the
    target's units."""
    dataset = "diabetes"
    recipe = get_spec("tabular_mlp").recipes[dataset]
    result = train(TrainConfig(dataset=dataset, model="tabular_mlp", device="cpu"))
    summary = result.run.summary()
    assert summary["state"] == "completed" and summary["epochs_done"] == recipe.epochs
    assert summary["test_acc"] is None and summary["confusion"] is None
    r2 = summary["test_r2"]
    reference = sklearn_regressors(dataset)
    assert reference == pytest.approx({"ridge": 0.426, "boosting": 0.478}, abs=0.001)  # the recorded references
    assert r2 >= reference["ridge"] - POINTS, (r2, reference)
    assert r2 >= max(reference.values()) - R2_POINTS, (r2, reference)
    assert recipe.expected_r2 is not None and abs(r2 - recipe.expected_r2) <= POINTS, (r2, recipe.expected_r2)
    # the errors are in the target's units: beside the spread of diabetes' test targets (about 78)
    spread = float(load_split(dataset, "test").labels.std())
    assert 0 < summary["test_mae"] < summary["test_rmse"] < spread
