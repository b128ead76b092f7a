"""Rendering attributions: image overlays, heatmaps, a colour legend, and highlighted text (HTML).

Plain functions (numpy + PIL + matplotlib colour maps, no pyplot) shared by the dashboard and
the CLI. Colour conventions:
- signed maps use a diverging map centred at 0 ('RdBu_r': red positive, blue negative, white 0);
- unsigned maps use a sequential map ('inferno') of the magnitude;
- `scale` fixes the value that gets the strongest colour, so several maps (e.g. one per method)
  can share one colour scale; by default each map uses its own max |value|.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from xaidash.explainers.params import ExplainError

SIGNED_CMAP = "RdBu_r"
UNSIGNED_CMAP = "inferno"
DEFAULT_UPSCALE = 224  # small images (28x28) are enlarged until their shorter side reaches this
OVERLAY_ALPHA = 0.75  # the strongest pixels nearly opaque: maps stay visible on busy images


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


def colorbar(
    signed: bool = True,
    scale: float = 1.0,
    cmap: str | None = None,
    width: int = 256,
    height: int = 36,
    label: str | None = None,
) -> Image.Image:
    """A small horizontal legend: the colour ramp with its end values (and 0 for signed maps),
    and `label` on a line below (the image grows taller to fit it)."""
    if width < 16 or height < 12:
        raise ExplainError("A colour bar needs at least 16x12 pixels.")
    lo = -scale if signed else 0.0
    ramp = np.linspace(lo, scale, width)
    bar_h = max(4, height // 2)
    rgb = colorize(np.tile(ramp, (bar_h, 1)), signed, scale if scale > 0 else None, cmap)
    font = ImageFont.load_default()
    line = int(font.getbbox("0Ag")[3]) + 2
    img = Image.new("RGB", (width, max(height, bar_h + 1 + line * (2 if label else 1))), "white")
    img.paste(_to_pil(rgb), (0, 0))
    draw = ImageDraw.Draw(img)
    ticks = [(0, f"{lo:.3g}"), (width - 1, f"{scale:.3g}")]
    if signed:
        ticks.insert(1, (width // 2, "0"))
    for x, text in ticks:
        w = draw.textlength(text, font=font)
        draw.text((min(max(0, x - w / 2), width - w), bar_h + 1), text, fill="black", font=font)
    if label:
        draw.text(
            (max(0.0, width / 2 - draw.textlength(label, font=font) / 2), bar_h + 1 + line),
            label,
            fill="dimgray",
            font=font,
        )
    return img


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
