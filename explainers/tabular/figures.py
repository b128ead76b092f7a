"""The global view's figures as PNG bytes (matplotlib's Agg canvas, no pyplot, encoded by explainers/figures/png.py):
ICE curves coloured by each row's own value of the column with the partial dependence line over them and a rug of
the rows' values; a pair's 2-D partial dependence; the permutation importances with their intervals. Every figure
has a colour bar and its units on the axes."""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import BoundaryNorm, Colormap, Normalize
from matplotlib.figure import Figure
from PIL import Image

from xaidash.explainers.figures.png import png_bytes
from xaidash.explainers.tabular.importance import NAMES, PermutationImportance
from xaidash.explainers.tabular.pdp import PairResult, PDPResult

MAX_CURVES = 300  # ICE curves drawn (a seeded pick beyond that: a thousand lines are one blot)
DPI = 100
LINE_CMAP = "viridis"
MAP_CMAP = "magma"


def png_of(fig: Figure) -> bytes:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return png_bytes(Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB"))


def category_ticks(ax: Axes, axis: str, grid: np.ndarray, labels: tuple[str, ...]) -> None:
    """Category names at a categorical column's codes."""
    if labels:
        getattr(ax, f"set_{axis}ticks")(grid, labels, rotation=30 if axis == "x" else 0)


def value_colours(data: np.ndarray, labels: tuple[str, ...]) -> tuple[Colormap, Normalize]:
    """Colours for a column's raw values `data`: one per category for a categorical column (`labels`), else a
    continuous map over the values' range."""
    if labels:
        k = len(labels)
        return matplotlib.colormaps["tab10"].resampled(max(k, 2)), BoundaryNorm(np.arange(k + 1) - 0.5, max(k, 2))
    low, high = float(np.min(data)), float(np.max(data))
    return matplotlib.colormaps[LINE_CMAP], Normalize(low, high if high > low else low + 1.0)


def value_bar(fig: Figure, ax: Axes, cmap: Colormap, norm: Normalize, label: str, labels: tuple[str, ...]) -> None:
    """The colour bar of `value_colours`, with category names at their codes."""
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax)
    bar.set_label(label)
    if labels:
        bar.set_ticks([float(v) for v in range(len(labels))], labels=list(labels))


def ice_png(result: PDPResult, *, centred: bool = False, seed: int = 0) -> bytes:
    """ICE curves (plain or centred at the grid's first value), each coloured by its row's own value of the column,
    the partial dependence over them in black, and the rows' values as a rug along the bottom."""
    ice = result.centred_ice if centred else result.ice
    pdp = result.centred_pdp if centred else result.pdp
    shown = np.arange(len(ice))
    if len(ice) > MAX_CURVES:
        shown = np.sort(np.random.default_rng(seed).choice(len(ice), MAX_CURVES, replace=False))
    fig = Figure(figsize=(7.0, 4.8), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    cmap, norm = value_colours(result.data, result.labels)
    for i in shown:
        ax.plot(result.grid, ice[i], color=cmap(norm(result.data[i])), linewidth=0.6, alpha=0.45)
    ax.plot(result.grid, pdp, color="white", linewidth=4.2)  # a halo keeps the mean line readable over the curves
    ax.plot(result.grid, pdp, color="black", linewidth=2.4, label="partial dependence (the mean of the curves)")
    rug = ax.get_xaxis_transform()  # x in data units, y in axes units: ticks along the bottom edge
    ax.plot(result.data, np.full(len(result.data), 0.02), "|", color="0.25", markersize=9, transform=rug, alpha=0.5)
    value_bar(fig, ax, cmap, norm, f"the row's own {result.column}", result.labels)
    category_ticks(ax, "x", result.grid, result.labels)
    ax.set_xlabel(f"{result.column} (set to each value; ticks at the bottom: the rows' values)")
    change = "change in " if centred else ""
    ax.set_ylabel(f"{change}{result.axis or f'P({result.target})'}" + (" from the first value" if centred else ""))
    kind = "centred ICE" if centred else "ICE"
    ax.set_title(f"{kind} of {result.column}: {len(ice)} rows ({len(shown)} drawn); {change}{result.units}", fontsize=9)
    fig.legend(loc="outside lower center", fontsize=8, frameon=False)
    return png_of(fig)


def pair_png(result: PairResult) -> bytes:
    """The 2-D partial dependence as a coloured grid with its colour bar (the predicted probability, or value)."""
    fig = Figure(figsize=(6.6, 5.0), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    mesh = ax.pcolormesh(result.grid_b, result.grid_a, result.pdp, shading="nearest", cmap=MAP_CMAP)
    bar = fig.colorbar(mesh, ax=ax)
    bar.set_label(f"{result.axis or f'P({result.target})'}, mean over the rows")
    category_ticks(ax, "x", result.grid_b, result.labels_b)
    category_ticks(ax, "y", result.grid_a, result.labels_a)
    ax.set_xlabel(result.columns[1])
    ax.set_ylabel(result.columns[0])
    ax.set_title(f"Partial dependence of {result.columns[0]} and {result.columns[1]}: {result.units}", fontsize=9)
    return png_of(fig)


def importance_png(importance: PermutationImportance, limit: int = 30) -> bytes:
    """The `limit` most important columns as bars (coloured by their value) with their 95 % intervals."""
    ranked = importance.ranked()[:limit][::-1]  # the most important on top
    means = np.array([c.mean for c in ranked])
    low = means - np.array([c.low for c in ranked])
    high = np.array([c.high for c in ranked]) - means
    fig = Figure(figsize=(7.0, 1.2 + 0.28 * len(ranked)), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    top = float(np.abs(means).max()) or 1.0
    norm = Normalize(-top, top)
    cmap = matplotlib.colormaps["coolwarm"]
    ax.barh(np.arange(len(ranked)), means, xerr=np.vstack([low, high]), color=cmap(norm(means)), capsize=2)
    ax.set_yticks(np.arange(len(ranked)), [c.column for c in ranked], fontsize=8)
    ax.axvline(0.0, color="0.3", linewidth=0.8)
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax)
    bar.set_label(importance.units)
    ax.set_xlabel(f"{importance.units}; whisker: 95 % interval over {importance.repeats} shuffles")
    ax.set_title(
        f"Permutation importance on {importance.rows} held-out rows (baseline {NAMES[importance.scoring]} "
        f"{importance.baseline:.3f})",
        fontsize=9,
    )
    return png_of(fig)
