"""A table row's map drawn as signed horizontal bars, one per column (matplotlib's object API, no pyplot): sorted by
|value|, the strongest on top, each bar coloured on the map's colour scale (the scale policy's colours: red raises
the target, blue lowers it) and labelled with its column and the row's value in the column's own units."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from xaidash.explainers.figures.scales import colorize, tick_text

BAR_HEIGHT_IN = 0.32  # inches per column
MAX_BARS = 40  # beyond this many columns only the strongest are drawn (the figure says how many are left out)
DPI = 100
WIDTH_IN = 7.2  # 720 px: readable beside the page's other maps


def bar_order(values: np.ndarray, limit: int = MAX_BARS) -> np.ndarray:
    """Column indices by |value|, strongest first (ties: column order), at most `limit` of them; NaN last."""
    v = np.abs(np.nan_to_num(np.asarray(values, np.float64), nan=-1.0))
    return np.argsort(-v, kind="stable")[:limit]


def draw_bars(values: np.ndarray, labels: Sequence[str], *, signed: bool, scale: float, units: str) -> Image.Image:
    """The bar chart as a picture: one bar per column (`labels[j]`: its column and the row's value), its length the
    value, its colour the value on the colour scale `scale` (what the colour bar drawn below it shows)."""
    v = np.asarray(values, np.float64).reshape(-1)
    order = bar_order(v)
    shown = v[order]
    colours = colorize(np.nan_to_num(shown), signed, scale if scale > 0 else None)
    fig = Figure(figsize=(WIDTH_IN, 0.9 + BAR_HEIGHT_IN * max(len(order), 1)), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(order))[::-1]  # strongest on top
    ax.barh(y, np.nan_to_num(shown), color=colours, edgecolor=(0.35, 0.35, 0.35), linewidth=0.5, height=0.7)
    ax.set_yticks(y, [labels[j] for j in order], fontsize=9)
    ax.axvline(0.0, color="black", linewidth=0.8)
    reach = float(np.nanmax(np.abs(shown))) if len(shown) and np.isfinite(shown).any() else 0.0
    reach = reach or 1.0
    ax.set_xlim(-reach * 1.12 if signed and (shown < 0).any() else -reach * 0.02, reach * 1.12)
    for yy, value in zip(y, shown, strict=True):
        if np.isfinite(value):
            ax.text(
                value, yy, f" {tick_text(float(value))} ", va="center", ha="left" if value >= 0 else "right", fontsize=8
            )
    ax.set_xlabel(units, fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    left_out = len(v) - len(order)
    if left_out > 0:
        ax.set_title(f"the {len(order)} strongest of {len(v)} columns", fontsize=9, color="dimgray")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, facecolor="white")
    buf.seek(0)
    return Image.open(buf).convert("RGB")
