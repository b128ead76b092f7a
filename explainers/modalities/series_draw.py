"""Drawing a series' map (registers nothing): the series as a line per channel with the attribution as a coloured band
under it on the same time axis, and the colour bar with the map's units below ('line'); a multivariate series also
as a channel x time heatmap of its per-channel maps aligned with the lines ('heatmap'); and the interactive Altair
chart a page shows, with a tooltip per step (step, value, attribution)."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from xaidash.explainers.figures import render
from xaidash.explainers.figures.scales import colorize

WIDTH_PX = 720  # the drawn figure's width at upscale 224; the enlarged view scales it
DPI = 100
MARGINS = 0.8  # inches above and below the two panels
COLORBAR_HEIGHT = 40
COLORBAR_FONT = 14
RAMP_STOPS = 11
LINE_COLOURS = ("#222222", "#1b7837", "#762a83", "#b35806", "#2166ac", "#8c510a")


def _image(fig: Figure) -> Image.Image:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3].copy())


def series_axes(series: np.ndarray | None, length: int) -> np.ndarray:
    """The raw series (C, T) to draw, or a flat line at 0 when the figure has none (a map read without its input)."""
    if series is None or series.ndim != 2 or series.shape[1] != length:
        return np.zeros((1, length), np.float32)
    return np.asarray(series, np.float32)


def draw_series(
    values: np.ndarray,
    series: np.ndarray | None,
    *,
    signed: bool,
    scale: float,
    display: str,
    channel_names: tuple[str, ...] = (),
    step_name: str = "step",
    width: int = WIDTH_PX,
) -> Image.Image:
    """The lines over the attribution band (and, for 'heatmap', one band per channel of `values` (C, T))."""
    v = np.asarray(values, np.float32)
    per_channel = v.reshape(-1, v.shape[-1]) if v.ndim == 2 else v.reshape(1, -1)
    summed = per_channel.sum(0)
    length = summed.size
    s = series_axes(series, length)
    heat = display == "heatmap"
    rows = per_channel if heat and len(per_channel) > 1 else summed[None]
    band_h = 0.35 * len(rows) if heat else 0.45
    height = 2.2 + band_h + MARGINS  # inches: the lines, the band, the axis label below and the legend above
    fig = Figure(figsize=(width / DPI, height), dpi=DPI)
    grid = fig.add_gridspec(2, 1, height_ratios=(2.2, band_h), hspace=0.08)
    top, band = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
    steps = np.arange(length)
    for c, row in enumerate(s):
        name = channel_names[c] if c < len(channel_names) else f"channel {c + 1}"
        top.plot(steps, row, color=LINE_COLOURS[c % len(LINE_COLOURS)], linewidth=1.4, label=name)
    if len(s) > 1:
        top.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8, ncol=min(len(s), 3), frameon=False)
    top.set_xlim(-0.5, length - 0.5)
    top.tick_params(labelbottom=False, labelsize=8)
    top.grid(alpha=0.25)
    top.set_ylabel("value", fontsize=9)
    colours = colorize(np.nan_to_num(rows), signed, scale if scale > 0 else None)
    band.imshow(colours, aspect="auto", interpolation="nearest", extent=(-0.5, length - 0.5, len(rows) - 0.5, -0.5))
    band.set_yticks(range(len(rows)))
    labels = [channel_names[c] if c < len(channel_names) else f"ch {c + 1}" for c in range(len(rows))]
    band.set_yticklabels(labels if len(rows) > 1 else ["map"], fontsize=8)
    band.set_xlabel(step_name, fontsize=9)
    band.tick_params(labelsize=8)
    # room on the left for the longest row label ("accelerometer x"): about 0.075 inch per character at 8 pt
    longest = max((len(t) for t in labels), default=4) if len(rows) > 1 else 4
    left = min(0.35, max(0.09, (0.2 + 0.075 * longest) / (width / DPI)))
    fig.subplots_adjust(left=left, right=0.98, top=1 - 0.3 / height, bottom=0.5 / height)
    return _image(fig)


def with_bar(img: Image.Image, *, signed: bool, scale: float, clipped: bool, units: str) -> Image.Image:
    """The drawn map with its colour bar (end values, the map's units) below."""
    bar = render.colorbar(
        signed,
        scale,
        width=min(img.width, 420),
        height=COLORBAR_HEIGHT,
        label=units,
        font_size=COLORBAR_FONT,
        clipped=clipped,
    )
    return render.with_legend(img, bar)


def _hex(rgb: np.ndarray) -> str:
    r, g, b = (round(float(c) * 255) for c in rgb)
    return f"#{r:02x}{g:02x}{b:02x}"


def series_chart(
    values: np.ndarray,
    series: np.ndarray,
    *,
    signed: bool,
    scale: float,
    units: str,
    channel_names: tuple[str, ...] = (),
    step_name: str = "step",
    width: int = 320,
) -> alt.Chart:
    """Lines (one per channel) over a band of the attribution per step on the same colour scale as the PNG, `width`
    pixels wide (both on one time axis); hovering a step shows its values and attribution. The colour bar with the
    units is the card's own (drawn under the chart), so the band carries no legend of its own."""
    v = np.asarray(values, np.float32).reshape(-1)
    s = series_axes(np.asarray(series, np.float32), v.size)
    names = [channel_names[c] if c < len(channel_names) else f"channel {c + 1}" for c in range(len(s))]
    lines = pd.DataFrame(
        [
            {"step": t, "channel": names[c], "value": float(s[c, t]), "attribution": float(v[t])}
            for c in range(len(s))
            for t in range(v.size)
        ]
    )
    band = pd.DataFrame({"step": np.arange(v.size), "attribution": v.astype(float)})
    band["start"], band["end"] = band["step"] - 0.5, band["step"] + 0.5  # a step's cell, centred on its point
    for c, name in enumerate(names):
        band[name] = s[c].astype(float)
    span = float(scale) if scale > 0 else float(np.nanmax(np.abs(v)) or 1.0)
    # the PNG's colour map sampled at RAMP_STOPS values, blended in RGB between them: the same colours as the PNG
    domain = [float(d) for d in np.linspace(-span if signed else 0.0, span, RAMP_STOPS)]
    ramp = [_hex(colorize(np.array([d]), signed, span)[0]) for d in domain]
    tips = [alt.Tooltip("step:Q", title=step_name), *[alt.Tooltip(f"{n}:Q", format=".4g") for n in names]]
    tips.append(alt.Tooltip("attribution:Q", format=".4g"))  # its units: the colour legend (a long key is cut)
    hover = alt.selection_point(fields=["step"], on="pointerover", nearest=True, empty=False)
    time = alt.Scale(domain=[-0.5, v.size - 0.5], nice=False, zero=False)
    legend = alt.Legend(orient="top", title=None, columns=3) if len(s) > 1 else None
    colour = alt.Color("channel:N", legend=legend).scale(domain=names, range=list(LINE_COLOURS[: len(s)]))
    lines_chart = (
        alt.Chart(lines)
        .mark_line()
        .encode(
            x=alt.X("step:Q", scale=time, axis=alt.Axis(labels=False, title=None)),
            y=alt.Y("value:Q", scale=alt.Scale(zero=False)),  # the series' own range, as the PNG draws it
            color=colour,
        )
    )
    rule = (
        alt.Chart(band)
        .mark_rule(color="gray")
        .encode(
            x=alt.X("step:Q", scale=time), opacity=alt.condition(hover, alt.value(0.7), alt.value(0.0)), tooltip=tips
        )
        .add_params(hover)
    )
    strip = (
        alt.Chart(band)
        .mark_rect()
        .encode(
            x=alt.X("start:Q", scale=time, title=step_name),
            x2="end:Q",
            color=alt.Color("attribution:Q", title=units or "attribution", legend=None).scale(
                domain=domain, range=ramp, clamp=True, interpolate="rgb"
            ),
            tooltip=tips,
        )
    )
    return (
        alt.vconcat((lines_chart + rule).properties(height=160, width=width), strip.properties(height=36, width=width))
        .resolve_scale(color="independent")
        .configure_view(stroke=None)
    )


def chart_inputs(values: Any, raw: Any) -> tuple[np.ndarray, np.ndarray]:
    """(map (T,), series (C, T)) as the chart reads them."""
    s = np.asarray(raw, np.float32)
    return np.asarray(values, np.float32).reshape(-1), s.reshape(1, -1) if s.ndim == 1 else s
