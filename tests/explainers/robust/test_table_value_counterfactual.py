"""What-if and counterfactuals for a model that predicts a number (`tabular_mlp` trained on `diabetes`): the what-if
prediction before and after is the value in units; a counterfactual brings the predicted value into the range the
user gives (or past the training median by default) with the fewest changed columns found, each within the data's
range, fixed columns left alone; an unreachable range gives a one-line 'not reachable'; bad ranges one line each."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from table_bundles import split, trained_bundle

from xaidash.explainers.modalities.table_values import training_rows
from xaidash.explainers.params import ExplainError
from xaidash.explainers.robust.table_counterfactual import candidate_values, table_counterfactual
from xaidash.explainers.robust.table_value_counterfactual import (
    ValueRange,
    default_range,
    parse_range,
    table_value_counterfactual,
    target_median,
)
from xaidash.explainers.robust.what_if import what_if
from xaidash.models import ModelBundle


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    return trained_bundle("diabetes")


def _value(bundle: ModelBundle, rows: torch.Tensor) -> np.ndarray:
    return bundle.predict_proba(rows.reshape(-1, rows.shape[-1]))[:, 0].double().numpy()


def _row_above_median(bundle: ModelBundle) -> torch.Tensor:
    rows = split("diabetes").rows
    values = _value(bundle, rows)
    return rows[int(np.argmax(values > target_median(bundle) + 40))]


def test_what_if_gives_the_values_before_and_after(bundle: ModelBundle) -> None:
    row = split("diabetes").rows[0]
    edited = what_if(bundle, row, {"bmi": "35"}, method="ig")
    before, after = _value(bundle, row), _value(bundle, edited.row)
    assert edited.before_value == pytest.approx(float(before[0])) and edited.after_value == pytest.approx(
        float(after[0])
    )
    text = edited.summary(bundle.info.classes)
    t = bundle.info.regression
    assert t is not None
    assert text.startswith(f"bmi: {t.value_text(float(row[2]))} → 35")
    assert f"disease progression {t.value_text(float(before[0]))} → {t.value_text(float(after[0]))}" in text
    assert "%" not in text
    assert edited.explanation is not None and abs(edited.explanation.item(0)).max() > 0.1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("at most 100", ValueRange(high=100.0)),
        ("<= 100", ValueRange(high=100.0)),
        ("at least 200.5", ValueRange(low=200.5)),
        (">=200", ValueRange(low=200.0)),
        ("between 100 and 150", ValueRange(100.0, 150.0)),
        ("100..150", ValueRange(100.0, 150.0)),
    ],
)
def test_ranges_are_read_as_people_type_them(text: str, expected: ValueRange) -> None:
    assert parse_range(text) == expected


@pytest.mark.parametrize(("text", "message"), [("cheap", "Cannot read the range"), ("150..100", "starts above")])
def test_a_bad_range_gets_one_line(text: str, message: str) -> None:
    with pytest.raises(ExplainError, match=message) as err:
        parse_range(text)
    assert "\n" not in str(err.value)


def test_the_default_is_past_the_training_median(bundle: ModelBundle) -> None:
    median = float(split("diabetes", "train").labels.double().median())
    assert target_median(bundle) == pytest.approx(median)
    assert default_range(bundle, median + 1) == ValueRange(high=median)
    assert default_range(bundle, median - 1) == ValueRange(low=median)
    row = _row_above_median(bundle)
    cf = table_value_counterfactual(bundle, row)
    assert cf.default_goal and cf.goal == ValueRange(high=median)
    assert cf.found and cf.after is not None and cf.after <= median
    assert "the default: past the training median" in cf.summary()


def test_the_range_is_reached_with_few_changes_within_the_data_s_ranges(bundle: ModelBundle) -> None:
    row = _row_above_median(bundle)
    before = float(_value(bundle, row)[0])
    goal = f"at most {before - 80:.1f}"
    cf = table_value_counterfactual(bundle, row, goal, fixed=("bmi", "s5"))
    assert cf.found and cf.row is not None and cf.after is not None
    assert cf.after <= before - 80 + 1e-3
    assert cf.after == pytest.approx(float(_value(bundle, torch.as_tensor(cf.row))[0]), abs=1e-3)
    columns = bundle.info.columns
    changed = {c.column for c in cf.changes}
    assert changed and not changed & {"bmi", "s5"}
    for j, c in enumerate(columns):
        assert c.low - 1e-4 <= cf.row[j] <= c.high + 1e-4
        assert (c.name in changed) == (cf.row[j] != float(row[j]))
    if len(cf.changes) > 1:  # fewest: no single free column's candidate value reaches the range
        training = training_rows(bundle, 5000, 0)
        for j, c in enumerate(columns):
            if c.name in ("bmi", "s5"):
                continue
            tries = row.repeat(len(candidate_values(c, training, j)), 1)
            tries[:, j] = candidate_values(c, training, j)
            assert (_value(bundle, tries) > before - 80).all()
    doc = cf.to_json()
    assert doc["value_before"] == pytest.approx(before) and doc["goal"]["high"] == pytest.approx(before - 80, abs=0.05)
    assert doc["target"]["name"] == "disease progression" and doc["change_count"] == len(cf.changes)


def test_an_unreachable_range_says_so_in_one_line(bundle: ModelBundle) -> None:
    row = _row_above_median(bundle)
    cf = table_value_counterfactual(bundle, row, "at most -1000", max_changes=2)
    assert not cf.found and cf.after is None and cf.row is None
    line = cf.summary()
    assert line.startswith("Not reachable within 2 changed columns") and "at most -1000" in line and "\n" not in line


def test_refusals(bundle: ModelBundle) -> None:
    row = _row_above_median(bundle)
    before = float(_value(bundle, row)[0])
    with pytest.raises(ExplainError, match="already predicts disease progression"):
        table_value_counterfactual(bundle, row, f"at least {before - 1:.1f}")
    with pytest.raises(ExplainError, match="predicts a number"):
        table_counterfactual(bundle, row, 0)
    with pytest.raises(ExplainError, match="no column 'nope'"):
        table_value_counterfactual(bundle, row, "at most 10", fixed=("nope",))


def test_xaidash_counterfactual_takes_a_range_for_a_regression_run(
    bundle: ModelBundle, tmp_path, monkeypatch, capsys
) -> None:
    import json

    from table_runs import table_run

    from xaidash.dashboard.cli import main

    root = tmp_path / "runs"
    run = table_run(root, bundle)
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    before = float(_value(bundle, split("diabetes").rows[0])[0])
    median = target_median(bundle)
    goal = f"at least {median + 40:.0f}" if before <= median else f"at most {median - 40:.0f}"
    argv = ["counterfactual", "--run", str(run.path), "--input", "dataset:0", "--fixed", "bmi"]
    assert main([*argv, "--to", goal, "--out", str(tmp_path / "cf")]) == 0
    printed = capsys.readouterr().out
    data = json.loads((tmp_path / "cf" / "counterfactual.json").read_text())
    assert data["found"] and data["summary"] in printed and "changed row: age " in printed
    assert data["goal"]["text"] == goal and not data["goal"]["default"] and data["fixed"] == ["bmi"]
    assert data["value_before"] == pytest.approx(before, abs=1e-3)
    assert main([*argv, "--to", "default"]) == 0
    assert "the default: past the training median" in capsys.readouterr().out
    assert main([*argv, "--to", "at most -1000", "--budget", "1"]) == 1
    assert "Not reachable within 1 changed column" in capsys.readouterr().out
    assert main([*argv, "--to", "cheap"]) == 2
    assert "Cannot read the range 'cheap'" in capsys.readouterr().err
