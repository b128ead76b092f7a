"""The Global view's charts (Altair, as the other pages draw theirs): permutation importance with its intervals,
ICE curves with the partial dependence over them and the rows' rug, a pair's 2-D partial dependence, global SHAP's
mean |attribution| and its dependence plots. Every axis says what its values are in; where colour means a value, its
legend is a colour bar titled with it. Columns known to set the label (a generated table's truth) are marked. A model
that predicts a number (`values=True`) is drawn in the target's units: its predicted value on the axes and colour bars
(`PDPResult.axis`, 'predicted disease progression'), not a class's probability."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from xaidash.explainers.tabular.importance import PermutationImportance
from xaidash.explainers.tabular.pdp import PairResult, PDPResult
from xaidash.explainers.tabular.shap_global import GlobalShap, ShapDependence

MAX_CURVES = 150  # ICE curves drawn per chart (a seeded pick): more are one blot and a slow page
ICE_HEIGHT = 300
BAR_STEP = 20
MAX_BARS = 40  # columns a bar chart shows, the largest first (global.json holds every one)  # pixels per column in the bar charts
TRUTH = "sets the label (known truth)"
OTHER = "other columns"
TRUTH_COLOURS = alt.Scale(domain=[TRUTH, OTHER], range=["#d62728", "#4c78a8"])
# The plot keeps its height and fits the column's width; without it Streamlit fits the whole chart, legend included,
# into the height and a tall colour bar squeezes the plot.
FIT = alt.AutoSizeParams(type="fit-x", contains="padding")
PROBABILITY_FORMAT = ".3f"
VALUE_FORMAT = ",.4~r"  # a value in the target's units: four significant digits, no scientific notation


def _number_format(values: bool) -> str:
    return VALUE_FORMAT if values else PROBABILITY_FORMAT


def _axis(axis: str, target: str) -> str:
    """A predicted value's short name: the result's axis ('P(malignant)', 'predicted disease progression')."""
    return axis or f"P({target})"


def _role(names: Sequence[str], truth: Sequence[str]) -> list[str]:
    return [TRUTH if n in truth else OTHER for n in names]


def _bar_colour(truth: Sequence[str], single: str = "#4c78a8") -> Any:
    """Bars coloured by whether their column is a truth column (a legend says so), or all alike without a truth."""
    if truth:
        return alt.Color("role:N", scale=TRUTH_COLOURS, legend=alt.Legend(title=None, orient="bottom", labelLimit=0))
    return alt.value(single)


def importance_chart(importance: PermutationImportance, truth: Sequence[str] = ()) -> alt.LayerChart:
    """Each column's mean importance as a bar (the MAX_BARS most important), most important on top, its 95 % interval
    as a whisker."""
    ranked = importance.ranked()[:MAX_BARS]
    df = pd.DataFrame(
        {
            "column": [c.column for c in ranked],
            "importance": [c.mean for c in ranked],
            "low": [c.low for c in ranked],
            "high": [c.high for c in ranked],
            "role": _role([c.column for c in ranked], truth),
        }
    )
    order = list(df["column"])
    y = alt.Y("column:N", sort=order, title=None, axis=alt.Axis(labelLimit=260, labelOverlap=False))
    base = alt.Chart(df).encode(y=y)
    tooltip = [
        "column",
        alt.Tooltip("importance:Q", format=".4f"),
        alt.Tooltip("low:Q", format=".4f", title="95% interval from"),
        alt.Tooltip("high:Q", format=".4f", title="to"),
    ]
    title = f"{importance.units}; whisker: 95% interval over {importance.repeats} shuffles"
    bars = base.mark_bar().encode(x=alt.X("importance:Q", title=title), color=_bar_colour(truth), tooltip=tooltip)
    whiskers = base.mark_rule(color="black").encode(x="low:Q", x2="high:Q")
    return (bars + whiskers).properties(height=alt.Step(BAR_STEP), autosize=FIT)


def _x_field(result_labels: tuple[str, ...], column: str, title: str) -> alt.X:
    if result_labels:
        return alt.X("x:N", sort=list(result_labels), title=title, axis=alt.Axis(labelAngle=0))
    return alt.X("x:Q", title=title, scale=alt.Scale(zero=False, nice=False))


def _title(text: str, subtitle: str) -> alt.TitleParams:
    """A chart's title on the left (a centred one wider than a narrow chart is cut at both ends) and its subtitle."""
    return alt.TitleParams(text=text, subtitle=subtitle, anchor="start", limit=0, subtitleColor="#555555")


