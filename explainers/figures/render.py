"""Rendering attributions: image overlays, heatmaps, a colour legend, and highlighted text (HTML).

Plain functions (numpy + PIL + matplotlib colour maps, no pyplot) shared by the dashboard and
the CLI. Colour conventions:
- signed maps use a diverging map centred at 0 ('RdBu_r': red positive, blue negative, white 0);
- unsigned maps use a sequential map ('inferno') of the magnitude, never the diverging one;
- `scale` fixes the value that gets the strongest colour, so several maps (e.g. one per method)
  can share one colour scale; by default each map uses its own max |value|.

Honest scales: `legend.map_legend(spec)` says, from a method's spec alone, what its map's values are
(units), which other methods' maps are in the same units (`group`) and what red, blue and bright
mean; `map_scales` picks one colour scale per map: each map's own high percentile, its own
maximum, or one scale shared only by maps in the same units. `colorbar_html` draws the legend the
dashboard shows under a map (range, units, meaning).

Every scale visible: a page draws a colour-encoded image or word strip through `scaled_map` (the values
coloured by a `ColourScale`, alone or over a grey copy of the input), `with_colour_bar` (an image it coloured
itself, e.g. a mosaic) or `scaled_tokens_html` (highlighted words); each always draws the scale's colour bar
with the picture, and marks the image (`SCALE_TAG` in `Image.info`) so the page tests can tell that it did.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import matplotlib
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from xaidash.explainers.params import ExplainError

SIGNED_CMAP = "RdBu_r"
UNSIGNED_CMAP = "inferno"
DEFAULT_UPSCALE = 224  # small images (28x28) are enlarged until their shorter side reaches this
LARGE_UPSCALE = 512  # the enlarged view of one map
OVERLAY_ALPHA = 0.75  # the strongest pixels nearly opaque: maps stay visible on busy images
CLIP_PERCENTILE = 99.0  # 'percentile' scales saturate at this percentile of |value|
# How map_scales picks each map's colour scale.
ScaleMode = Literal["percentile", "max", "units"]
SCALE_MODES: dict[str, str] = {
    "percentile": f"each map on its own scale, saturating at its {CLIP_PERCENTILE:g}th percentile of |value|",
    "max": "each map on its own scale, saturating at its largest |value|",
    "units": "one scale shared by the maps of an input that are in the same units (else their own, as 'percentile')",
}


def _numpy(a: Any) -> np.ndarray:
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a)


def default_cmap(signed: bool) -> str:
    return SIGNED_CMAP if signed else UNSIGNED_CMAP


def shared_scale(maps: Iterable[Any]) -> float:
    """The largest |value| over several maps: pass it as `scale` to draw them on one colour scale."""
    values = [float(np.nanmax(np.abs(_numpy(m)))) for m in maps if _numpy(m).size]
    return max(values, default=0.0)


def robust_scale(values: Any, percentile: float = CLIP_PERCENTILE) -> float:
    """The `percentile`-th percentile of a map's finite |values| (its max when that percentile is 0,
    e.g. a sparse map; 0 for an all-zero map): a scale a few extreme pixels cannot wash out."""
    v = np.abs(_numpy(values).astype(np.float64))
    v = v[np.isfinite(v)]
    if not v.size:
        return 0.0
    p = float(np.percentile(v, percentile, method="higher"))  # a value of the map, never interpolated toward 0
    return p if p > 0 else float(v.max())


def is_clipped(values: Any, scale: float) -> bool:
    """Whether a map drawn on colour `scale` saturates: some finite |value| lies beyond it (its colour bar's
    end values then read '≥ s' and '≤ −s'). NaN and inf are ignored; a scale of 0 or less (an all-zero map,
    drawn in the centre colour) never clips. The one rule every page, the CLI and the reports use."""
    if not (scale > 0 and math.isfinite(scale)):
        return False
    v = np.abs(_numpy(values).astype(np.float64))
    v = v[np.isfinite(v)]
    return bool(v.size and v.max() > scale)


def finite_range(values: Any) -> tuple[float, float] | None:
    """(min, max) of a map's finite values; None when it has none."""
    v = _numpy(values).astype(np.float64)
    v = v[np.isfinite(v)]
    return (float(v.min()), float(v.max())) if v.size else None


