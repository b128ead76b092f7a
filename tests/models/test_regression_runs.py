"""A regression run (diabetes: a number to predict) as the terminal reads it: `xaidash train`'s last line gives R²,
RMSE and MAE in the target's units (checked against scikit-learn's metrics on the run's own predictions), the epoch
lines give the validation R² (never 'acc –'), the recipes list its measured R², and its quality is judged against R²
0 (the mean) and its recipe's R²."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

from xaidash.data.registry import get_info, load_split
from xaidash.models.cli import ProgressPrinter, _recipe_line, _report
from xaidash.models.registry import get_spec
from xaidash.models.runs.quality import accuracy_warning, quality_label
from xaidash.models.runs.scores import final_score_text, run_target
from xaidash.models.runs.store import load_bundle
from xaidash.models.training.config import TrainConfig, TrainEvent


@pytest.fixture(scope="module")
def diabetes_result(tmp_path_factory: pytest.TempPathFactory):
    """diabetes / tabular_mlp trained by the engine with its recipe for 8 epochs (about a second on one thread)."""
    from xaidash.models.training.engine import train

    root = tmp_path_factory.mktemp("regression_runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        result = train(TrainConfig(dataset="diabetes", model="tabular_mlp", epochs=8, device="cpu", seed=0))
    assert result.ok, result.error
    return result


def test_train_prints_r2_rmse_and_mae_in_units_as_scikit_learn_computes_them(diabetes_result, capsys) -> None:
    assert _report(diabetes_result) == 0
    out = capsys.readouterr().out
    assert "test acc" not in out
    line = out.splitlines()[0]
    # scikit-learn's metrics of the run's own predictions on the test rows, in the target's units
    bundle = load_bundle(diabetes_result.run, device="cpu")
    test = load_split("diabetes", "test")
    predicted = bundle.predict_proba(test.rows)[:, 0].numpy().astype(np.float64)
    truth = test.labels.numpy().astype(np.float64)
    r2, rmse = r2_score(truth, predicted), mean_squared_error(truth, predicted) ** 0.5
    mae = mean_absolute_error(truth, predicted)
    found = re.search(r"test R² (-?[\d.]+) · RMSE ([\d.]+) · MAE ([\d.]+) \(disease progression\)", line)
    assert found, line
    assert float(found[1]) == pytest.approx(r2, abs=0.006)
    assert float(found[2]) == pytest.approx(rmse, rel=2e-3)
    assert float(found[3]) == pytest.approx(mae, rel=2e-3)
    summary = diabetes_result.run.summary()
    assert summary["test_rmse"] == pytest.approx(rmse, rel=1e-4) and summary["test_mae"] == pytest.approx(mae, rel=1e-4)


def test_epoch_lines_give_the_validation_r2_and_the_recipe_its_measured_r2(diabetes_result, capsys) -> None:
    printer = ProgressPrinter(quiet=True)
    printer(TrainEvent(kind="epoch", run_id="r", epoch=3, epochs=8, train_loss=0.5, val_loss=0.48, val_r2=0.5912))
    printer(
        TrainEvent(
            kind="epoch", run_id="r", epoch=3, epochs=8, train_loss=0.5, train_acc=0.9, val_loss=0.3, val_acc=0.95
        )
    )
    regression, classifier = capsys.readouterr().err.splitlines()
    assert "val loss 0.4800 R² 0.59" in regression and "acc" not in regression
    assert "train loss 0.5000 acc 90.0% | val loss 0.3000 acc 95.0%" in classifier
    recipe = get_spec("tabular_mlp").recipe(get_info("diabetes"))[1]
    assert f"test R² {recipe.expected_r2:.2f}" in _recipe_line("diabetes", recipe)
    # the run records the recipe's R², the figure its quality is judged against
    assert diabetes_result.run.config()["recipe"]["expected_r2"] == recipe.expected_r2


def test_a_regression_run_is_judged_by_r2_against_chance_and_its_recipe() -> None:
    config = {"recipe": {"expected_r2": 0.42}, "classes": ["disease progression"]}
    near_chance = accuracy_warning(config, {"test_r2": 0.03, "test_acc": None})
    assert near_chance and "R² 0.03" in near_chance and "near chance" in near_chance and "%" not in near_chance
    far_below = accuracy_warning(config, {"test_r2": 0.25, "test_acc": None})
    assert far_below and "far below" in far_below and "R² 0.42" in far_below
    assert accuracy_warning(config, {"test_r2": 0.40, "test_acc": None}) is None
    assert accuracy_warning(config, {"test_r2": None, "val_r2": -0.5, "test_acc": None})  # not tested: validation
    assert accuracy_warning({}, {"test_r2": 0.2, "test_acc": None}) is None  # no recipe measured: above chance


def test_the_runs_quality_cell_of_a_good_regression_run(diabetes_result) -> None:
    summary = diabetes_result.run.summary()
    expected = "⚠ poor" if summary["test_r2"] < 0.32 else "✓ good"
    assert quality_label(diabetes_result.run) == expected
    target = run_target(diabetes_result.run.config())
    assert target is not None and target.name == "disease progression"
    assert final_score_text({"test_acc": 0.97}, None) == "test acc 97.0%"


def test_runs_lists_r2_for_a_regression_run(diabetes_result, capsys, monkeypatch) -> None:
    from xaidash.models.cli import _cmd_runs

    monkeypatch.setenv("XAIDASH_RUNS", str(Path(diabetes_result.run_dir).parent))
    args = type("A", (), {"calibration": None, "out": None, "refit": False, "delete": None})()
    assert _cmd_runs(args) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if diabetes_result.run.id in line)
    assert re.search(r"R² -?\d\.\d\d\s+R² -?\d\.\d\d", row), row


def test_across_training_gives_each_epochs_r2_and_predicted_value(diabetes_result) -> None:
    from xaidash.explainers.comparison.across_training import explanations_across_training

    run = diabetes_result.run
    row = load_split("diabetes", "test").rows[3]
    result = explanations_across_training(run, row, methods=["ig"], device="cpu", epochs=[1, 8])
    val_r2 = {r["epoch"]: r["val_r2"] for r in run.metrics() if r.get("kind") == "epoch"}
    assert [e.val_acc for e in result.epochs] == pytest.approx([val_r2[1], val_r2[8]])
    final = float(load_bundle(run, device="cpu").predict_proba(row)[0, 0])
    assert result.epochs[-1].probability == pytest.approx(final, rel=1e-5)  # the value, not a softmax of one output
    target = run_target(run.config())
    (_, figure), *_ = result.figures("ig", ["disease progression"], epochs=result.epochs[-1:], regression=target)
    assert figure.legend.units == "contribution to the predicted disease progression per column"
