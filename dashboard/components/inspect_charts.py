"""Drawings for the pages that inspect a model: attention grids (the head view is `head_view`), embedding
thumbnails (the map itself is `embedding_map`), receptive-field boxes, feature-map and filter mosaics.
numpy/PIL/altair only: every number drawn here was computed by `models.inspect` or `explainers`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFont

from xaidash.explainers.figures import render
from xaidash.explainers.figures.png import data_uri, input_image, png_bytes
from xaidash.explainers.figures.render import image_hwc, label_font
from xaidash.explainers.figures.scales import ColourScale, colorize

CELL = 64  # px of one small heatmap in the layer x head grid
GRID_ROWS_LIMIT = 60_000  # above this many cells the grid is drawn as one image, not as altair marks
PAD = alt.AutoSizeParams(type="pad", contains="padding")  # keep the drawn size (Streamlit would shrink it to 'fit')


# ---- attention ---------------------------------------------------------------------------------
def token_labels(tokens: Sequence[str]) -> list[str]:
    """Unique axis labels that keep the order: '0 [CLS]', '1 the', ... (a word may occur twice)."""
    return [f"{i} {t}" for i, t in enumerate(tokens)]


def attention_grid_frame(tiles: np.ndarray) -> pd.DataFrame:
    """Long table (layer, head, row, col, weight, relative) of tiles (L, H, h, w); 'relative' is each
    tile divided by its own max, so faint heads still show their pattern."""
    L, H, h, w = tiles.shape
    peak = tiles.reshape(L, H, -1).max(-1).clip(min=1e-12)
    layer, head, row, col = np.meshgrid(np.arange(L), np.arange(H), np.arange(h), np.arange(w), indexing="ij")
    return pd.DataFrame(
        {
            "layer": layer.ravel(),
            "head": head.ravel(),
            "row": row.ravel(),
            "col": col.ravel(),
            "weight": tiles.ravel().astype(float),
            "relative": (tiles / peak[:, :, None, None]).ravel().astype(float),
        }
    )


def grid_tile_size(heads: int, tokens: int, width: int = 1100) -> int:
    """Pixels per tile of the layer x head grid: as large as `width` allows for `heads` columns, 56 to 140."""
    return int(max(56, min(140, width // max(1, heads) - 8)))


def attention_grid_chart(
    tiles: np.ndarray, x_title: str, y_title: str, scale: str = "tile", size: int | None = None
) -> alt.FacetChart:
    """Every layer x head as a heatmap tile (rows: layers, columns: heads) with a colour bar; click one to select
    it (selection 'cell' with fields layer and head). scale='tile': each tile divided by its own maximum (the
    bar runs 0 to 1 of the tile's max); scale='shared': the attention weights themselves on one scale, 0 to the
    largest weight of the grid."""
    df = attention_grid_frame(tiles)
    pick = alt.selection_point(name="cell", fields=["layer", "head"], on="click", clear=False)
    h, w = tiles.shape[-2:]
    side = size or grid_tile_size(tiles.shape[1], max(h, w))
    bar = int(max(120, min(300, tiles.shape[0] * side)))
    if scale == "shared":
        top = float(tiles.max()) or 1.0
        colour = alt.Color(
            "weight:Q",
            scale=alt.Scale(scheme="viridis", domain=[0, top]),
            legend=alt.Legend(title=["attention weight", "(one scale)"], gradientLength=bar, format=".2f"),
        )
    else:
        colour = alt.Color(
            "relative:Q",
            scale=alt.Scale(scheme="viridis", domain=[0, 1]),
            legend=alt.Legend(title=["share of the", "tile's maximum"], gradientLength=bar, format=".1f"),
        )
    base = (
        alt.Chart(df)
        .mark_rect()
        .encode(
            x=alt.X("col:O", axis=None, title=x_title),
            y=alt.Y("row:O", axis=None, title=y_title),
            color=colour,
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.45)),
            tooltip=[
                "layer:O",
                "head:O",
                "row:O",
                "col:O",
                alt.Tooltip("weight:Q", format=".3f"),
                alt.Tooltip("relative:Q", format=".2f", title="share of tile max"),
            ],
        )
        .properties(width=side, height=side)
        .add_params(pick)
    )
    return base.facet(
        row=alt.Row("layer:O", title="layer", header=alt.Header(labelFontSize=13, titleFontSize=13)),
        column=alt.Column("head:O", title="head", header=alt.Header(labelFontSize=13, titleFontSize=13)),
        spacing=6,
    )


def attention_grid_image(tiles: np.ndarray, cell: int = 64, gap: int = 6, shared: bool = False) -> Image.Image:
    """The same grid as one picture (for long texts, where altair would draw too many marks): each tile divided
    by its own maximum, or (shared) every tile by the largest weight of the grid."""
    L, H = tiles.shape[:2]
    font = label_font(13)
    margin = 34
    top = max(float(tiles.max()), 1e-12)
    img = Image.new("RGB", (margin + H * (cell + gap), margin + L * (cell + gap)), "white")
    draw = ImageDraw.Draw(img)
    for h in range(H):
        draw.text((margin + h * (cell + gap) + cell // 2 - 4, 8), str(h), fill="black", font=font)
    for layer in range(L):
        draw.text((8, margin + layer * (cell + gap) + cell // 2 - 7), str(layer), fill="black", font=font)
        for h in range(H):
            t = tiles[layer, h]
            peak = top if shared else max(float(t.max()), 1e-12)
            rgb = colorize(t / peak, signed=False, scale=1.0, cmap="viridis")
            tile = Image.fromarray((rgb * 255).astype(np.uint8)).resize((cell, cell), Image.Resampling.NEAREST)
            img.paste(tile, (margin + h * (cell + gap), margin + layer * (cell + gap)))
    return img


def scale_bar(
    low: float,
    high: float,
    label: str,
    cmap: str = "viridis",
    width: int = 320,
    signed: bool = False,
    clipped: bool = False,
) -> Image.Image:
    """A readable horizontal colour bar (DejaVu Sans 13 px): `render.scale_bar` of the scale from `low` to `high`
    (through 0 in the middle when `signed`), the end values ('≥'/'≤' when `clipped`) and `label` below."""
    return render.scale_bar(ColourScale(low, high, label, signed, cmap, clipped), width)


def matrix_chart(matrix: np.ndarray, tokens: Sequence[str], title: str) -> alt.Chart:
    """A (T, T) attention matrix with token labels: rows are the queries (who attends), columns the keys."""
    labels = token_labels(tokens)
    t = len(labels)
    q, k = np.meshgrid(np.arange(t), np.arange(t), indexing="ij")
    df = pd.DataFrame(
        {
            "query": [labels[i] for i in q.ravel()],
            "key": [labels[j] for j in k.ravel()],
            "weight": matrix.ravel().astype(float),
        }
    )
    size = max(320, min(720, 28 * t))
    return (
        alt.Chart(df)
        .mark_rect()
        .encode(
            x=alt.X(
                "key:N",
                sort=labels,
                title="attends to (key)",
                axis=alt.Axis(labelAngle=-60, labelLimit=120, labelOverlap=False),
            ),
            y=alt.Y("query:N", sort=labels, title="token (query)", axis=alt.Axis(labelLimit=120, labelOverlap=False)),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="viridis"), title="weight"),
            tooltip=["query", "key", alt.Tooltip("weight:Q", format=".3f")],
        )
        .properties(width=size, height=size, title=title, autosize=PAD)
    )


# ---- images ------------------------------------------------------------------------------------
def upscaled(image01: Any, min_side: int = 224) -> tuple[Image.Image, int]:
    """The image as RGB enlarged by a whole factor (nearest) to >= min_side, and that factor."""
    img = input_image(image01)
    f = max(1, math.ceil(min_side / min(img.size)))
    return img.resize((img.width * f, img.height * f), Image.Resampling.NEAREST), f


def draw_box(
    img: Image.Image, box: tuple[int, int, int, int], factor: int, colour: str = "#00e5ff", width: int = 3
) -> Image.Image:
    """A rectangle around inclusive pixel box (top, left, bottom, right) of the original image."""
    out = img.copy()
    top, left, bottom, right = box
    ImageDraw.Draw(out).rectangle(
        [left * factor, top * factor, (right + 1) * factor - 1, (bottom + 1) * factor - 1], outline=colour, width=width
    )
    return out


def heat_image(values: np.ndarray, min_side: int = 224, cmap: str = "inferno") -> tuple[Image.Image, int]:
    """A non-negative map (H, W) coloured by its own max and enlarged like `upscaled`."""
    v = np.asarray(values, dtype=np.float32)
    top = float(v.max()) if v.size else 0.0
    rgb = colorize(v / top if top > 0 else v, signed=False, scale=1.0, cmap=cmap)
    return upscaled(rgb, min_side)


def erf_profile_chart(
    trained: np.ndarray,
    random: np.ndarray,
    width: int,
    box: tuple[int, int] | None = None,
    axis_title: str = "image column (pixels)",
) -> alt.LayerChart:
    """One row of the two effective-field maps (each scaled to its own peak) over the image's columns (or a
    series' steps): the x axis runs exactly over the input (0 to width - 1, no padding beyond it), y from 0 to 1,
    and the theoretical box's columns (`box`: first, last) are shaded."""
    cols = np.arange(width)
    df = pd.DataFrame(
        {
            "column": np.concatenate([cols, cols]),
            "relative gradient": np.concatenate([np.asarray(trained, float), np.asarray(random, float)]),
            "weights": ["trained"] * width + ["random"] * width,
        }
    )
    x = alt.X(
        "column:Q",
        scale=alt.Scale(domain=[0, width - 1], nice=False, zero=False),
        axis=alt.Axis(title=axis_title, tickMinStep=1, format="d"),
    )
    lines = (
        alt.Chart(df)
        .mark_line(point=alt.OverlayMarkDef(size=18))
        .encode(
            x=x,
            y=alt.Y("relative gradient:Q", scale=alt.Scale(domain=[0, 1]), title="share of the map's peak"),
            color=alt.Color(
                "weights:N", scale=alt.Scale(domain=["trained", "random"], range=["#d62728", "#7f7f7f"]), title=None
            ),
            tooltip=["weights", "column", alt.Tooltip("relative gradient:Q", format=".3f")],
        )
    )
    layers: list[Any] = []
    if box is not None:
        layers.append(_field_band(box, width))
    layers.append(lines)
    return alt.LayerChart(layer=layers).properties(height=240)


def _field_band(box: tuple[int, int], width: int) -> alt.Chart:
    """The theoretical field's columns or steps (first, last), shaded across the chart's height."""
    lo, hi = max(0, box[0]), min(width - 1, box[1])
    band = pd.DataFrame({"from": [lo - 0.5 if lo > 0 else 0], "to": [hi + 0.5 if hi < width - 1 else width - 1]})
    return (
        alt.Chart(band)
        .mark_rect(color="#00e5ff", opacity=0.15)
        .encode(x=alt.X("from:Q", scale=alt.Scale(domain=[0, width - 1], nice=False)), x2="to:Q")
    )


def series_field_chart(series: np.ndarray, box: tuple[int, int], channels: Sequence[str], step: str) -> alt.LayerChart:
    """A series (C, T) as one line per channel over its steps, with one unit's theoretical field (first, last step)
    shaded; hovering a step gives its values."""
    values = np.asarray(series, dtype=np.float64)
    steps = values.shape[-1]
    names = list(channels)[: len(values)] or [f"channel {c + 1}" for c in range(len(values))]
    df = pd.DataFrame(
        {
            "step": np.tile(np.arange(steps), len(values)),
            "value": values.reshape(-1),
            "channel": np.repeat(names, steps),
        }
    )
    x = alt.X("step:Q", scale=alt.Scale(domain=[0, steps - 1], nice=False), axis=alt.Axis(title=step, format="d"))
    lines = (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=x,
            y=alt.Y("value:Q", scale=alt.Scale(zero=False), title="value"),
            color=alt.Color("channel:N", title=None, legend=None if len(values) == 1 else alt.Legend()),
            tooltip=["channel", "step", alt.Tooltip("value:Q", format=".4g")],
        )
    )
    return alt.LayerChart(layer=[_field_band(box, steps), lines]).properties(height=200)