def map_scales(
    maps: Mapping[str, Any], groups: Mapping[str, str] | None = None, mode: ScaleMode = "percentile"
) -> dict[str, float]:
    """One colour scale per map (name -> scale, 1.0 for an all-zero map).

    percentile: each map's own `robust_scale`; max: each map's own largest |value|; units: maps whose
    `groups` entry is equal share the largest of their `robust_scale`s, a map in a group of its own
    keeps its own (so occlusion's logits never wash out IG's per-pixel values)."""
    if mode not in SCALE_MODES:
        raise ExplainError(f"Unknown scale mode {mode!r}; choose one of {', '.join(SCALE_MODES)}.")
    if mode == "max":
        own = {k: float(np.nanmax(np.abs(_numpy(v)))) if _numpy(v).size else 0.0 for k, v in maps.items()}
    else:
        own = {k: robust_scale(v) for k, v in maps.items()}
    if mode == "units":
        groups = groups or {}
        by_group: dict[str, float] = {}
        for k, s in own.items():
            g = groups.get(k, f"own|{k}")
            by_group[g] = max(by_group.get(g, 0.0), s)
        own = {k: by_group[groups.get(k, f"own|{k}")] for k in own}
    return {k: (s if s > 0 and math.isfinite(s) else 1.0) for k, s in own.items()}


def _resolve_scale(values: np.ndarray, scale: float | None) -> float:
    if scale is None:
        finite = np.abs(values[np.isfinite(values)])
        scale = float(finite.max()) if finite.size else 0.0
    if scale < 0 or not math.isfinite(scale):
        raise ExplainError(f"Colour scale must be a finite value >= 0, got {scale}.")
    return scale if scale > 0 else 1.0  # an all-zero map stays at the centre colour


def normalize_values(values: Any, signed: bool = True, scale: float | None = None) -> np.ndarray:
    """Values mapped to [0, 1] colour-map positions: signed -> 0.5 + v / (2 scale), unsigned -> |v| / scale."""
    v = np.nan_to_num(_numpy(values).astype(np.float64), nan=0.0)
    s = _resolve_scale(v, scale)
    pos = 0.5 + 0.5 * v / s if signed else np.abs(v) / s
    return np.clip(pos, 0.0, 1.0)


def colorize(values: Any, signed: bool = True, scale: float | None = None, cmap: str | None = None) -> np.ndarray:
    """RGB floats in [0, 1], shape values.shape + (3,)."""
    try:
        colormap = matplotlib.colormaps[cmap or default_cmap(signed)]
    except KeyError:
        raise ExplainError(
            f"Unknown colour map {cmap!r}; try {SIGNED_CMAP}, bwr, {UNSIGNED_CMAP} or viridis."
        ) from None
    return colormap(normalize_values(values, signed, scale))[..., :3]


def image_hwc(image01: Any) -> np.ndarray:
    """An image in [0, 1] as float (H, W, 3): accepts (C, H, W), (H, W, C) or (H, W), 1 or 3 channels."""
    img = _numpy(image01).astype(np.float32)
    if img.ndim == 3 and img.shape[0] in (1, 3):  # channels first, as torch keeps images
        img = img.transpose(1, 2, 0)
    if img.ndim == 2:
        img = img[..., None]
    if img.ndim != 3 or img.shape[-1] not in (1, 3):
        raise ExplainError(
            f"Expected an image (C, H, W), (H, W, C) or (H, W) with 1 or 3 channels, got shape {img.shape}."
        )
    if img.shape[-1] == 1:
        img = np.repeat(img, 3, axis=-1)
    return np.clip(np.nan_to_num(img), 0.0, 1.0)


def greyscale(image01: Any) -> np.ndarray:
    """The image as grey (H, W, 3) in [0, 1] (ITU-R 601 luma): coloured maps stay readable over any object colour."""
    grey = image_hwc(image01) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    return np.repeat(grey[..., None], 3, axis=-1)


