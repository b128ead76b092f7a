"""Altair charts of the inside of a recurrent model (the Recurrent page and `xaidash recurrent`): the series as
lines, the hidden-state trajectory in PC1-PC2 coloured by time step, and one unit x time heatmap per gate with the
gate's mean activity over time above it, all on the same time axis and width so they line up under the series."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import altair as alt
import numpy as np
import pandas as pd

from xaidash.explainers.inspection.recurrent import RecurrentTrace, Trajectories

WIDTH = 640  # px of every time axis: the series, the mean gate activity and the heatmaps line up
PAD = alt.AutoSizeParams(type="pad", contains="padding")  # keep the drawn size (Streamlit would fit it)
TOP_UNITS = 24  # the heatmap shows the units whose gate moves most over time
# tanh gates run -1..1, sigmoid gates 0..1: the colour scale says which
TANH_GATES = ("cell candidate", "new")


def series_chart(raw: np.ndarray, channels: Sequence[str], step_name: str = "step", title: str = "") -> alt.Chart:
    """One line per channel of a raw series (C, T), in its own units; hovering a step gives its values."""
    raw = np.asarray(raw, dtype=float)
    c, t = raw.shape
    names = list(channels) if len(channels) == c else [f"channel {i}" for i in range(c)]
    df = pd.DataFrame({step_name: np.tile(np.arange(t), c), "value": raw.ravel(), "channel": np.repeat(names, t)})
    x = alt.X(f"{step_name}:Q", scale=alt.Scale(domain=[0, t - 1], nice=False), title=step_name)
    return (
        alt.Chart(df, title=title or "The series")
        .mark_line(point=alt.OverlayMarkDef(size=12, opacity=0.4))
        .encode(
            x=x,
            y=alt.Y("value:Q", title="value"),
            color=alt.Color("channel:N", legend=alt.Legend(title="channel") if c > 1 else None),
            tooltip=[f"{step_name}:Q", "channel:N", alt.Tooltip("value:Q", format=".4g")],
        )
        .properties(width=WIDTH, height=150, autosize=PAD)
    )


def trajectory_frame(traj: Trajectories, step_name: str = "step") -> pd.DataFrame:
    """Long table (series, step, PC1, PC2) of every series' trajectory (PC2 zero when only one component exists)."""
    rows = []
    for i, pts in enumerate(traj.points):
        label = traj.labels[i] if i < len(traj.labels) else f"series {i}"
        pc2 = pts[:, 1] if pts.shape[1] > 1 else np.zeros(len(pts))
        rows.append(pd.DataFrame({"series": label, step_name: np.arange(len(pts)), "PC1": pts[:, 0], "PC2": pc2}))
    return pd.concat(rows, ignore_index=True)


def trajectory_chart(traj: Trajectories, step_name: str = "step") -> alt.LayerChart:
    """The hidden state's path in PC1-PC2: a grey line per series through its steps, the steps as points coloured by
    time (viridis, with its colour bar), shaped by series; tooltips give the series, the step and both components."""
    df = trajectory_frame(traj, step_name)
    ev = [float(v) for v in traj.explained] + [0.0]
    axis_x = alt.X("PC1:Q", title=f"PC1 ({100 * ev[0]:.1f}% of the variance)", scale=alt.Scale(zero=False))
    axis_y = alt.Y("PC2:Q", title=f"PC2 ({100 * ev[1]:.1f}% of the variance)", scale=alt.Scale(zero=False))
    several = df["series"].nunique() > 1
    path = (
        alt.Chart(df)
        .mark_line(strokeWidth=1, opacity=0.5, color="#888")
        .encode(x=axis_x, y=axis_y, order=f"{step_name}:Q", detail="series:N")
    )
    points = (
        alt.Chart(df)
        .mark_point(filled=True, size=40)
        .encode(
            x=axis_x,
            y=axis_y,
            color=alt.Color(
                f"{step_name}:Q",
                scale=alt.Scale(scheme="viridis"),
                legend=alt.Legend(title=step_name, gradientLength=200),
            ),
            shape=alt.Shape("series:N", legend=alt.Legend(title="series")) if several else alt.value("circle"),
            tooltip=[
                "series:N",
                f"{step_name}:Q",
                alt.Tooltip("PC1:Q", format=".3f"),
                alt.Tooltip("PC2:Q", format=".3f"),
            ],
        )
        .interactive()
    )
    title = f"Layer {traj.layer + 1}'s hidden state over time, in PC1-PC2"
    chart = alt.layer(path, points, title=title).properties(width=WIDTH, height=360, autosize=PAD)
    return cast(alt.LayerChart, chart)


def top_units(gate: np.ndarray, k: int = TOP_UNITS) -> np.ndarray:
    """Indices of the k units whose activation varies most over time (std over steps), in ascending unit order."""
    order = np.argsort(-gate.std(0), kind="stable")[:k]
    return np.sort(order)


def gate_frame(gate: np.ndarray, units: np.ndarray, step_name: str = "step") -> pd.DataFrame:
    """Long table (unit, step, activation) of the chosen units of one gate (T, H)."""
    t = gate.shape[0]
    sub = gate[:, units]
    return pd.DataFrame(
        {
            "unit": np.tile(units, t),
            step_name: np.repeat(np.arange(t), len(units)),
            "activation": sub.ravel().astype(float),
        }
    )


def gate_chart(
    trace: RecurrentTrace, layer: int, gate: str, step_name: str = "step", k: int = TOP_UNITS
) -> alt.VConcatChart:
    """One gate of one layer: its mean over all units per step (a line), above a unit x time heatmap of the k units
    that move most, on the series' time axis; sigmoid gates on 0..1, tanh gates on -1..1 (colour bars say so)."""
    values = trace.layers[layer].gates[gate]
    t, h = values.shape
    units = top_units(values, k)
    x = alt.X(f"{step_name}:O", title=step_name, axis=alt.Axis(values=list(range(0, t, max(1, t // 16))), labelAngle=0))
    tanh = gate in TANH_GATES
    domain = [-1, 1] if tanh else [0, 1]
    scale = (
        alt.Scale(scheme="redblue", domain=domain, reverse=True) if tanh else alt.Scale(scheme="viridis", domain=domain)
    )
    mean = pd.DataFrame({step_name: np.arange(t), "mean": values.mean(1).astype(float)})
    line = (
        alt.Chart(mean, title=f"{gate} gate (layer {layer + 1})")
        .mark_line()
        .encode(
            x=alt.X(f"{step_name}:Q", scale=alt.Scale(domain=[0, t - 1], nice=False), title=None),
            y=alt.Y("mean:Q", title="mean over units", scale=alt.Scale(domain=domain)),
            tooltip=[f"{step_name}:Q", alt.Tooltip("mean:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=80)
    )
    heat = (
        alt.Chart(gate_frame(values, units, step_name))
        .mark_rect()
        .encode(
            x=x,
            y=alt.Y("unit:O", title=f"unit ({len(units)} of {h} that vary most)" if len(units) < h else "unit"),
            color=alt.Color(
                "activation:Q",
                scale=scale,
                legend=alt.Legend(title=["activation", "(tanh)" if tanh else "(sigmoid)"], gradientLength=120),
            ),
            tooltip=["unit:O", f"{step_name}:O", alt.Tooltip("activation:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=max(80, 9 * len(units)))
    )
    return alt.vconcat(line, heat, spacing=4).properties(autosize=PAD)
