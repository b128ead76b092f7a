"""Altair charts the pages draw: confusion matrix, top-k bars, metric bars, heatmaps (training curves: curves.py).

A confusion matrix of a few classes is a heatmap with its counts; one of hundreds of classes cannot be read
(or drawn quickly) that way, so it is shown as its most frequent confusions (`top_confusions`), a per-class
table (`per_class_table`) and, on request, the whole matrix as one image (`confusion_image`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
from PIL import Image

from xaidash.explainers.figures.render import with_colour_bar
from xaidash.explainers.figures.report import top_predictions
from xaidash.explainers.figures.scales import ColourScale

CONFUSION_HEATMAP_MAX = 30  # classes up to which the matrix is drawn as a heatmap with its counts


def confusion_chart(matrix: Sequence[Sequence[int]] | np.ndarray, classes: Sequence[str]) -> alt.Chart:
    """Counts [true][predicted] as a heatmap with the numbers written in."""
    m = np.asarray(matrix)
    rows = [
        {
            "true": classes[i],
            "predicted": classes[j],
            "count": int(m[i, j]),
            "share": float(m[i, j] / m[i].sum()) if m[i].sum() else 0.0,
        }
        for i in range(m.shape[0])
        for j in range(m.shape[1])
    ]
    df = pd.DataFrame(rows)
    order = list(classes)
    step = max(16, min(48, 440 // max(1, len(order))))
    base = alt.Chart(df).encode(
        x=alt.X("predicted:N", sort=order, title="predicted"),
        y=alt.Y("true:N", sort=order, title="true"),
    )
    rect = base.mark_rect().encode(
        color=alt.Color("share:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]), title="row share"),
        tooltip=["true", "predicted", "count", alt.Tooltip("share:Q", format=".1%")],
    )
    text = base.mark_text(fontSize=11).encode(
        text="count:Q", color=alt.condition(alt.datum.share > 0.5, alt.value("white"), alt.value("black"))
    )
    # Discrete axes are sized by step: Streamlit does not apply a fixed width/height to layered charts.
    return (rect + text).properties(width=alt.Step(step), height=alt.Step(step), title="Confusion matrix (test split)")


def _row_shares(m: np.ndarray) -> np.ndarray:
    totals = m.sum(axis=1, keepdims=True)
    return np.divide(m, totals, out=np.zeros(m.shape, dtype=float), where=totals > 0)


def top_confusions(matrix: np.ndarray, classes: Sequence[str], k: int = 20) -> pd.DataFrame:
    """The k most frequent mistakes (true != predicted), most frequent first: true, predicted, count, and the
    share of the true class's test samples that went there."""
    m = np.asarray(matrix)
    off = m.astype(np.int64, copy=True)
    np.fill_diagonal(off, 0)
    flat = off.ravel()
    k = int(min(k, int((flat > 0).sum())))
    if k == 0:
        return pd.DataFrame(columns=["true", "predicted", "count", "share of true class"])
    idx = np.argpartition(-flat, k - 1)[:k]
    idx = idx[np.argsort(-flat[idx], kind="stable")]
    rows, cols = np.unravel_index(idx, m.shape)
    totals = m.sum(axis=1)
    return pd.DataFrame(
        {
            "true": [classes[i] for i in rows],
            "predicted": [classes[j] for j in cols],
            "count": flat[idx].astype(int),
            "share of true class": [
                float(m[i, j] / totals[i]) if totals[i] else 0.0 for i, j in zip(rows, cols, strict=True)
            ],
        }
    )


def top_confusions_chart(table: pd.DataFrame) -> alt.Chart:
    """`top_confusions` as horizontal bars, 'true → predicted'."""
    df = table.assign(pair=table["true"].astype(str) + " → " + table["predicted"].astype(str))
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("count:Q", title="test samples"),
            y=alt.Y("pair:N", sort=None, title=None, axis=alt.Axis(labelLimit=260)),
            tooltip=["true", "predicted", "count", alt.Tooltip("share of true class:Q", format=".1%")],
        )
        .properties(height=alt.Step(16), title="Most frequent confusions (test split)")
    )