def _to_pil(rgb01: np.ndarray) -> Image.Image:
    return Image.fromarray((np.clip(rgb01, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8))


def _upscale(img: Image.Image, upscale: int | None) -> Image.Image:
    """Nearest-neighbour enlargement by a whole factor until the shorter side is >= `upscale` px."""
    if not upscale:
        return img
    short = min(img.size)
    if short >= upscale:
        return img
    factor = math.ceil(upscale / short)
    return img.resize((img.width * factor, img.height * factor), Image.Resampling.NEAREST)


def _map_2d(attribution: Any) -> np.ndarray:
    a = _numpy(attribution).astype(np.float32)
    if a.ndim == 3 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 2:
        raise ExplainError(f"Expected an attribution map (H, W), got shape {a.shape}.")
    return a


def heatmap(
    attribution: Any,
    signed: bool = True,
    scale: float | None = None,
    cmap: str | None = None,
    upscale: int | None = DEFAULT_UPSCALE,
) -> Image.Image:
    """The attribution map (H, W) alone, coloured."""
    return _upscale(_to_pil(colorize(_map_2d(attribution), signed, scale, cmap)), upscale)


def overlay(
    image01: Any,
    attribution: Any,
    signed: bool = True,
    alpha: float = 0.5,
    scale: float | None = None,
    cmap: str | None = None,
    upscale: int | None = DEFAULT_UPSCALE,
    by_magnitude: bool = True,
) -> Image.Image:
    """The image with the coloured attribution blended over it.

    alpha is the opacity of the colour at the strongest value; with `by_magnitude` the opacity
    falls with |value| so unimportant pixels show the image, else it is alpha everywhere.
    A map whose size differs from the image (a coarse CAM) is resized bilinearly to it.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ExplainError(f"alpha must lie in [0, 1], got {alpha}.")
    img = image_hwc(image01)
    a = _map_2d(attribution)
    if a.shape != img.shape[:2]:
        a = np.asarray(
            Image.fromarray(a.astype(np.float32)).resize((img.shape[1], img.shape[0]), Image.Resampling.BILINEAR)
        )
    colour = colorize(a, signed, scale, cmap)
    if by_magnitude:
        strength = (
            np.abs(normalize_values(a, signed, scale) - 0.5) * 2.0 if signed else normalize_values(a, signed, scale)
        )
        weight = alpha * strength[..., None]
    else:
        weight = np.full((*a.shape, 1), alpha)
    return _upscale(_to_pil((1.0 - weight) * img + weight * colour), upscale)


@lru_cache(maxsize=8)
def _font(size: int | None) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans (shipped with matplotlib) at `size` px; PIL's small bitmap font when None or unavailable."""
    if size:
        path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
        try:
            return ImageFont.truetype(str(path), size)
        except OSError:
            pass
    return ImageFont.load_default()


def _tick(v: float) -> str:
    return "0" if v == 0 else f"{v:.3g}".replace("-", "−")


def colorbar(
    signed: bool = True,
    scale: float = 1.0,
    cmap: str | None = None,
    width: int = 256,
    height: int = 36,
    label: str | None = None,
    *,
    font_size: int | None = None,
    clipped: bool = False,
) -> Image.Image:
    """A small horizontal legend: the colour ramp with its end values (and 0 for signed maps),
    and `label` below, wrapped onto as many lines as it needs (the image grows taller to fit it).

    font_size: draw the text in DejaVu Sans at this size (readable in saved files) instead of PIL's
    small bitmap font; clipped: the end values are saturation points (values beyond get the end
    colour), so they are written '≥ s' and '≤ −s'."""
    if width < 16 or height < 12:
        raise ExplainError("A colour bar needs at least 16x12 pixels.")
    lo = -scale if signed else 0.0
    ramp = np.linspace(lo, scale, width)
    bar_h = max(4, height // 2)
    rgb = colorize(np.tile(ramp, (bar_h, 1)), signed, scale if scale > 0 else None, cmap)
    font = _font(font_size)
    line = int(font.getbbox("0Ag")[3]) + 2
    lines = _wrap(label, font, width) if label else []
    img = Image.new("RGB", (width, max(height, bar_h + 1 + line * (1 + len(lines)))), "white")
    img.paste(_to_pil(rgb), (0, 0))
    draw = ImageDraw.Draw(img)
    hi_text, lo_text = _tick(scale), _tick(lo)
    if clipped:
        hi_text = "≥ " + hi_text
        lo_text = ("≤ " + lo_text) if signed else lo_text
    if not font_size:  # the bitmap font has no '≥', '≤' or '−'
        hi_text, lo_text = (t.replace("≥ ", ">=").replace("≤ ", "<=").replace("−", "-") for t in (hi_text, lo_text))
    ticks = [(0, lo_text), (width - 1, hi_text)]
    if signed:
        ticks.insert(1, (width // 2, "0"))
    for x, text in ticks:
        w = draw.textlength(text, font=font)
        draw.text((min(max(0, x - w / 2), width - w), bar_h + 1), text, fill="black", font=font)
    for k, text in enumerate(lines, start=1):
        draw.text(
            (max(0.0, width / 2 - draw.textlength(text, font=font) / 2), bar_h + 1 + line * k),
            text,
            fill="dimgray",
            font=font,
        )
    return img


def _wrap(text: str, font: ImageFont.FreeTypeFont | ImageFont.ImageFont, width: int) -> list[str]:
    """`text` in lines no wider than `width` px (a word longer than that gets a line of its own)."""
    lines: list[str] = []
    for word in text.split():
        if lines and font.getlength(f"{lines[-1]} {word}") <= width - 4:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines


def with_legend(img: Image.Image, legend: Image.Image, gap: int = 6) -> Image.Image:
    """`img` with `legend` (e.g. a `colorbar`) centred below it, on white: one self-explaining file."""
    width = max(img.width, legend.width)
    out = Image.new("RGB", (width, img.height + gap + legend.height), "white")
    out.paste(img.convert("RGB"), ((width - img.width) // 2, 0))
    out.paste(legend.convert("RGB"), ((width - legend.width) // 2, img.height + gap))
    return out


def colorbar_html(
    signed: bool,
    scale: float,
    units: str = "",
    meaning: str = "",
    *,
    value_range: tuple[float, float] | None = None,
    clipped: bool = False,
    note: str = "",
    cmap: str | None = None,
    stops: int = 11,
    low: float | None = None,
) -> str:
    """The legend under a map, as HTML: the colour ramp, its end values (≥/≤ when `clipped`) and 0,
    the units, the map's own `value_range`, a `note` (e.g. which scale) and what the colours mean.
    `low`: an unsigned ramp that starts there instead of 0 (it ends at `low + scale`).
    Every text is HTML-escaped."""
    s = scale if scale > 0 and math.isfinite(scale) else 1.0
    lo = -s if signed else 0.0
    colours = colorize(np.linspace(lo, s, stops), signed, s, cmap)
    ramp = ", ".join(_hex(c) for c in colours)
    hi_text, lo_text = _tick(s), _tick(lo)
    if low is not None and not signed:  # an unsigned ramp from `low` (darkest) to `low + scale`
        hi_text, lo_text = _tick(low + s), _tick(low)
    if clipped:
        hi_text, lo_text = "≥ " + hi_text, ("≤ " + lo_text) if signed else lo_text
    ticks = [lo_text, "0", hi_text] if signed else [lo_text, hi_text]
    tick_html = "".join(f"<span>{html.escape(t)}</span>" for t in ticks)
    lines = []
    if units:
        lines.append(f"<b>{html.escape(units)}</b>")
    if value_range is not None:
        a, b = value_range
        lines.append(f"this map: {html.escape(_tick(float(a)))} … {html.escape(_tick(float(b)))}")
    first = " · ".join(lines)
    out = [
        '<div class="xai-cbar" style="font-family:sans-serif;font-size:13px;line-height:1.35;margin:2px 0 6px 0">',
        f'<div style="height:14px;border:1px solid #999;border-radius:2px;background:linear-gradient(to right, {ramp})"></div>',
        f'<div style="display:flex;justify-content:space-between;font-variant-numeric:tabular-nums">{tick_html}</div>',
    ]
    if first:
        out.append(f"<div>{first}</div>")
    if note:
        out.append(f'<div style="color:#555">{html.escape(note)}</div>')
    if meaning:
        out.append(f'<div style="color:#555">{html.escape(meaning)}</div>')
    out.append("</div>")
    return "".join(out)


TOKEN_BAR_MAX_PX = 420  # the colour bar under highlighted words: a readable ramp, not the column's whole width
SCALE_TAG = "xaidash_colour_scale"  # Image.info key: the image carries its colour bar (the scale's label)


@dataclass(frozen=True)
class ColourScale:
    """What the colours of one drawn map mean: values from `low` to `high` along colour map `cmap`.

    signed: a diverging map centred at 0, from −s to +s (`low` is then −`high`); otherwise `low` gets the
    darkest colour and `high` the brightest (e.g. attention stretched from the map's own minimum). `label`
    says what the values are (written under the bar); `clipped`: values beyond the ends get the end colours
    (the ends then read '≥'/'≤')."""

    low: float
    high: float
    label: str
    signed: bool = False
    cmap: str | None = None
    clipped: bool = False

    @classmethod
    def of(
        cls, values: Any, label: str, *, signed: bool = False, cmap: str | None = None, stretch: bool = False
    ) -> ColourScale:
        """The scale that spans a map's finite values: ±max |value| (signed), 0 to its max, or (stretch) its
        own minimum to its maximum."""
        rng = finite_range(values) or (0.0, 0.0)
        if signed:
            top = max(abs(rng[0]), abs(rng[1]))
            return cls(-top, top, label, True, cmap)
        return cls(rng[0] if stretch else min(0.0, rng[0]), rng[1], label, False, cmap)

    @property
    def span(self) -> float:
        """The value range the colours cover (1 when it is empty: such a map gets one colour)."""
        width = (max(abs(self.low), abs(self.high)) if self.signed else self.high - self.low) or 0.0
        return width if width > 0 and math.isfinite(width) else 1.0

    def positions(self, values: Any) -> np.ndarray:
        """Colour-map positions in [0, 1] of `values` on this scale (NaN -> the low end, or 0 when signed)."""
        v = np.nan_to_num(_numpy(values).astype(np.float64), nan=0.0 if self.signed else self.low)
        pos = 0.5 + 0.5 * v / self.span if self.signed else (v - self.low) / self.span
        return np.clip(pos, 0.0, 1.0)

    def colours(self, values: Any) -> np.ndarray:
        """RGB floats in [0, 1], shape values.shape + (3,)."""
        try:
            colormap = matplotlib.colormaps[self.cmap or default_cmap(self.signed)]
        except KeyError:
            raise ExplainError(
                f"Unknown colour map {self.cmap!r}; try {SIGNED_CMAP}, {UNSIGNED_CMAP} or viridis."
            ) from None
        return colormap(self.positions(values))[..., :3]

    def ticks(self) -> list[tuple[float, str]]:
        """(position in [0, 1], text) of the bar's end values and, for signed scales, 0."""
        hi = _tick(self.span if self.signed else self.high)
        lo = _tick(-self.span if self.signed else self.low)
        if self.clipped:
            hi, lo = "≥ " + hi, ("≤ " + lo) if self.signed else lo
        return [(0.0, lo), (0.5, "0"), (1.0, hi)] if self.signed else [(0.0, lo), (1.0, hi)]


def scale_bar(scale: ColourScale, width: int = 320, font_size: int = 13) -> Image.Image:
    """The colour bar of `scale` as a picture: the framed ramp, its end values (and 0 when signed) and the
    label below, wrapped to `width` (DejaVu Sans at `font_size` px)."""
    width = max(64, int(width))
    bar_h, font = 16, _font(font_size)
    ramp = scale.colours(
        np.tile(
            np.linspace(-scale.span, scale.span, width)
            if scale.signed
            else np.linspace(scale.low, scale.low + scale.span, width),
            (bar_h, 1),
        )
    )
    line = int(font.getbbox("0Ag")[3]) + 3
    lines = _wrap(scale.label, font, width) if scale.label else []
    img = Image.new("RGB", (width, bar_h + 4 + line * (1 + len(lines))), "white")
    img.paste(_to_pil(ramp), (0, 0))
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, width - 1, bar_h - 1), outline=(150, 150, 150))
    for pos, text in scale.ticks():
        w = draw.textlength(text, font=font)
        x = pos * (width - 1)
        draw.text((min(max(0.0, x - w / 2), width - w), bar_h + 2), text, fill="black", font=font)
    for k, text in enumerate(lines, start=1):
        w = draw.textlength(text, font=font)
        draw.text((max(0.0, width / 2 - w / 2), bar_h + 2 + line * k), text, fill=(80, 80, 80), font=font)
    img.info[SCALE_TAG] = scale.label
    return img


def with_colour_bar(
    img: Image.Image, scale: ColourScale, bar_width: int | None = None, font_size: int = 13
) -> Image.Image:
    """`img` (coloured by `scale`) with the scale's colour bar centred below it: the one way a page shows a
    colour-encoded picture. The bar is as wide as the picture (at least 240 px, at most 480 px) unless given;
    `font_size`: larger for a picture the page shows shrunk (several to a row)."""
    width = bar_width or int(min(480, max(240, img.width)))
    out = with_legend(img, scale_bar(scale, width, font_size), gap=6)
    out.info[SCALE_TAG] = scale.label
    return out


def scaled_map(
    values: Any,
    scale: ColourScale,
    *,
    image: Any = None,
    upscale: int | None = DEFAULT_UPSCALE,
    alpha: float = OVERLAY_ALPHA,
    bar_width: int | None = None,
    font_size: int = 13,
) -> Image.Image:
    """A map (H, W) coloured by `scale`, with its colour bar below. With `image` (the input, in [0, 1]) the
    colours are blended over a grey copy of it, as on the Explain page: opacity grows with the distance from
    the scale's low end (from 0 when signed), so faint values show the input; a map of another size than the
    image is resized to it (nearest: patch grids stay blocks)."""
    a = _map_2d(values)
    colour = scale.colours(a)
    if image is None:
        drawn = _to_pil(colour)
    else:
        if not 0.0 <= alpha <= 1.0:
            raise ExplainError(f"alpha must lie in [0, 1], got {alpha}.")
        base = greyscale(image)
        if a.shape != base.shape[:2]:
            resized = Image.fromarray(a.astype(np.float32)).resize(
                (base.shape[1], base.shape[0]), Image.Resampling.NEAREST
            )
            a = np.asarray(resized)
            colour = scale.colours(a)
        pos = scale.positions(a)
        strength = np.abs(pos - 0.5) * 2.0 if scale.signed else pos
        weight = alpha * strength[..., None]
        drawn = _to_pil((1.0 - weight) * base + weight * colour)
    return with_colour_bar(_upscale(drawn, upscale), scale, bar_width, font_size)


def scaled_tokens_html(words: Sequence[str], scores: Any, scale: ColourScale, note: str = "") -> str:
    """Highlighted words (`highlight_tokens`' spans, coloured by `scale`) followed by the scale's colour bar
    and label, as one HTML block."""
    s = _numpy(scores).astype(np.float64).reshape(-1)
    if len(words) != len(s):
        raise ExplainError(f"Got {len(words)} words but {len(s)} scores.")
    strip = _token_spans(words, s, scale.colours(s) if len(s) else np.zeros((0, 3)))
    bar = colorbar_html(
        scale.signed,
        scale.span,
        scale.label,
        cmap=scale.cmap,
        clipped=scale.clipped,
        note=note,
        low=None if scale.signed else scale.low,
    )
    return f'<div class="xai-scaled">{strip}<div style="max-width:{TOKEN_BAR_MAX_PX}px">{bar}</div></div>'


def _hex(rgb: np.ndarray) -> str:
    r, g, b = (round(float(c) * 255) for c in rgb)
    return f"#{r:02x}{g:02x}{b:02x}"


def highlight_tokens(
    words: Sequence[str],
    scores: Sequence[float] | np.ndarray,
    scale: float | None = None,
    signed: bool = True,
    cmap: str | None = None,
) -> str:
    """HTML: one <span> per word, background coloured by its score, the exact value as a tooltip.
    Words are HTML-escaped, so text such as '<script>' is shown, never run."""
    s = _numpy(scores).astype(np.float64).reshape(-1)
    if len(words) != len(s):
        raise ExplainError(f"Got {len(words)} words but {len(s)} scores.")
    colours = colorize(s, signed, scale, cmap) if len(s) else np.zeros((0, 3))
    return _token_spans(words, s, colours)


def _token_spans(words: Sequence[str], s: np.ndarray, colours: np.ndarray) -> str:
    """One <span> per word on its colour (black or white text by luminance), the value as a tooltip."""
    spans = []
    for word, value, rgb in zip(words, s, colours, strict=True):
        luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
        fg = "#000000" if luminance > 0.5 else "#ffffff"
        spans.append(
            f'<span style="background-color:{_hex(rgb)};color:{fg};padding:1px 3px;margin:1px;'
            f'border-radius:3px;display:inline-block" title="{html.escape(f"{value:.4g}", quote=True)}">'
            f"{html.escape(str(word), quote=True)}</span>"
        )
    return '<div class="xai-tokens" style="line-height:1.9;font-family:sans-serif">' + " ".join(spans) + "</div>"
