"""Global SHAP's figures: the mean |attribution| of each column as bars, and a column's dependence plot (each row's
attribution of the column against its value) coloured by the column that interacts with it most strongly."""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from xaidash.explainers.tabular.figures import DPI, category_ticks, png_of, value_bar, value_colours
from xaidash.explainers.tabular.shap_global import GlobalShap, ShapDependence

JITTER = 0.12  # a categorical column's points spread this far around their code, so they do not hide each other


def shap_bars_png(result: GlobalShap, limit: int = 30) -> bytes:
    """The `limit` columns with the largest mean |attribution|, as bars coloured by it."""
    ranked = result.ranked()[:limit][::-1]
    values = np.array([v for _, v in ranked])
    fig = Figure(figsize=(7.0, 1.2 + 0.28 * len(ranked)), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    norm = Normalize(0.0, float(values.max()) or 1.0)
    cmap = matplotlib.colormaps["viridis"]
    ax.barh(np.arange(len(ranked)), values, color=cmap(norm(values)))
    ax.set_yticks(np.arange(len(ranked)), [c for c, _ in ranked], fontsize=8)
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax)
    bar.set_label("mean |attribution|")
    ax.set_xlabel(f"mean |attribution| over {result.rows} rows\n({result.units})")
    ax.set_title(f"Global {result.method}: mean |attribution| per column", fontsize=9)
    return png_of(fig)


def shap_dependence_png(result: GlobalShap, dependence: ShapDependence, seed: int = 0) -> bytes:
    """One column's attributions against its values, coloured by its strongest interacting column's values."""
    fig = Figure(figsize=(7.0, 4.6), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    x = dependence.data.astype(np.float64)
    if dependence.labels:
        x = x + np.random.default_rng(seed).uniform(-JITTER, JITTER, len(x))
    if dependence.colour_data is not None and dependence.colour_by is not None:
        cmap, norm = value_colours(dependence.colour_data, dependence.colour_labels)
        ax.scatter(x, dependence.values, c=cmap(norm(dependence.colour_data)), s=12, alpha=0.8, linewidths=0)
        label = f"{dependence.colour_by} (interacts most with {dependence.column})"
        value_bar(fig, ax, cmap, norm, label, dependence.colour_labels)
    else:
        ax.scatter(x, dependence.values, s=12, alpha=0.8, linewidths=0)
    category_ticks(ax, "x", np.arange(len(dependence.labels), dtype=np.float64), dependence.labels)
    ax.axhline(0.0, color="0.5", linewidth=0.8)
    ax.set_xlabel(f"{dependence.column} (the row's value)")
    ax.set_ylabel(f"attribution of {dependence.column}")
    ax.set_title(f"{result.method} dependence of {dependence.column}: {result.units}", fontsize=9)
    return png_of(fig)
