"""The Embeddings map builder: every point up to INTERACTIVE_MAX, bins plus a sample of points above."""

from __future__ import annotations

import numpy as np
import pandas as pd

from xaidash.dashboard.components.embedding_map import (
    INTERACTIVE_MAX,
    density_frame,
    interactive_rows,
    map_chart,
)


def frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cls = rng.integers(0, 10, n)
    return pd.DataFrame(
        {
            "x": cls * 10 + rng.normal(0, 1, n),
            "y": rng.normal(0, 1, n),
            "point": np.arange(n),
            "split": np.where(np.arange(n) < 10_000, "test", "train"),
            "index": np.arange(n) % 10_000,
            "true": [str(c) for c in cls],
            "predicted": [str(c) for c in cls],
            "correct": "correct",
        }
    )


def datasets(spec: dict) -> dict[str, list]:
    return spec.get("datasets", {})


def test_small_maps_draw_every_point_with_tooltips_and_the_pick():
    df = frame(800)
    rows = interactive_rows(len(df))
    assert len(rows) == 800
    spec = map_chart(df.iloc[rows], "true", "t", ("a", "b")).to_dict()
    assert spec["mark"]["type"] == "circle" and len(next(iter(datasets(spec).values()))) == 800
    assert any(p["name"] == "pick" for p in spec["params"])
    assert {"index", "true", "predicted"} <= {t["field"] for t in spec["encoding"]["tooltip"]}


def test_70000_points_are_binned_with_a_sample_of_interactive_points_on_top():
    df = frame(70_000)
    rows = interactive_rows(len(df))
    assert len(rows) == INTERACTIVE_MAX and len(np.unique(rows)) == INTERACTIVE_MAX and (np.diff(rows) > 0).all()
    np.testing.assert_array_equal(rows, interactive_rows(len(df)))  # the same sample on every rerun
    bins = density_frame(df, "true")
    assert bins["count"].sum() == 70_000 and len(bins) < 10_000
    assert (bins["x2"] > bins["x"]).all() and (bins["share"] <= 1).all()
    # each bin's colour is its most common class: here the classes sit in separate columns of the map
    assert bins.groupby("true")["x"].max().sort_index(key=lambda s: s.astype(int)).is_monotonic_increasing
    spec = map_chart(df.iloc[rows], "true", "t", ("a", "b"), density=bins).to_dict()
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["rect", "circle"]
    sizes = sorted(len(v) for v in datasets(spec).values())
    assert sizes == sorted([len(bins), INTERACTIVE_MAX])  # no mark per sample beyond the interactive sample
    assert any(p["name"] == "pick" for p in spec["params"])  # lifted to the top, as streamlit's on_select needs
    tips = {t["field"] for t in spec["layer"][1]["encoding"]["tooltip"]}
    assert {"split", "index", "true"} <= tips  # test and training samples are told apart
