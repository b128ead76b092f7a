"""AppTest runs of the Recurrent page on runs written by `inspect_runs.make_run`: the trajectory drawn is the PCA of
the layer's own hidden states, the comparison and the units shown follow their widgets, other models are refused."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from app_pages import open_run_page
from inspect_runs import make_run
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from xaidash.data.registry import load_split
from xaidash.explainers.inspection.recurrent import bundle_trace, first_per_class, trajectories
from xaidash.models.runs.store import Run, load_bundle

TIMEOUT = 120


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("runs")
    return {m: make_run(root, "series_shapes", m) for m in ("series_cnn", "series_gru", "series_lstm")}


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def frames(at: AppTest, i: int) -> list[pd.DataFrame]:
    """The data of the page's i-th chart (Streamlit sends it apart from the spec, as Arrow)."""
    proto = list(at.main.get("vega_lite_chart"))[i].proto
    return [convert_arrow_bytes_to_pandas_df(d.data.data) for d in proto.datasets]


def specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.main.get("vega_lite_chart")]


def test_trajectory_is_the_pca_of_the_test_series(runs, monkeypatch):
    run = runs["series_gru"]
    at = open_run_page(run, "recurrent", monkeypatch, TIMEOUT)
    assert not at.exception and not at.error, texts(at.error)
    assert "GRU" in texts(at.markdown) and "true class" in texts(at.markdown)
    drawn = specs(at)
    assert len(drawn) == 2 + 3  # the trajectory, the series, reset / update / new
    bundle = load_bundle(run, device="cpu")
    split = load_split("series_shapes", "test")
    named = first_per_class(split, bundle.info.classes)
    # the picked series, test #0, comes first and is the first of its class: drawn once
    named = sorted(named, key=lambda item: not item[0].startswith("test #0 ("))
    assert named[0][0].startswith("test #0 (") and len(named) == 3
    traj = trajectories([bundle_trace(bundle, raw) for _, raw in named])
    (df,) = frames(at, 0)  # both layers read one data set
    got = df[["PC1", "PC2"]].to_numpy()
    np.testing.assert_allclose(got, np.concatenate(traj.points), atol=1e-5)
    assert f"PC1 explains {100 * traj.explained[0]:.1f}%" in texts(at.caption)
    at.toggle(key="recurrent_compare").set_value(False).run()
    assert "fitted on the 128 steps of 1 series" in texts(at.caption)
    at.slider(key="recurrent_units").set_value(5).run()
    heat = specs(at)[2]["vconcat"][1]
    units = set(next(f for f in frames(at, 2) if "unit" in f)["unit"])
    assert len(units) == 5 and "unit (5 of 64 that vary most)" in json.dumps(heat)


def test_lstm_draws_four_gates(runs, monkeypatch):
    at = open_run_page(runs["series_lstm"], "recurrent", monkeypatch, TIMEOUT)
    assert not at.exception and not at.error, texts(at.error)
    titles = json.dumps(specs(at)[2:])
    assert all(f"{g} gate (layer 1)" in titles for g in ("input", "forget", "cell candidate", "output"))


def test_a_model_without_recurrent_layer_is_refused_in_one_line(runs, monkeypatch):
    at = open_run_page(runs["series_cnn"], "recurrent", monkeypatch, TIMEOUT)
    info = texts(at.info)
    assert "series_cnn has no recurrent layer" in info and "series_gru" in info and "series_lstm" in info
    assert not specs(at) and not at.exception
