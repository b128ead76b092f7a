"""The Embeddings page's map: every sample as a point up to `INTERACTIVE_MAX`; above that, all of them
aggregated into a 2-D grid of bins (colour: the bin's most common class, opacity: how many samples
it holds) with a seeded sample of `INTERACTIVE_MAX` points on top that keep the tooltips and the
click-through. Drawing tens of thousands of vega marks, each with a thumbnail in its tooltip, would
freeze the browser; the bins cost the same at 70,000 samples as at 7,000."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from xaidash.data.registry import RegressionTarget
from xaidash.explainers.inspection.projection import LABELS, METHODS

INTERACTIVE_MAX = 5000  # points drawn one by one, each with its tooltip and click
DENSITY_BINS = 100  # bins along the wider axis of the map


def interactive_rows(n: int, limit: int = INTERACTIVE_MAX, seed: int = 0) -> np.ndarray:
    """Row positions (sorted) of the points drawn one by one: all when n <= limit, else a seeded sample."""
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def density_frame(df: pd.DataFrame, colour: str, bins: int = DENSITY_BINS) -> pd.DataFrame:
    """All points of `df` (x, y and the `colour` column) counted in square bins: one row per non-empty bin
    with its edges (x, x2, y, y2), `count`, the most common `colour` value and its `share` of the bin."""
    x, y = df["x"].to_numpy(float), df["y"].to_numpy(float)
    lo = np.array([x.min(), y.min()])
    span = max(x.max() - lo[0], y.max() - lo[1]) or 1.0
    size = span / bins
    ix = np.minimum(((x - lo[0]) / size).astype(int), bins - 1)
    iy = np.minimum(((y - lo[1]) / size).astype(int), bins - 1)
    cells = pd.DataFrame({"ix": ix, "iy": iy, colour: df[colour].to_numpy()})
    counts = cells.groupby(["ix", "iy", colour], observed=True).size().rename("n").reset_index()
    total = counts.groupby(["ix", "iy"])["n"].transform("sum")
    top = counts.assign(count=total).sort_values(["ix", "iy", "n"], ascending=[True, True, False])
    top = top.drop_duplicates(["ix", "iy"]).reset_index(drop=True)
    return pd.DataFrame(
        {
            "x": lo[0] + top["ix"] * size,
            "x2": lo[0] + (top["ix"] + 1) * size,
            "y": lo[1] + top["iy"] * size,
            "y2": lo[1] + (top["iy"] + 1) * size,
            "count": top["count"].astype(int),
            colour: top[colour],
            "share": (top["n"] / top["count"]).round(2),
        }
    )


View = tuple[tuple[float, float], tuple[float, float]]  # the map's (x, y) ranges when it leaves far points out


def outlying_view(points: pd.DataFrame, reach: float = 3.0) -> tuple[View | None, np.ndarray]:
    """The ranges of the points within `reach` interquartile ranges of the quartiles on both axes, and which points
    lie beyond; (None, no point) when none does. A few far points (a language model's massive-activation
    tokens) would otherwise squeeze the rest of a map into a corner."""
    xy = points[["x", "y"]].to_numpy(float)
    q1, q3 = np.percentile(xy, 25, axis=0), np.percentile(xy, 75, axis=0)
    spread = np.maximum(q3 - q1, 1e-12)
    lo, hi = np.maximum(q1 - reach * spread, xy.min(0)), np.minimum(q3 + reach * spread, xy.max(0))
    outside = ((xy < lo) | (xy > hi)).any(axis=1)
    if not outside.any():
        return None, outside
    lo, hi = xy[~outside].min(0), xy[~outside].max(0)  # the points kept fill the view
    pad = 0.03 * np.maximum(hi - lo, 1e-12)
    return ((float(lo[0] - pad[0]), float(hi[0] + pad[0])), (float(lo[1] - pad[1]), float(hi[1] + pad[1]))), outside


def map_chart(
    points: pd.DataFrame,
    colour: str,
    title: str,
    axis_titles: tuple[str, str],
    placed: pd.DataFrame | None = None,
    density: pd.DataFrame | None = None,
    tooltips: list[str | alt.Tooltip] | None = None,
    domain: list[str] | None = None,
    view: View | None = None,
) -> alt.LayerChart | alt.Chart:
    """Points (x, y, `point` a unique row id, index, split, true, predicted, correct, and optionally image or
    text) coloured by `colour`, with tooltips and click-to-select (selection 'pick' on 'point');
    `density` (from `density_frame`) drawn underneath as bins; `placed` (x, y, name) as black diamonds.
    `tooltips` replaces the classifier's (points with other columns: a language model's sentences or tokens);
    `domain` orders the colour legend (else sorted by name); `view` (from `outlying_view`) the ranges first shown,
    points beyond them clipped until the user zooms out."""
    pick = alt.selection_point(name="pick", fields=["point"], on="click", clear="dblclick")
    values = pd.concat([points[colour], density[colour]]) if density is not None else points[colour]
    if colour == "correct":
        scale = alt.Scale(domain=["correct", "wrong"], range=["#9ecae1", "#d62728"])
    else:
        scale = alt.Scale(scheme="tableau10" if values.nunique() <= 10 else "tableau20")
        if domain is not None:
            scale = alt.Scale(scheme="tableau10" if len(domain) <= 10 else "tableau20", domain=domain)
    size = 10 if density is not None else (14 if len(points) > 3000 else 24)
    tips = ["index:Q", "true:N", "predicted:N"]
    if "split" in points.columns and points["split"].nunique() > 1:
        tips.insert(0, "split:N")
    tips += [f"{c}:N" for c in ("image", "text") if c in points.columns]
    x = alt.X("x:Q", title=axis_titles[0], axis=alt.Axis(labels=False, ticks=False, grid=False))
    y = alt.Y("y:Q", title=axis_titles[1], axis=alt.Axis(labels=False, ticks=False, grid=False))
    if view is not None:
        x = x.scale(domain=list(view[0]), zero=False, nice=False)
        y = y.scale(domain=list(view[1]), zero=False, nice=False)
    dots = (
        alt.Chart(points)
        .mark_circle(size=size, stroke="white", strokeWidth=0.4 if density is not None else 0, clip=view is not None)
        .encode(
            x=x,
            y=y,
            color=alt.Color(f"{colour}:N", scale=scale, title=colour),
            opacity=alt.condition(pick, alt.value(0.9), alt.value(0.2)),
            size=alt.condition(pick, alt.value(size * 10), alt.value(size), empty=False),
            stroke=alt.condition(pick, alt.value("black"), alt.value("white"), empty=False),
            tooltip=tips if tooltips is None else tooltips,
        )
        .add_params(pick)
    )
    layers: list[alt.Chart] = [dots]
    if density is not None:
        bins = (
            alt.Chart(density)
            .mark_rect()
            .encode(
                x=x,
                x2="x2:Q",
                y=y,
                y2="y2:Q",
                color=alt.Color(f"{colour}:N", scale=scale, title=colour),
                opacity=alt.Opacity("count:Q", scale=alt.Scale(type="log", range=[0.12, 0.75]), legend=None),
                tooltip=[
                    alt.Tooltip("count:Q", title="samples in bin"),
                    alt.Tooltip(f"{colour}:N", title=f"most common ({colour})"),
                    alt.Tooltip("share:Q", title="its share", format=".0%"),
                ],
            )
        )
        layers.insert(0, bins)
    if placed is not None and len(placed):
        layers.append(
            alt.Chart(placed)
            .mark_point(shape="diamond", size=260, filled=True, color="black", stroke="white", strokeWidth=1.5)
            .encode(x="x:Q", y="y:Q", tooltip=["name:N"])
        )
    if len(layers) == 1:
        return layers[0].properties(height=560, title=title).interactive()
    chart = alt.layer(*layers)  # alt.layer, not LayerChart(...): it lifts the 'pick' selection to the top
    assert isinstance(chart, alt.LayerChart)
    return chart.properties(height=560, title=title).interactive()


def projection_choice(where: Any, key: str) -> str:
    """The projection picker (PCA by default) of the Embeddings page, for a classifier's or a language model's map."""
    return str(
        where.selectbox(
            "Projection",
            list(METHODS),
            index=METHODS.index("pca"),
            format_func=lambda m: LABELS[m],
            key=key,
            help="PCA: linear and instant, distances meaningful. UMAP: keeps neighbourhoods and much of the global "
            "layout. t-SNE: keeps neighbourhoods only.",
        )
    )


def value_bands(truth: np.ndarray, target: RegressionTarget) -> tuple[np.ndarray, list[str]]:
    """The quintiles of the true values (the inner edges) and each band's name: 'Q1: 25–87'."""
    edges = np.quantile(truth, [0.2, 0.4, 0.6, 0.8])
    bounds = [float(truth.min()), *edges.tolist(), float(truth.max())]
    names = [f"Q{k + 1}: {target.value_text(bounds[k])}–{target.value_text(bounds[k + 1])}" for k in range(5)]
    return edges, names
