"""Training a forecaster (models/task.py, training/evaluation.py): the loss over every step ahead, the naive and
seasonal-naive forecasts as Hyndman & Athanasopoulos define them, and a run on the generated series whose summary
holds scikit-learn's MAE/RMSE of the run's own forecasts and beats both naive forecasts clearly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import mean_absolute_error, mean_squared_error

from xaidash.data.modalities import modality_of
from xaidash.data.registry import get_info, load_split
from xaidash.models.runs.quality import accuracy_warning
from xaidash.models.runs.scores import final_score_text, run_target
from xaidash.models.runs.store import load_bundle
from xaidash.models.task import ForecastSums, StandardisedMSE, baseline_forecasts
from xaidash.models.training.config import TrainConfig


def prepared(name: str, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    data, info = load_split(name, split), get_info(name)
    return modality_of("series").prepare(data.series, info, None, torch.device("cpu")), data.labels


def test_the_loss_runs_over_every_step_ahead() -> None:
    outputs = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = torch.tensor([[1.0, 0.0, 3.0], [4.0, 5.0, 2.0]])
    # errors 0, 2, 0, 0, 0, 4 over six step-values, divided by the target's variance (std 2)
    assert StandardisedMSE(2.0)(outputs, y).item() == pytest.approx((4 + 16) / 6 / 4)


@pytest.mark.parametrize("name", ["airline", "lynx"])
def test_naive_and_seasonal_naive_forecasts_read_the_raw_window(name: str) -> None:
    info, raw = get_info(name), load_split(name, "test")
    f = info.forecast
    assert f is not None
    x, y = prepared(name, "test")
    forecasts = baseline_forecasts(info, x)
    window = raw.series[:, 0].numpy().astype(np.float64)
    naive = np.repeat(window[:, -1:], f.horizon, axis=1)
    # y_hat(T + h) = y(T + h - s (floor((h - 1) / s) + 1)): the same position in the last season of the window
    seasonal = np.stack(
        [window[:, f.window - 1 + h - f.season * ((h - 1) // f.season + 1)] for h in range(1, f.horizon + 1)], axis=1
    )
    np.testing.assert_allclose(forecasts["naive"].numpy(), naive, rtol=1e-5)
    np.testing.assert_allclose(forecasts["seasonal_naive"].numpy(), seasonal, rtol=1e-5)
    sums = ForecastSums(f, torch.device("cpu"))
    sums.add(info, x, y.double(), y)  # a perfect forecaster: its own errors are 0
    scores = sums.scores()
    truth = y.numpy().astype(np.float64)
    assert scores["naive_mae"] == pytest.approx(mean_absolute_error(truth, naive), rel=1e-5)
    assert scores["seasonal_naive_rmse"] == pytest.approx(mean_squared_error(truth, seasonal) ** 0.5, rel=1e-5)
    assert scores["mae_by_step"] == [0.0] * f.horizon


def test_a_window_shorter_than_a_season_has_no_seasonal_naive_forecast() -> None:
    info = get_info("forecast:airline?window=6&horizon=3")
    x, y = prepared("forecast:airline?window=6&horizon=3", "test")
    assert set(baseline_forecasts(info, x)) == {"naive"}
    assert info.forecast is not None
    sums = ForecastSums(info.forecast, torch.device("cpu"))
    sums.add(info, x, y.double(), y)
    assert sums.scores()["seasonal_naive_mae"] is None


@pytest.fixture(scope="module")
def seasonal_trend_run(tmp_path_factory: pytest.TempPathFactory):
    """seasonal_trend / series_tcn trained by the engine with its recipe (60 epochs, seconds on one thread)."""
    from xaidash.models.training.engine import train

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("forecast_runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        result = train(TrainConfig(dataset="seasonal_trend", model="series_tcn", device="cpu", seed=0))
    assert result.ok, result.error
    return result


def test_the_generated_series_is_forecast_far_better_than_both_naive_forecasts(seasonal_trend_run) -> None:
    summary = seasonal_trend_run.run.summary()
    for metric in ("mae", "rmse"):
        assert summary[f"test_{metric}"] < 0.7 * summary[f"test_seasonal_naive_{metric}"]
        assert summary[f"test_{metric}"] < 0.4 * summary[f"test_naive_{metric}"]
    assert accuracy_warning(seasonal_trend_run.run.config(), summary) is None


def test_the_summary_holds_the_run_forecasts_errors_as_scikit_learn_computes_them(seasonal_trend_run) -> None:
    run = seasonal_trend_run.run
    summary, bundle = run.summary(), load_bundle(run, device="cpu")
    test = load_split("seasonal_trend", "test")
    predicted = bundle.predict_proba(test.series).numpy().astype(np.float64)
    truth = test.labels.numpy().astype(np.float64)
    assert predicted.shape == truth.shape == (85, 12)
    assert summary["test_mae"] == pytest.approx(mean_absolute_error(truth, predicted), rel=1e-4)
    assert summary["test_rmse"] == pytest.approx(mean_squared_error(truth, predicted) ** 0.5, rel=1e-4)
    by_step = mean_absolute_error(truth, predicted, multioutput="raw_values")
    np.testing.assert_allclose(summary["test_mae_by_step"], by_step, rtol=1e-4)
    naive = np.repeat(test.series[:, 0, -1:].numpy().astype(np.float64), 12, axis=1)
    assert summary["test_naive_mae"] == pytest.approx(mean_absolute_error(truth, naive), rel=1e-5)
    line = final_score_text(summary, run_target(run.config()))
    assert f"MAE {summary['test_mae']:.4g}" in line and f"; naive MAE {summary['test_naive_mae']:.4g}" in line
    assert "seasonal naive MAE" in line


def test_a_forecast_no_better_than_the_last_value_is_flagged() -> None:
    summary = {"test_r2": 0.5, "test_mae": 3.0, "test_naive_mae": 2.5, "test_seasonal_naive_mae": 4.0}
    warning = accuracy_warning({}, summary)
    assert warning is not None and "no better than repeating the window's last value" in warning
    assert accuracy_warning({}, {**summary, "test_r2": -0.3, "test_mae": 2.0}) is None  # R² < 0 but beats naive
