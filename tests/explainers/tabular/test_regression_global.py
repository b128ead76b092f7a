"""The global view of a model that predicts a number (`tabular_mlp` fitted to `diabetes`), against scikit-learn:
PDP and ICE equal `partial_dependence(method="brute")` on a regressor wrapper of the same network; permutation
importance is the drop in R² and agrees with `permutation_importance(scoring="r2")` within the intervals; the surrogate
is a DecisionTreeRegressor whose fidelity is its R² against the network's predictions; the glassboxes are ridge
regression and a regression tree with their test R² beside the network's; `xaidash global` writes its JSON in units
and R²."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.inspection import partial_dependence as sk_partial_dependence
from sklearn.inspection import permutation_importance as sk_permutation_importance
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeRegressor
from table_runs import fitted_bundle, table_run

from xaidash.data.registry import TableSplit, load_split
from xaidash.explainers.params import ExplainError
from xaidash.explainers.tabular.api import (
    GlobalOptions,
    GlobalReport,
    column_dependence,
    global_report,
    pair_map,
    scorings,
)
from xaidash.explainers.tabular.grids import column_grid
from xaidash.explainers.tabular.passes import bundle_predict
from xaidash.explainers.tabular.pdp import partial_dependence
from xaidash.models import ModelBundle

REPEATS = 20


class NetworkRegressor(RegressorMixin, BaseEstimator):
    """The bundle's network as a scikit-learn regressor of raw rows (what `partial_dependence` and
    `permutation_importance` call)."""

    def __init__(self, bundle: ModelBundle | None = None) -> None:
        self.bundle = bundle

    def fit(self, x: np.ndarray, y: np.ndarray | None = None) -> NetworkRegressor:
        self.fitted_ = True
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        assert self.bundle is not None
        return self.bundle.predict_proba(torch.as_tensor(x, dtype=torch.float32))[:, 0].double().numpy()


def _split(which: str) -> TableSplit:
    s = load_split("diabetes", which)  # type: ignore[arg-type]
    assert isinstance(s, TableSplit)
    return s


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    torch.set_num_threads(1)
    return fitted_bundle("diabetes")


@pytest.fixture(scope="module")
def report(bundle: ModelBundle) -> GlobalReport:
    return global_report(bundle, GlobalOptions(columns=["bmi", "s5"], repeats=REPEATS, grid_points=12, shap_rows=0))


def test_pdp_and_ice_equal_scikit_learn_s_on_a_regressor(bundle: ModelBundle) -> None:
    x = _split("test").rows
    column = bundle.info.columns[2]  # bmi
    grid, _ = column_grid(column, x[:, 2], 15)
    ours = partial_dependence(bundle_predict(bundle), x, 2, grid, 0, name="bmi", target_name="disease progression")
    ref = sk_partial_dependence(
        NetworkRegressor(bundle).fit(x.numpy()),
        x.double().numpy(),
        [2],
        custom_values={2: grid.double().numpy()},
        method="brute",
        kind="both",
    )
    np.testing.assert_allclose(ours.pdp, ref["average"][0], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(ours.ice, ref["individual"][0], rtol=1e-4, atol=1e-3)
    assert ours.pdp.max() - ours.pdp.min() > 10.0  # in units of disease progression, not a probability


def test_the_report_reads_in_units_and_r2(report: GlobalReport, bundle: ModelBundle) -> None:
    assert report.task == "values" and report.score_name == "R²" and report.target == "disease progression"
    assert report.value_axis == "predicted disease progression"
    assert report.units == "predicted disease progression, in the target's units"
    assert all(d.axis == "predicted disease progression" and d.units == report.units for d in report.dependence)
    test = _split("test")
    pred = NetworkRegressor(bundle).predict(test.rows.numpy())
    assert report.network_score == pytest.approx(r2_score(test.labels.numpy(), pred), abs=1e-6)
    assert (
        report.importance.scoring == "r2" and report.importance.units == "drop in R² (share of the target's variance)"
    )
    assert report.importance.baseline == pytest.approx(report.network_score, abs=1e-6)  # all 89 test rows
    # what the page asks again when the column or the pair changes reads the same way
    again = column_dependence(bundle, "bmi", GlobalOptions(grid_points=12))
    np.testing.assert_allclose(again.pdp, report.dependence[0].pdp, rtol=1e-5)
    assert again.axis == report.value_axis and pair_map(bundle, ["bmi", "bp"]).axis == report.value_axis


def test_permutation_importance_agrees_with_scikit_learn_s_r2(report: GlobalReport, bundle: ModelBundle) -> None:
    test = _split("test")
    ref = sk_permutation_importance(
        NetworkRegressor(bundle).fit(test.rows.numpy()),
        test.rows.double().numpy(),
        test.labels.double().numpy(),
        scoring="r2",
        n_repeats=REPEATS,
        random_state=0,
    )
    t = stats.t.ppf(0.975, REPEATS - 1)
    ours = report.importance
    for column, mean, std in zip(ours.columns, ref.importances_mean, ref.importances_std, strict=True):
        sk_half = t * std * np.sqrt(REPEATS / (REPEATS - 1)) / np.sqrt(REPEATS)  # scikit-learn's std is ddof=0
        assert abs(column.mean - mean) <= (column.high - column.mean) + sk_half, (column, mean)
        assert column.low <= column.mean <= column.high
    top = {c.column for c in ours.ranked()[:2]}
    assert top & {bundle.info.columns[int(j)].name for j in np.argsort(-ref.importances_mean)[:2]}
    assert ours.means().max() > 0.05


def test_the_surrogate_is_a_regression_tree_with_r2_fidelity(report: GlobalReport, bundle: ModelBundle) -> None:
    s = report.surrogate
    assert s.kind == "values" and s.fidelity_name == "R²" and "R²" in s.fidelity_text()
    train, test = _split("train"), _split("test")
    net = NetworkRegressor(bundle)
    tree = DecisionTreeRegressor(max_depth=s.depth, random_state=0).fit(train.rows.numpy(), net.predict(train.rows))
    on_test = tree.predict(test.rows.numpy())
    assert s.fidelity == pytest.approx(r2_score(net.predict(test.rows.numpy()), on_test), abs=1e-6)
    assert s.accuracy == pytest.approx(r2_score(test.labels.numpy(), on_test), abs=1e-6)
    leaves = [n for n in s.nodes if n.yes is None]
    assert sorted(round(n.value or 0.0, 4) for n in leaves) == sorted(round(v, 4) for v in set(on_test.tolist()))
    assert all(rule.startswith("if ") and "disease progression" in rule for rule in s.leaf_rules())
    assert 0.3 < s.fidelity <= 1.0


def test_the_glassboxes_are_regressors_scored_by_r2(report: GlobalReport) -> None:
    box = report.glassbox
    assert box.score_name == "R²" and [m.name for m in box.models] == ["ridge regression", "regression tree"]
    train, test = _split("train"), _split("test")
    ridge = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(train.rows.numpy(), train.labels.numpy())
    assert box.models[0].score == pytest.approx(
        r2_score(test.labels.numpy(), ridge.predict(test.rows.numpy())), abs=1e-5
    )
    tree = DecisionTreeRegressor(max_depth=5, random_state=0).fit(train.rows.numpy(), train.labels.numpy())
    assert box.models[1].score == pytest.approx(
        r2_score(test.labels.numpy(), tree.predict(test.rows.numpy())), abs=1e-6
    )
    assert box.network_score == pytest.approx(report.network_score)
    assert box.gain_over("ridge regression") == pytest.approx(report.network_score - box.models[0].score)
    assert all(m.spearman is not None and m.score_name == "R²" for m in box.models)


def test_a_classifier_s_scoring_is_refused_in_one_line(bundle: ModelBundle) -> None:
    assert scorings(bundle) == ("r2",)
    assert scorings(fitted_bundle("planted", steps=1)) == ("accuracy", "log_loss")
    with pytest.raises(ExplainError, match="does not apply to a model that predicts a number; choose r2"):
        global_report(bundle, GlobalOptions(scoring="accuracy"))
    with pytest.raises(ExplainError, match=r"predicts one number \(disease progression\), so there is no class"):
        global_report(bundle, GlobalOptions(target="1"))


def test_xaidash_global_on_a_diabetes_run(
    bundle: ModelBundle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from xaidash.dashboard.cli import main

    run = table_run(tmp_path / "runs", bundle)
    out = tmp_path / "global"
    argv = ["global", "--run", str(run.path), "--columns", "bmi", "--pair", "bmi,bp", "--repeats", "3", "--grid", "8"]
    assert main([*argv, "--pair-grid", "5", "--shap-rows", "6", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "the predicted disease progression" in text and "drop in R²" in text and "fidelity R²" in text
    assert "Test R² on 89 rows" in text and "ridge regression" in text
    doc = json.loads((out / "global.json").read_text())
    assert (
        doc["task"] == "values" and doc["score_name"] == "R²" and doc["value_axis"] == "predicted disease progression"
    )
    assert doc["importance"]["scoring"] == "r2" and doc["surrogate"]["fidelity_name"] == "R²"
    assert doc["glassbox"]["score_name"] == "R²"
    assert "disease progression" in doc["shap"]["units"]
    pdp = np.asarray(doc["dependence"][0]["pdp"])
    assert pdp.min() > 0 and pdp.max() - pdp.min() > 10.0  # values in units
    assert (out / "surrogate_tree.png").exists() and (out / "pdp_bmi_bp.png").exists()