def mosaic(
    maps: np.ndarray,
    cols: int = 8,
    tile: int = 64,
    gap: int = 2,
    signed: bool = False,
    labels: Sequence[str] | None = None,
) -> Image.Image:
    """Tiles (K, H, W) grey (each scaled to its own range; signed: 0 is mid-grey) or (K, H, W, 3) colour."""
    maps = np.asarray(maps, dtype=np.float32)
    k = len(maps)
    cols = max(1, min(cols, k))
    rows = math.ceil(k / cols)
    label_h = 12 if labels else 0
    img = Image.new("RGB", (cols * (tile + gap), rows * (tile + gap + label_h)), "white")
    font = ImageFont.load_default()
    draw = ImageDraw.Draw(img)
    for i, m in enumerate(maps):
        if signed:
            s = float(np.abs(m).max()) or 1.0
            m = 0.5 + 0.5 * m / s
        else:
            lo, hi = float(m.min()), float(m.max())
            m = (m - lo) / (hi - lo) if hi > lo else np.zeros_like(m)
        arr = (np.clip(m, 0, 1) * 255).astype(np.uint8)
        t = Image.fromarray(arr).convert("RGB").resize((tile, tile), Image.Resampling.NEAREST)
        r, c = divmod(i, cols)
        x, y = c * (tile + gap), r * (tile + gap + label_h)
        img.paste(t, (x, y + label_h))
        if labels:
            draw.text((x + 1, y), str(labels[i])[:12], fill="black", font=font)
    return img


