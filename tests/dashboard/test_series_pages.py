"""Series runs on the pages through AppTest: Explain draws a series' maps as interactive charts over the series (its
values, one attribution per step, the legend's units) and its input as lines; a multivariate run's heatmap display
draws per-channel maps; a forecast's header draws its history and every step ahead, its default target is the next
step (not the largest value); Compare lists its inputs; Train offers a forecast set's horizon and window and trains
the data set they name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from app_pages import assert_ok, make_app, open_page, record_starts, texts
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

from xaidash.dashboard.components.train_form import OWN
from xaidash.data.registry import get_info, load_split
from xaidash.models.runs.store import load_bundle, resolve_run
from xaidash.models.training.config import TrainConfig

TIMEOUT = 180


def _train(root: Path, dataset: str, model: str, epochs: int) -> str:
    from xaidash.models.training.engine import train

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        mp.setenv("XAIDASH_OFFLINE", "1")
        result = train(TrainConfig(dataset=dataset, model=model, epochs=epochs, device="cpu", seed=0))
    assert result.ok, result.error
    return Path(result.run_dir).name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """series_cnn on gunpoint and basic_motions, series_tcn on seasonal_trend (a few seconds each on the CPU)."""
    root = tmp_path_factory.mktemp("series_runs")
    return root, {
        "gunpoint": _train(root, "gunpoint", "series_cnn", 30),
        "basic_motions": _train(root, "basic_motions", "series_cnn", 20),
        "seasonal_trend": _train(root, "seasonal_trend", "series_tcn", 10),
    }


def _open(runs, monkeypatch, which: str, page: str = "views/explain.py", **state):
    root, ids = runs
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = make_app(ids[which], TIMEOUT)
    for k, v in state.items():
        at.session_state[k] = v
    return open_page(at, page)


def _frames(at) -> list[list[pd.DataFrame]]:
    """Every Vega-Lite chart's data sets, as frames (one list per chart)."""
    return [
        [convert_arrow_bytes_to_pandas_df(d.data.data) for d in c.proto.datasets] for c in at.get("vega_lite_chart")
    ]


def _bands(at) -> list[np.ndarray]:
    """The attribution per step of every map chart (the band's data set: one row per step, its cell's start)."""
    return [f["attribution"].to_numpy() for frames in _frames(at) for f in frames if "start" in f.columns]


def test_a_series_map_is_a_chart_of_the_series_with_one_value_per_step(runs, monkeypatch) -> None:
    at = _open(runs, monkeypatch, "gunpoint", explain_methods_kept=["ig", "occlusion"])
    assert_ok(at)
    bands = _bands(at)
    assert len(bands) == 2 and all(len(v) == 150 for v in bands)  # IG and occlusion, one value per step
    assert all(np.isfinite(v).all() and np.abs(v).max() > 0 for v in bands)
    legends = [v for v in texts(at.markdown) if 'class="xai-cbar"' in v]
    assert any("logit contribution per step" in v for v in legends)
    # the lines over the band are GunPoint test #0's values; the input's own line above the maps too
    first = load_split("gunpoint", "test").series[0, 0].numpy()
    drawn = [f for frames in _frames(at) for f in frames if {"channel", "value", "attribution"} <= set(f.columns)]
    assert drawn and np.allclose(drawn[0]["value"].to_numpy(), first, atol=1e-5)
    inputs = [f for frames in _frames(at) for f in frames if list(f.columns) == ["value"] or "value" in f.columns]
    assert any(len(f) == 150 and np.allclose(f["value"].to_numpy(), first, atol=1e-5) for f in inputs)


def test_a_multivariate_heatmap_draws_per_channel_maps(runs, monkeypatch) -> None:
    at = _open(runs, monkeypatch, "basic_motions", explain_methods_kept=["ig"])
    assert_ok(at)
    assert any(len(v) == 100 for v in _bands(at))  # the line display: a chart per map
    at.radio(key=next(r.key for r in at.radio if "heatmap" in r.options)).set_value("heatmap").run()
    assert_ok(at)
    assert not _bands(at)  # IG's per-channel maps: the heatmap PNG instead
    assert len(at.get("image")) >= 1


