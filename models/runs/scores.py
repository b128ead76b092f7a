"""A run's scores in words, by what its model does: a classifier's accuracy as a percentage, a regression model's
R² with its errors in the target's own units ('R² 0.42 · RMSE 59.81 · MAE 47.79 disease progression'). One place for
the terminal, the Train and Model pages and the sidebar, so the same run never reads differently."""

from __future__ import annotations

from typing import Any

from xaidash.data.formatting import MISSING, percent, r2_text
from xaidash.data.registry import RegressionTarget
from xaidash.models.runs.store import Run, info_from_json


def run_target(config: dict[str, Any]) -> RegressionTarget | None:
    """The number a run's model predicts (from its config's data set facts), or None for a classifier."""
    info = config.get("dataset_info")
    if not isinstance(info, dict) or info.get("regression") is None:
        return None
    try:
        return info_from_json(info).regression
    except (TypeError, ValueError):  # a damaged config: the pages say so elsewhere
        return None


def errors_text(scores: dict[str, Any], target: RegressionTarget, prefix: str = "test_") -> str:
    """'RMSE 59.81 · MAE 47.79' in the target's units ('' when neither was measured)."""
    parts = [
        f"{name} {target.value_text(float(scores[prefix + key]))}"
        for name, key in (("RMSE", "rmse"), ("MAE", "mae"))
        if scores.get(prefix + key) is not None
    ]
    return " · ".join(parts)


def final_score_text(summary: dict[str, Any], target: RegressionTarget | None) -> str:
    """The headline of a finished run: 'test acc 96.5%', or 'test R² 0.42 · RMSE 59.81 · MAE 47.79 (disease
    progression)' for a number to predict, a forecast's followed by its naive forecasts' MAE (`baselines_text`)."""
    if target is None:
        return f"test acc {percent(summary.get('test_acc'))}"
    r2 = summary.get("test_r2")
    if r2 is None:
        return f"test R² {MISSING}"
    errors = errors_text(summary, target)
    return f"test {r2_text(r2)}" + (f" · {errors} ({target.name})" if errors else "") + baselines_text(summary, target)


def baselines_text(summary: dict[str, Any], target: RegressionTarget) -> str:
    """A forecast's yardsticks on the same test windows: '; naive MAE 77.84 · seasonal naive MAE 51.46' ('' for
    a run that is not a forecast)."""
    parts = [
        f"{name} MAE {target.value_text(float(summary[key]))}"
        for name, key in (("naive", "test_naive_mae"), ("seasonal naive", "test_seasonal_naive_mae"))
        if summary.get(key) is not None
    ]
    return "; " + " · ".join(parts) if parts else ""


def epoch_score_text(acc: float | None, r2: float | None, regression: bool) -> str:
    """An epoch's score on one split: 'acc 96.5%', or 'R² 0.42' when the model predicts a number."""
    return r2_text(r2) if regression else f"acc {percent(acc)}"


def recipe_score_text(recipe: Any) -> str | None:
    """What a recipe reached where it was tested: 'test acc 99.7%' or 'test R² 0.42'; None when never measured."""
    if getattr(recipe, "expected_r2", None) is not None:
        return f"test {r2_text(recipe.expected_r2)}"
    if getattr(recipe, "expected_acc", None) is not None:
        return f"test acc {percent(recipe.expected_acc)}"
    return None


def headline_text(summary: dict[str, Any]) -> str:
    """A run's score in a picker or a label: 'R² 0.42' (test, else validation) for a number to predict, else the
    test accuracy ('97.0%', or the validation accuracy while there is no test entry)."""
    r2 = summary.get("test_r2")
    if r2 is None:
        r2 = summary.get("val_r2")
    if r2 is not None:
        return r2_text(r2)
    return percent(summary.get("test_acc", summary.get("val_acc")))


def summary_r2(run: Run) -> float | None:
    """A finished regression run's test R² from its summary (a training result carries the accuracy alone); None
    for a classifier, or when the folder cannot be read (deleted meanwhile)."""
    try:
        r2 = run.summary().get("test_r2")
    except Exception:  # noqa: BLE001 - the folder may be gone already; the caller still reports how it ended
        return None
    return float(r2) if isinstance(r2, (int, float)) else None
