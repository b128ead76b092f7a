"""Training curves as TensorBoard draws them: loss and accuracy over steps, one or several runs. A model that
predicts a number has no accuracy: its validation R² is drawn instead (one point per epoch).

Train points are what the engine logged per step record (the mean over each logging interval when
the record says `interval_steps`; older runs logged the running mean since the epoch began, and the
legend says so). Validation is one point per epoch. A smoothing weight applies TensorBoard's
debiased exponential moving average to the train series, drawn over the faint raw points;
dotted rules mark the ends of epochs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

COLUMNS = ["run", "step", "epoch", "series", "metric", "value"]
SERIES_COLOURS = ["#1f77b4", "#ff7f0e"]
DEFAULT_SMOOTHING = 0.6  # TensorBoard's default
CHART_HEIGHT = 280


def train_series_name(history: Sequence[Mapping[str, Any]]) -> str:
    """What a train point is, for the legend: per-interval means, or (older runs) running means within an epoch."""
    steps = [r for r in history if r.get("kind") == "step"]
    if any("interval_steps" in r for r in steps):
        return "train (mean per logging interval)"
    return "train (running mean within each epoch)" if steps else "train"


VALIDATION = "validation (per epoch)"
R2 = "R²"  # the score of a number to predict (validation only: the steps log no R²)


def curve_frame(history: Sequence[Mapping[str, Any]], run: str = "") -> pd.DataFrame:
    """Long table (run, step, epoch, series, metric, value): train from step records, validation from epoch records."""
    train_name = train_series_name(history)
    rows = []
    pairs: tuple[tuple[str, str], ...]
    for r in history:
        kind = r.get("kind")
        if kind == "step":
            pairs, series = (("loss", "train_loss"), ("accuracy", "train_acc")), train_name
        elif kind == "epoch":
            pairs, series = (("loss", "val_loss"), ("accuracy", "val_acc"), (R2, "val_r2")), VALIDATION
        else:
            continue
        for metric, key in pairs:
            if r.get(key) is not None and r.get("step") is not None:
                rows.append(
                    {"run": run, "step": r["step"], "epoch": r.get("epoch"), "series": series, "metric": metric}
                    | {"value": float(r[key])}
                )
    return pd.DataFrame(rows, columns=COLUMNS)


def epoch_ends(history: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """(epoch, step, label) where each epoch ended, from the epoch records; an epoch a stop cut short is
    labelled 'stopped', not as if it had ended."""
    rows = {}
    for r in history:
        if r.get("kind") == "epoch" and r.get("step") is not None:
            stopped = "stopped" in str(r.get("message", ""))
            rows[int(r["epoch"])] = (int(r["step"]), "stopped" if stopped else f"epoch {int(r['epoch'])}")
    return pd.DataFrame(
        [{"epoch": e, "step": s, "label": label} for e, (s, label) in sorted(rows.items())],
        columns=["epoch", "step", "label"],
    )


def smooth(values: Sequence[float], weight: float) -> np.ndarray:
    """TensorBoard's smoothing: an exponential moving average divided by (1 - weight^n), so the first
    points are not pulled towards zero. weight 0 returns the values unchanged."""
    out = np.empty(len(values), dtype=float)
    last, n = 0.0, 0
    for i, v in enumerate(values):
        if not np.isfinite(v):
            out[i] = v
            continue
        last = last * weight + (1.0 - weight) * v
        n += 1
        out[i] = last / (1.0 - weight**n) if weight > 0 else v
    return out


def with_smoothing(df: pd.DataFrame, weight: float) -> pd.DataFrame:
    """Add a `smoothed` column: smoothed train values per run and metric; validation points stay as they are."""
    df = df.sort_values(["run", "metric", "series", "step"]).copy()
    df["smoothed"] = df["value"]
    train = df["series"].str.startswith("train")
    for idx in df[train].groupby(["run", "metric", "series"]).groups.values():
        df.loc[idx, "smoothed"] = smooth(df.loc[idx, "value"].to_list(), weight)
    return df


@dataclass(frozen=True)
class CurveOptions:
    smoothing: float = DEFAULT_SMOOTHING
    log_loss: bool = False


def curve_controls(key: str) -> CurveOptions:
    """The smoothing slider and the log-scale toggle, side by side."""
    c1, c2, _ = st.columns([3, 2, 3], vertical_alignment="bottom")
    smoothing = c1.slider(
        "Smoothing",
        0.0,
        0.99,
        DEFAULT_SMOOTHING,
        0.01,
        key=f"{key}_smoothing",
        help="exponential moving average of the train points, debiased as in TensorBoard (0: raw points)",
    )
    log_loss = c2.toggle("Log scale for loss", key=f"{key}_log")
    return CurveOptions(float(smoothing), bool(log_loss))


def _x_axis(max_step: int) -> alt.X:
    # Integer ticks only, at most about ten: a short run never repeats a label.
    return alt.X(
        "step:Q",
        title="training step (dotted lines: ends of epochs)",
        scale=alt.Scale(domain=[0, max(1, max_step)], nice=False),
        axis=alt.Axis(format="d", tickMinStep=1, tickCount=min(10, max(1, max_step)), labelFlush=True),
    )


MAX_VAL_DOTS = 100  # validation points drawn as dots up to this many epochs, as a plain line beyond
MAX_EPOCH_MARKS = 8  # more epochs than this (a table's or a graph's many short ones): every k-th is marked, k a round
# number (1, 2, 5 times a power of ten), so eight labels of 'epoch 500' stay apart in a half-width chart at 1440 px


def round_step(at_least: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is at least `at_least`."""
    power = 1
    while True:
        for m in (1, 2, 5):
            if m * power >= at_least:
                return m * power
        power *= 10