def _curve_pick(n: int, seed: int = 0) -> np.ndarray:
    if n <= MAX_CURVES:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, MAX_CURVES, replace=False))


def category(labels: Sequence[str], code: float) -> str:
    """A categorical column's value by its category name (a code out of range as the code itself)."""
    k = int(np.rint(code))
    return labels[k] if 0 <= k < len(labels) else str(code)


def _values(labels: Sequence[str], values: np.ndarray) -> list[object]:
    """Raw values as the axes show them: category names, or numbers."""
    return [category(labels, v) for v in values] if labels else [float(v) for v in values]


def _value_colour(labels: tuple[str, ...], field: str, title: str) -> alt.Color:
    """A row's own value as colour: a colour bar over a numeric column's values, a legend of a categorical one's."""
    if labels:
        return alt.Color(f"{field}:N", sort=list(labels), title=title, legend=alt.Legend(orient="right", titleLimit=0))
    legend = alt.Legend(orient="right", gradientLength=ICE_HEIGHT - 60, titleLimit=0)
    return alt.Color(f"{field}:Q", scale=alt.Scale(scheme="viridis"), title=title, legend=legend)


def ice_chart(result: PDPResult, centred: bool = False, values: bool = False) -> alt.LayerChart:
    """ICE curves (a seeded pick of at most MAX_CURVES) coloured by each row's own value of the column, the partial
    dependence over them in black, the rows' values as ticks along the bottom. `values`: the model predicts a number
    (the y axis is its predicted value in units, not a probability)."""
    ice = result.centred_ice if centred else result.ice
    pdp = result.centred_pdp if centred else result.pdp
    shown = _curve_pick(len(ice))
    xs = _values(result.labels, result.grid)
    own = _values(result.labels, result.data)
    curves = pd.DataFrame(
        {
            "row": np.repeat(shown, len(xs)),
            "x": xs * len(shown),
            "y": ice[shown].reshape(-1),
            "own": [own[i] for i in shown for _ in xs],
        }
    )
    axis = _axis(result.axis, result.target)
    plain = axis if values else f"P({result.target}), predicted"
    y_title = f"change in {axis} from the first value" if centred else plain
    x_title = f"{result.column}, set to each value"
    x = _x_field(result.labels, result.column, x_title)
    y = alt.Y("y:Q", title=y_title, scale=alt.Scale(zero=False))
    lines = (
        alt.Chart(curves)
        .mark_line(strokeWidth=0.8, opacity=0.45)
        .encode(x=x, y=y, detail="row:N", color=_value_colour(result.labels, "own", "row's own value"))
    )
    mean = pd.DataFrame({"x": xs, "y": pdp, "line": "partial dependence (mean of the curves)"})
    pdp_line = (
        alt.Chart(mean)
        .mark_line(color="black", strokeWidth=3)
        .encode(
            x=x,
            y=y,
            tooltip=[
                alt.Tooltip("x", title=result.column),
                alt.Tooltip("y:Q", format=_number_format(values), title="PDP"),
            ],
        )
    )
    rug = (
        alt.Chart(pd.DataFrame({"x": own}))
        .mark_tick(color="#333333", opacity=0.35, thickness=1, size=10)
        .encode(x=x, y=alt.value(ICE_HEIGHT - 5))
    )
    kind = "Centred ICE" if centred else "ICE"
    title = _title(
        f"{kind} of {result.column}",
        f"{len(shown)} of {len(ice)} rows; black: partial dependence; ticks: the rows' own values",
    )
    return (lines + pdp_line + rug).properties(height=ICE_HEIGHT, title=title, autosize=FIT)


def _tick_text(value: float, labels: tuple[str, ...]) -> str:
    return category(labels, value) if labels else f"{value:.3g}"