def per_class_table(matrix: np.ndarray, classes: Sequence[str]) -> pd.DataFrame:
    """One row per class: test samples, recall, precision and the class it is most often mistaken for."""
    m = np.asarray(matrix).astype(np.int64)
    support, predicted, correct = m.sum(axis=1), m.sum(axis=0), np.diag(m)
    off = m.copy()
    np.fill_diagonal(off, -1)
    worst = off.argmax(axis=1)
    worst_count = off[np.arange(len(m)), worst].clip(min=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(support > 0, correct / np.maximum(support, 1), np.nan)
        precision = np.where(predicted > 0, correct / np.maximum(predicted, 1), np.nan)
    return pd.DataFrame(
        {
            "class": list(classes),
            "test samples": support,
            "recall": 100 * recall,
            "precision": 100 * precision,
            "most often taken for": [classes[j] if c else "" for j, c in zip(worst, worst_count, strict=True)],
            "times": worst_count,
        }
    )


CONFUSION_SCALE = ColourScale(
    0.0, 1.0, "share of the true class's test samples (square-root colour scale)", cmap="Blues"
)


def confusion_image(matrix: np.ndarray, max_side: int = 1000) -> Image.Image:
    """The whole matrix as an image, one pixel (or a square of pixels) per cell: white to dark blue by the share
    of the true class's samples (on a square-root scale, so rare confusions still show), rows = true class,
    columns = predicted, in class order; its colour bar below."""
    share = _row_shares(np.asarray(matrix))
    n = share.shape[0]
    image = Image.fromarray((CONFUSION_SCALE.colours(np.sqrt(share)) * 255 + 0.5).astype(np.uint8), mode="RGB")
    scale = max(1, max_side // max(n, 1))
    image = image.resize((n * scale, n * scale), Image.Resampling.NEAREST) if scale > 1 else image
    return with_colour_bar(image, CONFUSION_SCALE)


def topk_chart(
    probs: Sequence[float] | np.ndarray, classes: Sequence[str], k: int = 5, true_label: int | None = None
) -> alt.Chart:
    """The k most probable classes (`report.top_predictions`, as every report lists them) as horizontal bars; the
    true class (when known) in green."""
    top = top_predictions(probs, classes, k)
    df = pd.DataFrame(
        {
            "class": [t.name for t in top],
            "probability": [t.probability for t in top],
            "kind": ["true class" if true_label is not None and t.cls == true_label else "other" for t in top],
        }
    )
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X(
                "probability:Q", scale=alt.Scale(domain=[0, 1]), title=None, axis=alt.Axis(format="%", tickCount=3)
            ),
            y=alt.Y("class:N", sort=None, title=None),
            color=alt.Color(
                "kind:N", scale=alt.Scale(domain=["true class", "other"], range=["#2ca02c", "#7f7f7f"]), legend=None
            ),
            tooltip=["class", alt.Tooltip("probability:Q", format=".2%")],
        )
        .properties(height=alt.Step(20))
    )


def metric_bars(table: pd.DataFrame, titles: dict[str, tuple[str, str]]) -> list[alt.Chart]:
    """One small bar chart per metric column of `table` (index: method), each with its own scale; all-NaN columns skipped."""
    charts = []
    for col in table.columns:
        values = table[col]
        if values.isna().all():
            continue
        title, better = titles.get(col, (col, ""))
        df = pd.DataFrame({"method": [str(m) for m in table.index], "value": values.values})
        charts.append(
            alt.Chart(df.dropna())
            .mark_bar()
            .encode(
                x=alt.X("value:Q", title=None),
                y=alt.Y("method:N", title=None, sort=[str(m) for m in table.index], axis=alt.Axis(labelLimit=120)),
                # One colour per method across every chart, whichever methods a metric applies to.
                color=alt.Color(
                    "method:N", legend=None, scale=alt.Scale(domain=[str(m) for m in table.index], scheme="tableau10")
                ),
                tooltip=["method", alt.Tooltip("value:Q", format=".4f")],
            )
            .properties(title=f"{title} ({better})" if better else title, height=alt.Step(20))
        )
    return charts


MATRIX_WIDTH = (
    540  # px a matrix heatmap may take with its labels and legend: within the main column at a 1024 px window
)
MATRIX_LABEL_LIMIT = 180  # px of a method label before it is cut with '…' (the tooltip has it whole)
PAD = alt.AutoSizeParams(type="pad", contains="padding")  # the drawn size: labels are never cut by a 'fit' resize


def label_width(labels: Sequence[str], font_px: float = 11.0) -> int:
    """A generous estimate of the widest label's width in px (about 0.62 em a character), at most the limit."""
    longest = max((len(str(t)) for t in labels), default=0)
    return int(min(MATRIX_LABEL_LIMIT, 0.62 * font_px * longest + 8))