def marked_ends(ends: pd.DataFrame) -> pd.DataFrame:
    """The epoch ends a chart marks: all of them, or every k-th (and a stop) when there are more than
    MAX_EPOCH_MARKS, so their labels do not pile up."""
    if len(ends) <= MAX_EPOCH_MARKS:
        return ends
    k = round_step(-(-len(ends) // MAX_EPOCH_MARKS))
    return ends[(ends["epoch"] % k == 0) | (ends["label"] == "stopped")]


def _validation_dots(d: pd.DataFrame) -> bool:
    """One dot per epoch while they stay apart; hundreds of full-batch epochs (a graph's) would merge into a band."""
    validation = d[d.series == VALIDATION]
    return validation.empty or int(validation.groupby("run").size().max()) <= MAX_VAL_DOTS


def metric_chart(
    df: pd.DataFrame, metric: str, options: CurveOptions, ends: pd.DataFrame | None, by_run: bool
) -> alt.LayerChart | None:
    """One metric's chart: smoothed train line over faint raw points, validation points joined by a line,
    epoch ends; coloured by series (one run) or by run with the series as line style (several)."""
    d = with_smoothing(df[df.metric == metric], options.smoothing)
    if d.empty:
        return None
    is_loss, is_r2 = metric == "loss", metric == R2
    log = is_loss and options.log_loss and bool((d["value"] > 0).all())
    y_title = ("loss (log scale)" if log else "loss") if is_loss else metric
    y_scale = _y_scale(d, is_loss, is_r2, log)
    y_axis = alt.Axis(format="~g" if is_loss or is_r2 else "%", tickCount=6, title=y_title)
    series_order = list(dict.fromkeys(d["series"]))
    if by_run:
        runs = list(dict.fromkeys(d["run"]))
        colour = alt.Color("run:N", title="run", scale=alt.Scale(domain=runs, scheme="tableau10"))
        dash = alt.StrokeDash(
            "series:N",
            title="series",
            scale=alt.Scale(domain=series_order, range=[[1, 0], [5, 3]][: len(series_order)]),
        )
    else:
        colour = alt.Color(
            "series:N", title=None, scale=alt.Scale(domain=series_order, range=SERIES_COLOURS[: len(series_order)])
        )
        dash = None
    tooltip = [
        *(["run"] if by_run else []),
        "series",
        "epoch",
        alt.Tooltip("step:Q", format="d"),
        alt.Tooltip("value:Q", format=".4f", title=metric),
        alt.Tooltip("smoothed:Q", format=".4f"),
    ]
    x = _x_axis(int(d["step"].max()))
    base = alt.Chart(d).encode(x=x, color=colour)
    train = base.transform_filter(alt.datum.series != VALIDATION)
    val = base.transform_filter(alt.datum.series == VALIDATION)
    y_raw = alt.Y("value:Q", scale=y_scale, axis=y_axis)
    layers: list[alt.Chart] = []
    if options.smoothing > 0:  # the raw points stay visible, faint, behind the smoothed line
        layers.append(train.mark_line(opacity=0.25, strokeWidth=1).encode(y=y_raw, detail="run:N"))
    # Few points (a run's first seconds, a short run): dots too, or a lone point would not show at all.
    few = d[d.series != VALIDATION].groupby(["run", "series"]).size().max() <= 40
    smoothed = train.mark_line(strokeWidth=2, point=alt.OverlayMarkDef(size=20) if few else False).encode(
        y=alt.Y("smoothed:Q", scale=y_scale, axis=y_axis), tooltip=tooltip
    )
    layers.append(smoothed.encode(strokeDash=dash) if dash is not None else smoothed)
    val_dots = _validation_dots(d)
    val_line = val.mark_line(
        strokeWidth=2 if val_dots else 1.5, point=alt.OverlayMarkDef(size=45, filled=True) if val_dots else False
    ).encode(y=y_raw, tooltip=tooltip)
    layers.append(val_line.encode(strokeDash=dash) if dash is not None else val_line)
    ends = None if ends is None else marked_ends(ends)
    if ends is not None and not ends.empty:
        rule = alt.Chart(ends).encode(x=alt.X("step:Q"), tooltip=[alt.Tooltip("label:N", title="end of")])
        layers.append(rule.mark_rule(color="#888", strokeDash=[2, 3], opacity=0.8))
        layers.append(
            rule.mark_text(align="right", baseline="top", dx=-3, dy=3, fontSize=10, color="#666").encode(
                y=alt.value(0), text=alt.Text("label:N")
            )
        )
    regression = bool((df.metric == R2).any())
    title = _title(metric, regression)
    # One run: two short series names fit under the chart. Several: one legend row per run, on the right.
    placement: dict[str, Any] = (
        {"orient": "right", "direction": "vertical"}
        if by_run
        else {"orient": "bottom", "direction": "horizontal", "titleOrient": "left"}
    )
    return (
        alt.layer(*layers)
        .properties(title=title, height=CHART_HEIGHT)
        .configure_legend(labelLimit=320, symbolType="stroke", symbolOpacity=1, symbolStrokeWidth=3, **placement)
    )


def _y_scale(d: pd.DataFrame, is_loss: bool, is_r2: bool, log: bool) -> alt.Scale:
    """Loss: free (or log); accuracy: 0 to 1; R²: up to 1, down to its lowest point (an untrained model's first
    epochs are far below 0) but at least to 0, so 'better than the mean' reads at a glance."""
    if log:
        return alt.Scale(type="log")
    if is_loss:
        return alt.Scale(zero=False)
    if is_r2:
        low = float(np.nanmin(d["value"].to_numpy())) if len(d) else 0.0
        return alt.Scale(domain=[min(0.0, low), 1], nice=False)
    return alt.Scale(domain=[0, 1], nice=False)


def _title(metric: str, regression: bool) -> str:
    if metric == "loss":  # a number to predict learns the squared error divided by its variance (1: the mean)
        return "Loss (squared error / target variance)" if regression else "Loss (cross-entropy)"
    return "Validation R² (1: perfect, 0: the mean)" if metric == R2 else "Accuracy"


def show_curves(
    histories: Mapping[str, Sequence[Mapping[str, Any]]],
    options: CurveOptions,
    empty_note: str = "No curves yet: they appear after the first logged steps.",
) -> None:
    """Loss and accuracy side by side at the page's width. One history: coloured by series with epoch ends;
    several (keyed by run label): coloured by run."""
    by_run = len(histories) > 1
    frames = [curve_frame(h, run=label) for label, h in histories.items()]
    df = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(not f.empty for f in frames) else None
    if df is None:
        st.caption(empty_note)
        return
    ends = None if by_run else epoch_ends(next(iter(histories.values())))
    # Side by side for one run; one above the other for several, so each chart keeps room for its legend.
    metrics = ["loss", *(m for m in ("accuracy", R2) if (df.metric == m).any())]
    places = [st.container() for _ in metrics] if by_run else st.columns(max(2, len(metrics)))
    for place, metric in zip(places, metrics, strict=False):
        chart = metric_chart(df, metric, options, ends, by_run)
        if chart is not None:
            place.altair_chart(chart, width="stretch")