def pair_chart(result: PairResult, values: bool = False) -> alt.Chart:
    """The pair's partial dependence as a heat map (first column down, second across) with its colour bar (the mean
    predicted probability, or for a model that predicts a number, `values`, the mean predicted value in units)."""
    a = [_tick_text(v, result.labels_a) for v in result.grid_a]
    b = [_tick_text(v, result.labels_b) for v in result.grid_b]
    df = pd.DataFrame(
        {"a": np.repeat(a, len(b)), "b": b * len(a), "p": result.pdp.reshape(-1)},
    )
    colour = f"{_axis(result.axis, result.target)}, mean over the rows"
    return (
        alt.Chart(df)
        .mark_rect()
        .encode(
            x=alt.X(
                "b:O",
                sort=b,
                title=f"{result.columns[1]} (set to each value)",
                axis=alt.Axis(labelAngle=0, labelOverlap="greedy"),
            ),
            y=alt.Y("a:O", sort=a[::-1], title=f"{result.columns[0]} (set to each value)"),
            color=alt.Color(
                "p:Q",
                scale=alt.Scale(scheme="magma"),
                title=colour,
                legend=alt.Legend(gradientLength=300, titleLimit=0),
            ),
            tooltip=[
                alt.Tooltip("a:O", title=result.columns[0]),
                alt.Tooltip("b:O", title=result.columns[1]),
                alt.Tooltip("p:Q", format=_number_format(values), title=colour),
            ],
        )
        .properties(
            height=380,
            title=_title(
                f"Partial dependence of {result.columns[0]} and {result.columns[1]}",
                f"{len(a)} x {len(b)} grid values",
            ),
            autosize=FIT,
        )
    )


def shap_bars_chart(shap: GlobalShap, truth: Sequence[str] = ()) -> alt.Chart:
    """Mean |attribution| per column (the MAX_BARS largest), largest on top."""
    ranked = shap.ranked()[:MAX_BARS]
    df = pd.DataFrame(
        {
            "column": [c for c, _ in ranked],
            "value": [v for _, v in ranked],
            "role": _role([c for c, _ in ranked], truth),
        }
    )
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=alt.Y("column:N", sort=list(df["column"]), title=None, axis=alt.Axis(labelLimit=260, labelOverlap=False)),
            x=alt.X("value:Q", title=f"mean |attribution| over {shap.rows} rows: {shap.units}"),
            color=_bar_colour(truth, "#72b7b2"),
            tooltip=["column", alt.Tooltip("value:Q", format=".4f", title="mean |attribution|")],
        )
        .properties(height=alt.Step(BAR_STEP), autosize=FIT)
    )


def _shap_title(shap: GlobalShap, dependence: ShapDependence) -> str:
    return f"attribution of {dependence.column} to P({shap.target})"


def shap_dependence_chart(shap: GlobalShap, dependence: ShapDependence, values: bool = False) -> alt.Chart:
    """Each row's attribution of the column against its value, coloured by the column interacting with it most.
    `values`: the model predicts a number (the attributions are contributions to its value, in the target's units)."""
    labels = dependence.labels
    xs = _values(labels, dependence.data)
    df = pd.DataFrame({"x": xs, "y": dependence.values})
    x_title = f"{dependence.column} (the row's value)"
    encode: dict[str, object] = {
        "x": _x_field(labels, dependence.column, x_title),
        "y": alt.Y("y:Q", title=f"{dependence.column}'s {shap.units}" if values else _shap_title(shap, dependence)),
    }
    tooltip = [
        alt.Tooltip("x", title=dependence.column),
        alt.Tooltip("y:Q", format=VALUE_FORMAT if values else ".4f", title="attribution"),
    ]
    if dependence.colour_by is not None and dependence.colour_data is not None:
        own = dependence.colour_labels
        df["c"] = _values(own, dependence.colour_data)
        encode["color"] = _value_colour(own, "c", dependence.colour_by)
        tooltip.append(alt.Tooltip("c", title=dependence.colour_by))
    points = alt.Chart(df).mark_circle(size=28, opacity=0.8)
    if labels:
        points = points.transform_calculate(jitter="random()").encode(
            xOffset=alt.XOffset("jitter:Q", scale=alt.Scale(domain=[0, 1]))
        )
    chart = points.encode(**encode, tooltip=tooltip)
    coloured = (
        f"coloured by {dependence.colour_by}, the column that interacts with it most"
        if dependence.colour_by
        else "no other column to colour by"
    )
    title = _title(f"{shap.method} dependence of {dependence.column}", coloured)
    return chart.properties(height=ICE_HEIGHT, title=title, autosize=FIT)
