"""Series to forecast (data/sets/forecast_sets.py): windows cut from sktime's own series, split by time so that no
training target is a held-out value, the facts a run is built from (the history's mean and std, one output per step
ahead), their round trip through a run's config, and the form's choice of horizon and window."""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest
import sktime.datasets

from xaidash.data.errors import DatasetError
from xaidash.data.registry import Forecast, get_info, get_source, load_split
from xaidash.data.sets.forecast_sets import SYNTH_SEASON, seasonal_trend
from xaidash.models.runs import schema
from xaidash.models.runs.store import info_from_json

SKTIME = {"airline": "load_airline", "lynx": "load_lynx", "shampoo_sales": "load_shampoo_sales"}
NAMES = [*SKTIME, "seasonal_trend"]


def values_of(name: str) -> np.ndarray:
    """The series as its own source has it: sktime's loader, or the generator."""
    if name in SKTIME:
        return getattr(sktime.datasets, SKTIME[name])().to_numpy(dtype=np.float64)
    return seasonal_trend()[0]


@pytest.mark.parametrize("name", NAMES)
def test_windows_are_the_series_and_the_test_targets_are_exactly_the_tail(name: str) -> None:
    info, values = get_info(name), values_of(name)
    f = info.forecast
    assert f is not None
    start = len(values) - f.tail
    # window i of the training split starts at step i; of the test split, `window` steps before the tail's step i
    for split, offset in (("train", 0), ("test", start - f.window)):
        data = load_split(name, split)
        assert data.series.shape[1:] == (1, f.window) and data.labels.shape[1:] == (f.horizon,)
        for i, (x, y) in enumerate(zip(data.series[:, 0].numpy(), data.labels.numpy(), strict=True)):
            first = offset + i
            np.testing.assert_allclose(x, values[first : first + f.window], rtol=1e-6)
            np.testing.assert_allclose(y, values[first + f.window : first + f.window + f.horizon], rtol=1e-6)
    train, test = load_split(name, "train"), load_split(name, "test")
    tail = values[start:]
    # the test windows forecast every stretch of `horizon` steps inside the tail, in order, and nothing else
    assert len(test) == f.tail - f.horizon + 1
    for i, y in enumerate(test.labels.numpy()):
        np.testing.assert_allclose(y, tail[i : i + f.horizon], rtol=1e-6)
    # every training target lies before the tail: the last training window's last target is the step before it
    assert len(train) == start - f.window - f.horizon + 1
    np.testing.assert_allclose(train.labels[-1, -1].item(), values[start - 1], rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_info_holds_the_history_facts_and_one_output_per_step(name: str) -> None:
    info, values = get_info(name), values_of(name)
    f = info.forecast
    assert f is not None and info.regression is not None and info.modality == "series"
    history = values[: len(values) - f.tail]
    assert info.classes == tuple(f"t+{h}" for h in range(1, f.horizon + 1))
    assert info.input_shape == (1, f.window) and info.channel_names == ("value",)
    assert info.mean[0] == pytest.approx(history.mean()) and info.std[0] == pytest.approx(history.std(ddof=1))
    assert info.regression.mean == pytest.approx(history.mean()) and info.regression.std == pytest.approx(history.std())
    assert f.window >= f.season  # the seasonal-naive forecast can be read from every window


@pytest.mark.parametrize("name", NAMES)
def test_info_round_trips_through_a_run_config(name: str, tmp_path) -> None:
    stored = json.loads(json.dumps(asdict(get_info(name))))  # as config.json holds it
    schema.check(stored, schema.DATASET_INFO, tmp_path / "config.json")
    assert info_from_json(stored) == get_info(name)
    damaged = {**stored, "forecast": {**stored["forecast"], "horizon": 0}}
    with pytest.raises(Exception, match="horizon"):
        schema.check(damaged, schema.DATASET_INFO, tmp_path / "config.json")


def test_generated_series_has_its_documented_season_and_trend() -> None:
    values = seasonal_trend()[0]
    t = np.arange(len(values))
    # a least-squares fit of trend + one level per season position recovers the generator's slope
    design = np.column_stack([t, *(t % SYNTH_SEASON == k for k in range(SYNTH_SEASON))]).astype(float)
    coef = np.linalg.lstsq(design, values, rcond=None)[0]
    assert coef[0] == pytest.approx(0.1, abs=0.01)
    remainder = values - design @ coef
    lag1 = np.corrcoef(remainder[:-1], remainder[1:])[0, 1]
    assert lag1 == pytest.approx(0.8, abs=0.08)


def test_the_form_chooses_horizon_and_window() -> None:
    source = get_source("forecast:airline?horizon=6&window=24")
    info = source.info
    assert info.forecast == Forecast(horizon=6, window=24, season=12, tail=24)
    assert info.classes == ("t+1", "t+2", "t+3", "t+4", "t+5", "t+6") and info.input_shape == (1, 24)
    test = source.load("test")
    assert test.series.shape == (24 - 6 + 1, 1, 24) and test.labels.shape == (19, 6)
    # a horizon longer than the tail grows the tail: the test windows still forecast held-out steps only
    longer = get_source("forecast:lynx?horizon=24&window=20")
    assert longer.info.forecast.tail == 24 and len(longer.load("test")) == 1


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("forecast:airline?steps=3", "Unknown forecast option 'steps'"),
        ("forecast:airline?horizon=three", "whole number of steps, not 'three'"),
        ("forecast:airline?window=0", "between 1 and 4096"),
        ("forecast:shampoo_sales?window=30", "fewer than 2 training windows"),
        ("forecast:sunspots", "Unknown series 'sunspots'"),
    ],
)
def test_bad_forecast_options_get_one_clear_message(name: str, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        get_source(name).info  # noqa: B018 - building the source is what refuses
