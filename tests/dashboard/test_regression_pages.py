"""A regression run (diabetes: a number to predict) on the pages through AppTest: Explain names the prediction by its
value in the target's units with the true value and the error (the model's own prediction, never a percentage or a
class chart), the target is the one output (no class to pick), the legends name the predicted value; Train shows R²,
RMSE and MAE and says calibration applies to classifiers; the report (JSON and HTML) keeps the value and the truth."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from app_pages import assert_ok, open_run_page, texts
from table_runs import fitted_bundle, table_run

from xaidash.dashboard.components.curves import R2, curve_frame
from xaidash.dashboard.components.embedding_map import value_bands
from xaidash.dashboard.components.session_results import KEY
from xaidash.dashboard.run_facts import picker_label, run_row
from xaidash.data.registry import load_split
from xaidash.explainers.figures.report import ExplainReport, ReportSettings, session_report
from xaidash.explainers.metrics.registry import metrics_for
from xaidash.explainers.robust.table_value_counterfactual import RANGE_HELP, ValueRange, value_change_text

TIMEOUT = 180
DIABETES = "diabetes"


@pytest.fixture(scope="module")
def diabetes_run(tmp_path_factory: pytest.TempPathFactory):
    """Two diabetes runs in one runs root (Side by side compares them); the later one is the selected run."""
    root = tmp_path_factory.mktemp("regression_pages")
    table_run(root, fitted_bundle(DIABETES, seed=1))
    return table_run(root, fitted_bundle(DIABETES))


def test_explain_shows_the_predicted_value_with_the_truth_and_the_error(diabetes_run, monkeypatch) -> None:
    at = open_run_page(diabetes_run, "explain", monkeypatch, TIMEOUT, explain_methods_kept=["ig"])
    bundle = fitted_bundle(DIABETES)
    target = bundle.regression
    test = load_split(DIABETES, "test")
    value = float(bundle.predict_proba(test.rows[:1])[0, 0])
    truth = float(test.labels[0])
    lines = texts(at.markdown)
    head = next(v for v in lines if v.startswith("**test #0**"))
    assert f"true: **{target.value_text(truth)}**" in head
    assert f"predicted: **disease progression: {target.value_text(value)}**" in head
    assert re.search(r"\(error [+−]", head) and "%" not in head
    # one output: the target is said, not picked; the maps' legends name the predicted value, never a logit
    assert not [s for s in at.selectbox if s.label == "Target class"]
    assert any("Target:** the predicted disease progression" in v for v in lines)
    legends = [v for v in lines if 'class="xai-cbar"' in v]
    assert legends and all("logit" not in v for v in legends)
    assert any("contribution to the predicted disease progression per column" in v for v in legends)
    # the test rows' table: true and predicted values and their difference, no class or probability
    rows = next(d.value for d in at.dataframe if "test #" in d.value.columns)
    assert "probability" not in rows.columns
    assert np.allclose(rows["error"], rows["predicted"] - rows["true"])
    assert rows["predicted"].iloc[0] == pytest.approx(value, rel=1e-4)
    assert not [c for c in at.main.get("vega_lite_chart") if "probability" in str(c.proto.spec)]
    # the row's what-if: its value before and after (unchanged here), never a class table
    assert f"**disease progression: {target.value_text(value)} → {target.value_text(value)} (+0)**" in lines
    # the counterfactual is the regression one: a range of values to reach, never a class to pick
    assert not [s for s in at.selectbox if s.key == "attack_0_cf_to"]
    assert at.text_input(key="attack_0_cf_range").label == "Range of disease progression to reach"


def _row_and_default(bundle):
    """Test row 0, its predicted value, and the default range: past the training median (numpy's) to the other side."""
    row = load_split(DIABETES, "test").rows[0]
    before = float(bundle.predict_proba(row.unsqueeze(0))[0, 0])
    median = float(np.median(load_split(DIABETES, "train").labels.numpy()))
    return row, before, median, (ValueRange(high=median) if before > median else ValueRange(low=median))


def _counterfactual_part(at):
    parts = at.session_state[KEY]
    assert (0, "counterfactual") in parts
    return parts[(0, "counterfactual")]()


def test_counterfactual_reaches_the_default_range_or_says_it_cannot(diabetes_run, monkeypatch) -> None:
    at = open_run_page(diabetes_run, "explain", monkeypatch, TIMEOUT, explain_methods_kept=["ig"])
    bundle = fitted_bundle(DIABETES)
    target = bundle.regression
    row, before, median, default = _row_and_default(bundle)
    box = at.text_input(key="attack_0_cf_range")
    assert box.placeholder == f"{default.text(target)} (the default: past the training median)"
    assert f"training median of disease progression ({target.value_text(median)})" in box.proto.help
    at.button(key="attack_0_cf_run").click().run()
    assert_ok(at)
    found = [v for v in texts(at.success) if v.startswith("Counterfactual: disease progression")]
    refused = [v for v in texts(at.warning) if v.startswith("Not reachable within 3 changed columns")]
    assert len(found) + len(refused) == 1, (texts(at.success), texts(at.warning))
    assert "the default: past the training median" in (found + refused)[0]
    extra = _counterfactual_part(at)
    assert extra.data["goal"]["default"] is True and extra.data["value_before"] == pytest.approx(before, rel=1e-5)
    assert extra.title == f"Counterfactual: the predicted disease progression {default.text(target)}"
    if refused:
        assert extra.data["found"] is False and not extra.table
        return
    # the changed row, run through the model again, is predicted inside the range the page says it reached
    changed = torch.tensor(extra.data["row"], dtype=torch.float32)
    after = float(bundle.predict_proba(changed.unsqueeze(0))[0, 0])
    assert default.contains(after) and extra.data["value_after"] == pytest.approx(after, rel=1e-5)
    line = f"**Predicted {value_change_text(target, before, after)}**"
    assert line in texts(at.markdown)
    frame = next(d.value for d in at.dataframe if "→ changed to" in d.value.columns)
    moved = [c.name for j, c in enumerate(bundle.info.columns) if changed[j] != row[j]]
    assert sorted(frame["column"]) == sorted(moved) and len(moved) == extra.data["change_count"]
    assert [r["column"] for r in extra.table] == list(frame["column"])


def test_counterfactual_to_a_typed_range_and_into_the_report(diabetes_run, monkeypatch) -> None:
    at = open_run_page(diabetes_run, "explain", monkeypatch, TIMEOUT, explain_methods_kept=["ig"])
    bundle = fitted_bundle(DIABETES)
    target = bundle.regression
    row, before, _, _ = _row_and_default(bundle)
    wanted = ValueRange(low=round(before + 10), high=round(before + 40))  # a small move up: within reach
    at.text_input(key="attack_0_cf_range").set_value(f"between {wanted.low:g} and {wanted.high:g}").run()
    at.multiselect(key="attack_0_cf_fixed").set_value(["age", "sex"]).run()
    at.button(key="attack_0_cf_run").click().run()
    assert_ok(at)
    extra = _counterfactual_part(at)
    assert extra.data["goal"] == {"low": wanted.low, "high": wanted.high, "text": wanted.text(target), "default": False}
    assert extra.data["found"] is True, texts(at.warning)
    said = next(v for v in texts(at.success) if v.startswith("Counterfactual: "))
    assert f"({wanted.text(target)})" in said
    changed = torch.tensor(extra.data["row"], dtype=torch.float32)
    after = float(bundle.predict_proba(changed.unsqueeze(0))[0, 0])
    assert wanted.contains(after)
    names = [c.name for c in bundle.info.columns]
    assert (
        changed[names.index("age")] == row[names.index("age")]
        and changed[names.index("sex")] == row[names.index("sex")]
    )
    assert "Kept as they were: age, sex." in texts(at.caption)
    # the report: the value counterfactual's JSON and its lines and table in the HTML page
    test = load_split(DIABETES, "test")
    values = bundle.predict_proba(test.rows[:1]).numpy()
    report = session_report(bundle, diabetes_run.id, [("test #0", test.rows[0], float(test.labels[0]))], values, [],
                            ReportSettings(methods=[]))  # fmt: skip
    report.extras = [extra]
    d = json.loads(report.to_json())["extras"][0]
    assert d["kind"] == "counterfactual" and d["result"]["value_after"] == pytest.approx(after, rel=1e-5)
    assert d["result"]["target"]["name"] == "disease progression" and d["result"]["target"]["unit"] == ""
    page = report.to_html()
    assert f"Predicted {value_change_text(target, before, after)}" in page
    assert "→ changed to</th>" in page and extra.table[0]["→ changed to"] in page
    back = ExplainReport.from_json(report.to_json(), report.files())
    assert back.extras[0].data["value_before"] == pytest.approx(before, rel=1e-5)


def test_counterfactual_range_refused_in_one_line(diabetes_run, monkeypatch) -> None:
    at = open_run_page(diabetes_run, "explain", monkeypatch, TIMEOUT, explain_methods_kept=["ig"])
    target = fitted_bundle(DIABETES).regression
    at.text_input(key="attack_0_cf_range").set_value("lots").run()
    assert texts(at.error) == [f"Cannot read the range 'lots': give it as {RANGE_HELP}."]
    assert not [b for b in at.button if b.key == "attack_0_cf_run"]  # nothing to search for
    at.text_input(key="attack_0_cf_range").set_value("between 200 and 100").run()
    assert texts(at.error) == ["The range 'between 200 and 100' starts above its end: give the lower value first."]
    at.text_input(key="attack_0_cf_range").set_value("at least 0").run()  # every prediction is already there
    at.button(key="attack_0_cf_run").click().run()
    errors = texts(at.error)
    assert len(errors) == 1 and errors[0].startswith(
        "No counterfactual: The model already predicts disease progression"
    )
    assert f"at least {target.value_text(0.0)}: give a range it does not reach yet." in errors[0]
    assert not at.exception and (0, "counterfactual") not in at.session_state[KEY]


def test_compare_does_not_offer_a_random_other_class(diabetes_run, monkeypatch) -> None:
    at = open_run_page(diabetes_run, "compare", monkeypatch, TIMEOUT)
    assert_ok(at)
    offered = {b.key for b in at.checkbox if str(b.key).startswith("compare_metric_")}
    expected = {f"compare_metric_{m.id}" for m in metrics_for("compare", "table", fitted_bundle(DIABETES))}
    assert offered == expected and "compare_metric_deletion_auc" in offered
    assert "compare_metric_random_logit" not in offered  # one output: no other class to explain


def test_train_shows_r2_and_errors_and_no_calibration(diabetes_run, monkeypatch) -> None:
    at = open_run_page(diabetes_run, "train", monkeypatch, TIMEOUT)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Test R²"] == "0.40" and metrics["Test RMSE"] == "60" and metrics["Test MAE"] == "48"
    assert "Test accuracy" not in metrics
    captions = texts(at.caption)
    assert "Calibration applies to classifiers; this run predicts a number (disease progression)." in captions
    assert any("test R² 0.40 · RMSE 60 · MAE 48 (disease progression)" in c for c in captions)  # the sidebar


def test_run_facts_and_curves_of_a_regression_run(diabetes_run) -> None:
    assert " · R² 0.40 · " in picker_label(diabetes_run)
    row = run_row(diabetes_run)
    assert row["test R²"] == 0.4 and row["test acc"] is None
    frame = curve_frame([{"kind": "epoch", "epoch": 1, "step": 10, "val_loss": 0.6, "val_r2": 0.41}])
    assert frame[frame.metric == R2]["value"].tolist() == [0.41]


def test_the_report_keeps_the_value_and_the_truth(diabetes_run) -> None:
    bundle = fitted_bundle(DIABETES)
    test = load_split(DIABETES, "test")
    values = bundle.predict_proba(test.rows[:2]).numpy()
    inputs = [(f"test #{i}", test.rows[i], float(test.labels[i])) for i in range(2)]
    report = session_report(bundle, diabetes_run.id, inputs, values, [], ReportSettings(methods=[]))
    d = report.to_dict()
    assert d["runs"][0]["regression"]["name"] == "disease progression"
    first = d["inputs"][0]
    assert first["label"] == {
        "value": float(test.labels[0]),
        "text": bundle.regression.value_text(float(test.labels[0])),
    }
    assert first["predictions"]["A"] == [
        {"class": 0, "name": "disease progression", "probability": None, "value": float(values[0, 0])}
    ]
    back = ExplainReport.from_json(report.to_json())
    assert back.run.regression == bundle.regression and back.inputs[1].label == float(test.labels[1])
    html = report.to_html()
    assert f"Predicted: disease progression: {bundle.regression.value_text(float(values[0, 0]))} (error" in html
    assert "probability</th>" not in html and "each input's predicted class" not in html
    assert "<td>the predicted disease progression (the model" in html


def test_side_by_side_compares_two_predicted_values(diabetes_run, monkeypatch) -> None:
    at = open_run_page(diabetes_run, "side_by_side", monkeypatch, TIMEOUT)
    lines = texts(at.markdown)
    assert any(v.startswith("On the first 89 test rows (disease progression): **A**") and "R² " in v for v in lines)
    assert not [s for s in at.selectbox if s.label == "Target class"]
    heads = [v for v in lines if v.startswith("**test #0**")]
    assert heads and "(disease progression)" in heads[0] and "agree" not in heads[0]
    blocks = [v for v in lines if v.startswith("**A · ") or v.startswith("**B · ")]
    assert len(blocks) == 2 and all("disease progression: " in v and "(error " in v for v in blocks)
    assert not [v for v in texts(at.success) if "same class" in v]


def test_embeddings_colour_rows_by_the_quintile_of_their_value(diabetes_run, monkeypatch) -> None:
    at = open_run_page(diabetes_run, "embeddings", monkeypatch, TIMEOUT)
    titles = [json.loads(c.proto.spec).get("title", "") for c in at.main.get("vega_lite_chart")]
    assert any(re.search(r"89 test samples · R² -?\d\.\d\d$", str(t)) for t in titles), titles
    assert next(r for r in at.radio if r.label == "Colour by").options == ["true", "predicted", "error"]
    # the bands: a fifth of the true values each (numpy's quantiles), named by their values in the target's units
    truth = load_split(DIABETES, "test").labels.numpy().astype(np.float64)
    target = fitted_bundle(DIABETES).regression
    edges, names = value_bands(truth, target)
    assert np.allclose(edges, np.quantile(truth, [0.2, 0.4, 0.6, 0.8]))
    assert names[0] == f"Q1: {target.value_text(truth.min())}–{target.value_text(edges[0])}"
    counts = np.bincount(np.searchsorted(edges, truth, side="right"), minlength=5)
    assert counts.min() >= len(truth) // 5 - 2


def test_train_form_offers_diabetes_with_its_measured_r2(diabetes_run, monkeypatch) -> None:
    at = open_run_page(diabetes_run, "train", monkeypatch, TIMEOUT)
    assert "diabetes (built in)" in at.selectbox(key="train_dataset").options
    at.selectbox(key="train_dataset").set_value(DIABETES).run()
    assert any("(tested: R² 0.42 on diabetes)" in v for v in texts(at.markdown))
