"""`global_report` on a tabular_mlp fitted to the planted table: the true columns rank top in permutation importance,
the partial dependence is the network's, the surrogate names real columns, the report is JSON-able; bad requests are
refused in one line before any work."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from image_bundles import fresh_bundle
from table_runs import fitted_bundle

from xaidash.data.registry import TableSplit, load_split
from xaidash.explainers.figures.result_json import result_document
from xaidash.explainers.guard import evaluating
from xaidash.explainers.params import ExplainError
from xaidash.explainers.tabular import GlobalOptions, column_dependence, global_report, pair_map
from xaidash.explainers.tabular.pdp import partial_dependence


@pytest.fixture(scope="module")
def planted():
    torch.set_num_threads(1)
    bundle = fitted_bundle("planted")
    options = GlobalOptions(pair=("x0", "x1"), repeats=5, grid_points=20, pair_points=8, shap_rows=60)
    return bundle, global_report(bundle, options)


def test_true_columns_rank_top(planted) -> None:
    bundle, report = planted
    top = {c.column for c in report.importance.ranked()[:3]}
    assert top == set(bundle.info.truth_columns) == {"x0", "x1", "x2"}
    for c in report.importance.ranked()[3:]:
        assert c.low <= 0.02, f"noise column {c.column} should not matter: {c}"
    assert report.network_accuracy > 0.9 and report.rows == 400
    assert [d.column for d in report.dependence] == [c.column for c in report.importance.ranked()[:4]]


def test_partial_dependence_is_the_networks(planted) -> None:
    bundle, report = planted
    x2 = next(d for d in report.dependence if d.column == "x2")
    assert x2.pdp[-1] - x2.pdp[0] > 0.5, "the label rises with x2: so must the mean prediction"
    assert len(x2.grid) == 20 and x2.grid[0] == pytest.approx(bundle.info.columns[2].low, rel=1e-5)
    split = load_split("planted", "test")
    assert isinstance(split, TableSplit)

    def predict(rows: torch.Tensor) -> torch.Tensor:
        return bundle.predict_proba(rows)

    with evaluating(bundle.model):
        again = partial_dependence(predict, split.rows, 2, torch.as_tensor(x2.grid, dtype=torch.float32), 1)
    np.testing.assert_allclose(x2.ice, again.ice, atol=1e-6)
    assert report.units == "predicted probability of class 'positive'" and x2.target == "positive"
    assert report.pair is not None and report.pair.pdp.shape == (8, 8)
    assert np.ptp(report.pair.pdp) > 0.5, "x0 * x1 sets the label: the pair's map spans most of [0, 1]"


def test_surrogate_glassbox_and_json(planted) -> None:
    _, report = planted
    s = report.surrogate
    assert s.held_out == 400 and 0.8 < s.fidelity <= 1.0 and "x2" in s.rules
    assert {m.name for m in report.glassbox.models} == {"logistic regression", "decision tree"}
    document, files = result_document("global", report, run="r", inputs={}, parameters={})
    text = json.dumps(document, allow_nan=False)
    assert '"fidelity"' in text and '"centred_pdp"' in text and '"spearman"' in text
    assert any(name.startswith("arrays/") for name in files), "the ICE curves (400 x 20) go to .npy files"


def test_global_shap_finds_the_truth_and_the_interaction(planted) -> None:
    bundle, report = planted
    g = report.shap
    assert g is not None and g.method == "shap_kernel" and g.rows == 60 and g.values.shape == (60, 9)
    assert {c for c, _ in g.ranked()[:3]} == set(bundle.info.truth_columns)
    by_column = {d.column: d for d in g.dependence}
    assert set(by_column) == {d.column for d in report.dependence}
    assert by_column["x0"].colour_by == "x1" and by_column["x1"].colour_by == "x0", "x0 * x1 sets the label"
    assert g.units == "contribution to the predicted probability of class 'positive'"


def test_default_target_and_named_target() -> None:
    bundle = fitted_bundle("planted")
    report = global_report(bundle, GlobalOptions(columns=["group"], target="negative", repeats=1, rows=50, shap_rows=0))
    assert report.target == "negative" and report.target_index == 0
    g = report.dependence[0]
    assert g.labels == ("red", "green", "blue") and list(g.grid) == [0.0, 1.0, 2.0]
    assert global_report(bundle, GlobalOptions(columns=["x0"], repeats=1, rows=20, shap_rows=0)).target == "positive"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (GlobalOptions(columns=["x0", "nope"]), "Unknown column 'nope': the columns are x0, x1"),
        (GlobalOptions(pair=["x0", "x0"]), "A pair needs two different columns, not 'x0' twice."),
        (GlobalOptions(pair=["x0", "x1", "x2"]), "A pair is two columns, not 3"),
        (GlobalOptions(target="5"), "Class index 5 is out of range: the model has classes 0..1."),
        (GlobalOptions(target="maybe"), "Class 'maybe' is not one of the model's classes (negative, positive)"),
        (GlobalOptions(rows=0), "rows must be at least 1"),
        (GlobalOptions(surrogate_depth=12), "depth must be 1..8"),
        (GlobalOptions(shap_method="gradcam"), "Unknown method 'gradcam' for table models"),
    ],
)
def test_bad_requests_are_one_line(options: GlobalOptions, message: str) -> None:
    with pytest.raises(ExplainError) as err:
        global_report(fitted_bundle("planted"), options)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_model_of_images_is_refused() -> None:
    with pytest.raises(ExplainError, match="does not read table rows"):
        global_report(fresh_bundle("mlp"))


def test_one_column_or_pair_again_equals_the_reports(planted) -> None:
    bundle, report = planted
    options = GlobalOptions(repeats=5, grid_points=20, pair_points=8)
    x2 = column_dependence(bundle, "x2", options)
    np.testing.assert_array_equal(x2.ice, next(d for d in report.dependence if d.column == "x2").ice)
    assert report.pair is not None
    np.testing.assert_array_equal(pair_map(bundle, ["x0", "x1"], options).pdp, report.pair.pdp)
    with pytest.raises(ExplainError, match="Unknown column 'x9'"):
        column_dependence(bundle, "x9")
    with pytest.raises(ExplainError, match="two different columns"):
        pair_map(bundle, ["x1", "x1"])