def filter_grid(
    weights: np.ndarray, cols: int = 16, cell: int | None = None, gap: int = 6, label: bool = True
) -> tuple[Image.Image, float, bool]:
    """First-layer filters (out, in, kh, kw) as one readable picture: each filter enlarged without blurring
    (nearest neighbour) to `cell` px (about 56 px, at least 4 px per weight), with its index above and a thin
    frame. Three input channels: a colour tile per filter, each channel 0.5 + 0.5 * w / s (mid-grey = 0);
    otherwise the sum over input channels on a grey ramp (black = -s, white = +s). `s` is one scale for every
    filter: the largest |weight|. Returns (picture, s, rgb)."""
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim != 4:
        raise ValueError(f"filters must be (out, in, kh, kw), got shape {w.shape}")
    rgb = w.shape[1] == 3
    tiles = w.transpose(0, 2, 3, 1) if rgb else w.sum(1)
    s = float(np.abs(tiles).max()) or 1.0
    tiles = np.clip(0.5 + 0.5 * tiles / s, 0.0, 1.0)
    kh, kw = w.shape[2:]
    side = cell or max(56, 4 * max(kh, kw))
    f = max(1, side // max(kh, kw))
    tw, th = kw * f, kh * f
    k = len(tiles)
    cols = max(1, min(cols, k))
    rows = math.ceil(k / cols)
    label_h = 16 if label else 0
    font = label_font(11)
    img = Image.new("RGB", (cols * (tw + gap) + gap, rows * (th + gap + label_h) + gap), "white")
    draw = ImageDraw.Draw(img)
    for i, t in enumerate(tiles):
        arr = (t * 255 + 0.5).astype(np.uint8)
        tile = Image.fromarray(arr, "RGB" if rgb else "L").convert("RGB").resize((tw, th), Image.Resampling.NEAREST)
        r, c = divmod(i, cols)
        x, y = gap + c * (tw + gap), gap + r * (th + gap + label_h)
        if label:
            draw.text((x, y), str(i), fill=(90, 90, 90), font=font)
        img.paste(tile, (x, y + label_h))
        draw.rectangle((x - 1, y + label_h - 1, x + tw, y + label_h + th), outline=(170, 170, 170))
    return img, s, rgb


def filter_scale(scale: float, rgb: bool) -> ColourScale:
    """The colour scale of `filter_grid`: grey from -s (black) to +s (white), per channel for colour filters."""
    label = (
        "weight of each colour channel, one scale for every filter (mid-grey = 0)"
        if rgb
        else "weight summed over the input channels, one scale for every filter (mid-grey = 0)"
    )
    return ColourScale(-scale, scale, label, signed=True, cmap="gray")


def filter_scale_bar(scale: float, rgb: bool, width: int = 320) -> Image.Image:
    """The legend of `filter_grid`: a ramp from -s to +s (grey; for colour filters, per channel)."""
    return render.scale_bar(filter_scale(scale, rgb), width)


def filter_figure(weights: np.ndarray, cols: int = 16, cell: int = 56) -> tuple[Image.Image, float, bool]:
    """`filter_grid` (tiles of about `cell` px) with its colour bar below, as one picture to show at its own size:
    (picture, s, rgb)."""
    grid, s, rgb = filter_grid(weights, cols=cols, cell=cell)
    return render.with_colour_bar(grid, filter_scale(s, rgb)), s, rgb


MOSAIC_SCALE = ColourScale(
    0.0, 1.0, "share of each map's own range: black = its lowest value, white = its highest", cmap="gray"
)


def mosaic_figure(maps: np.ndarray, cols: int = 8, tile: int = 72, labels: Sequence[str] | None = None) -> Image.Image:
    """Feature maps as a grey `mosaic` (each tile stretched over its own range) with that scale's colour bar (its
    text larger: the page shows the mosaic shrunk beside the input)."""
    return render.with_colour_bar(mosaic(maps, cols=cols, tile=tile, labels=labels), MOSAIC_SCALE, font_size=17)


def attention_grid_figure(tiles: np.ndarray, shared: bool = False) -> Image.Image:
    """`attention_grid_image` with its colour bar: 0 to the grid's largest weight (shared) or to each tile's
    own maximum."""
    top = float(tiles.max()) if shared else 1.0
    label = "attention weight (one scale for every tile)" if shared else "share of each tile's own maximum"
    return render.with_colour_bar(
        attention_grid_image(tiles, shared=shared), ColourScale(0.0, top, label, cmap="viridis"), 360
    )


def heat_figure(
    values: np.ndarray, label: str, box: tuple[int, int, int, int] | None = None, min_side: int = 256
) -> Image.Image:
    """A non-negative map (H, W) on the inferno scale from 0 to its peak, enlarged like `upscaled`, the box
    (`draw_box`'s inclusive top, left, bottom, right) drawn on it, with its colour bar below."""
    img, factor = heat_image(values, min_side)
    if box is not None:
        img = draw_box(img, box, factor, colour="#00e5ff", width=2)
    peak = float(np.asarray(values).max()) if np.asarray(values).size else 0.0
    return render.with_colour_bar(img, ColourScale(0.0, peak, label, cmap="inferno"), 300)


# ---- embeddings --------------------------------------------------------------------------------
def thumbnail_url(image01: Any, max_side: int = 48) -> str:
    """A small PNG data URL of an image (C, H, W) in [0, 1], for chart tooltips."""
    img = Image.fromarray((image_hwc(image01) * 255 + 0.5).astype(np.uint8))
    if max(img.size) > max_side:
        img.thumbnail((max_side, max_side))
    elif max(img.size) < 56:  # tiny digits: enlarge so the tooltip is readable
        f = math.ceil(56 / max(img.size))
        img = img.resize((img.width * f, img.height * f), Image.Resampling.NEAREST)
    return data_uri(png_bytes(img))