def test_a_forecast_shows_history_and_every_step_ahead_and_explains_the_next_step(runs, monkeypatch) -> None:
    root, ids = runs
    at = _open(runs, monkeypatch, "seasonal_trend", explain_methods_kept=["ig"])
    assert_ok(at)
    info = get_info("seasonal_trend")
    assert info.forecast is not None
    parts = [f for frames in _frames(at) for f in frames if "part" in f.columns]
    assert parts, "no history + forecast chart"
    ahead = parts[0][parts[0]["part"] == "forecast"]
    assert len(ahead) == info.forecast.horizon + 1  # the last value read, then every step ahead
    assert (parts[0]["part"] == "history").sum() == info.forecast.window
    # the values drawn are the model's own forecast of test #0
    bundle = load_bundle(resolve_run(ids["seasonal_trend"], root))
    x = load_split("seasonal_trend", "test").series[:1]
    want = bundle.predict_proba(x)[0].numpy()
    np.testing.assert_allclose(ahead["value"].to_numpy()[1:], want, rtol=1e-4)
    # and what really came next (the test split's target of test #0), on the same axis, continuing the history
    came = parts[0][parts[0]["part"] == "true future"]
    truth = np.asarray(load_split("seasonal_trend", "test").labels[0], dtype=np.float64)
    np.testing.assert_allclose(came["value"].to_numpy()[1:], truth, rtol=1e-5)
    assert came["value"].iloc[0] == ahead["value"].iloc[0] and came["step"].tolist() == ahead["step"].tolist()
    assert any("true t+1:" in m for m in texts(at.markdown))
    captions = [c for c in texts(at.caption) if c.startswith("target ")]
    assert captions and all(c.startswith("target t+1") for c in captions)
    at.selectbox(key="explain_target_seasonal_trend").set_value("t+6").run()  # another step ahead
    assert_ok(at)
    captions = [c for c in texts(at.caption) if c.startswith("target ")]
    assert captions and all(c.startswith("target t+6") for c in captions)


def test_compare_lists_series_inputs_as_lines(runs, monkeypatch) -> None:
    at = _open(runs, monkeypatch, "gunpoint", page="views/compare.py")
    assert_ok(at)
    at.button(key=next(b.key for b in at.button if b.label == "Compare")).click().run(timeout=TIMEOUT)
    assert_ok(at)
    frames = [d.value for d in at.dataframe if "shape" in d.value.columns and "series" in d.value.columns]
    assert frames and all(len(v) == 150 and np.isfinite(np.asarray(v, float)).all() for v in frames[0]["shape"])


def test_train_offers_a_forecasts_horizon_and_window(runs, monkeypatch) -> None:
    started = record_starts(monkeypatch)
    at = open_page(make_app(), "views/train.py")
    at.selectbox(key="train_dataset").set_value("airline").run()
    assert_ok(at)
    assert at.number_input(key="train_horizon_airline").value == 12
    at.number_input(key="train_horizon_airline").set_value(6).run()
    at.number_input(key="train_window_airline").set_value(24).run()
    assert_ok(at)
    at.button(key=next(b.key for b in at.button if "Start" in b.label)).click().run()
    assert started and started[0].dataset == "forecast:airline?horizon=6&window=24"
    assert OWN  # the own-data choice stays offered beside the built-in sets


def test_receptive_fields_of_a_causal_forecaster_are_drawn_in_steps(runs, monkeypatch) -> None:
    """series_tcn on the Receptive fields page: the table of its six blocks (127 steps at the last), the unit on the
    last step (what the head reads), the series with the field shaded, and the effective field per step inside it."""
    at = _open(runs, monkeypatch, "seasonal_trend", page="views/receptive_fields.py")
    info = get_info("seasonal_trend")
    steps = info.input_shape[-1]
    table = at.dataframe[0].value
    assert list(table["receptive field"]) == ["3", "7", "15", "31", "63", "127"]
    assert at.selectbox(key="rf_layer").value == "blocks.5.conv"
    assert at.number_input(key="rf_col_blocks.5.conv").value == steps - 1
    caps = texts(at.caption)
    assert any(c.startswith(f"step {steps - 1} of blocks.5.conv sees steps 0–{steps - 1}") for c in caps)
    erf = next(c for c in caps if c.startswith("Mean |∂ unit / ∂ step|"))
    assert "Trained weights: 100.0% inside" in erf and "Random weights: 100.0% inside" in erf
    frames = [f for frames in _frames(at) for f in frames]
    assert any("relative gradient" in f.columns and len(f) == 2 * steps for f in frames)  # one value per step each
    assert any("channel" in f.columns and len(f) == steps for f in frames)  # the series read, under its field
    at.selectbox(key="rf_layer").set_value("blocks.2.conv").run()
    assert_ok(at)
    assert any(
        c.startswith(f"step {steps - 1} of blocks.2.conv sees steps {steps - 15}–{steps - 1}")
        for c in texts(at.caption)
    )


def test_receptive_fields_of_a_series_cnn_are_centred_on_their_step(runs, monkeypatch) -> None:
    at = _open(runs, monkeypatch, "gunpoint", page="views/receptive_fields.py")
    assert list(at.dataframe[0].value["receptive field"]) == ["8", "12", "14", "163"]
    assert at.selectbox(key="rf_layer").value == "blocks.2.1"
    assert any(c.startswith("step 75 of blocks.2.1 sees steps 69–82 of 150") for c in texts(at.caption))