def matrix_heatmap(df: pd.DataFrame, title: str, value_title: str = "Spearman ρ") -> alt.LayerChart:
    """A square matrix (e.g. method agreement) on a diverging -1..1 scale with the values written in, and the scale's
    colour bar. Its cells shrink (40 to 80 px) so that the row labels, the cells and the colour bar fit in
    `MATRIX_WIDTH`; labels longer than `MATRIX_LABEL_LIMIT` end in '…', and the chart keeps its drawn size (pad),
    so no label is ever cut at its start."""
    names = [str(c) for c in df.columns]
    rows = [
        {"a": str(i), "b": str(j), "value": float(df.loc[i, j]) if not math.isnan(float(df.loc[i, j])) else None}
        for i in df.index
        for j in df.columns
    ]
    d = pd.DataFrame(rows)
    legend_px = 90
    room = MATRIX_WIDTH - label_width(names) - legend_px
    step = int(max(40, min(80, room // max(1, len(names)))))
    base = alt.Chart(d).encode(
        x=alt.X(
            "b:N",
            sort=names,
            title=None,
            axis=alt.Axis(labelLimit=MATRIX_LABEL_LIMIT, labelAngle=-45, labelOverlap=False),
        ),
        y=alt.Y("a:N", sort=names, title=None, axis=alt.Axis(labelLimit=MATRIX_LABEL_LIMIT, labelOverlap=False)),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "value:Q",
            scale=alt.Scale(scheme="redblue", domain=[-1, 1], reverse=True),
            title=value_title,
            legend=alt.Legend(gradientLength=max(120, min(240, step * len(names))), format=".1f"),
        ),
        tooltip=[
            alt.Tooltip("a:N", title="row"),
            alt.Tooltip("b:N", title="column"),
            alt.Tooltip("value:Q", format=".3f"),
        ],
    )
    text = (
        base.mark_text(fontSize=11)
        .encode(
            text=alt.Text("value:Q", format=".2f"),
            color=alt.condition("abs(datum.value) > 0.6", alt.value("white"), alt.value("black")),
        )
        .transform_filter("isValid(datum.value)")
    )  # undefined pairs (a constant map) stay blank
    return (rect + text).properties(width=alt.Step(step), height=alt.Step(step), title=title, autosize=PAD)


def sanity_chart(rows: Sequence[dict[str, Any]], methods: Sequence[str] | None = None) -> alt.Chart:
    """Rank correlation with the trained model's maps as more layers are randomised, one line per method
    (coloured like `metric_bars` when given the same method order)."""
    df = pd.DataFrame(rows)
    df["label"] = df["step"].astype(str) + ": " + df["layer"].astype(str)
    order = list(dict.fromkeys(df.sort_values("step")["label"]))
    base = alt.Chart(df).encode(
        x=alt.X(
            "label:N", sort=order, title="layers randomised (top down), last one named", axis=alt.Axis(labelAngle=0)
        ),
        y=alt.Y("spearman:Q", scale=alt.Scale(domain=[-1, 1]), title="Spearman ρ with trained maps"),
        color=alt.Color(
            "method:N", scale=alt.Scale(domain=list(methods or dict.fromkeys(df["method"])), scheme="tableau10")
        ),
        tooltip=["method", "step", "layer", alt.Tooltip("spearman:Q", format=".3f")],
    )
    return (base.mark_line() + base.mark_point(filled=True)).properties(height=260)


def forecast_chart(
    history: Sequence[float], forecast: Sequence[float], value_title: str, truth: Sequence[float] | None = None
) -> alt.LayerChart:
    """A forecast on one time axis: the window the model read (steps -T+1 .. 0), its forecast of the steps ahead
    (1 .. H) and, when known, what really came (`truth`, the target); hovering a step gives its value."""
    past = pd.DataFrame({"step": np.arange(-len(history) + 1, 1), "value": history, "part": "history"})
    parts = [past, _ahead(history[-1], forecast, "forecast")]
    if truth is not None:
        parts.append(_ahead(history[-1], truth, "true future"))
    data = pd.concat(parts, ignore_index=True)
    x = alt.X("step:Q", title="steps (0 = the last one read; 1, 2, … ahead)")
    colour = alt.Color(
        "part:N",
        scale=alt.Scale(domain=["history", "forecast", "true future"], range=["#4c78a8", "#e45756", "#54a24b"]),
    )
    dash = alt.StrokeDash(
        "part:N", scale=alt.Scale(domain=["history", "forecast", "true future"], range=[[1, 0], [1, 0], [5, 3]])
    )
    y = alt.Y("value:Q", title=value_title, scale=alt.Scale(zero=False))
    base = alt.Chart(data).encode(x=x, y=y, color=colour)
    tips = [alt.Tooltip("part:N"), alt.Tooltip("step:Q"), alt.Tooltip("value:Q", format=".4g")]
    lines = base.mark_line().encode(strokeDash=dash)
    return (lines + base.mark_circle(size=28).encode(tooltip=tips)).properties(height=200)


def _ahead(last: float, values: Sequence[float], part: str) -> pd.DataFrame:
    """The steps ahead (1 .. H), joined to the last step read (0) so the line continues the history."""
    frame = pd.DataFrame({"step": np.arange(0, len(values) + 1), "value": [last, *values]})
    frame["part"] = part
    return frame
