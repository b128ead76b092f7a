"""Drawing maps as pictures (numpy + PIL + matplotlib colour maps, no pyplot), shared by the dashboard and the CLI:
an input image as (H, W, 3), its grey copy, a map coloured alone (`heatmap`) or over the image (`overlay`), a colour
bar (`colorbar`, `scale_bar`) and a picture with its bar below (`with_legend`).

Every scale visible: a page draws a colour-encoded image through `scaled_map` (the values coloured by a
`scales.ColourScale`, alone or over a grey copy of the input) or `with_colour_bar` (an image it coloured itself, e.g. a
mosaic); each always draws the scale's colour bar with the picture, and marks the image (`SCALE_TAG` in `Image.info`)
so the page tests can tell that it did. Which value gets which colour is the scale policy's (explainers/figures/
scales.py); highlighted words and the HTML colour bar are explainers/figures/html_parts.py.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from xaidash.explainers.figures.scales import ColourScale, as_array, colorize, normalize_values, tick_text
from xaidash.explainers.params import ExplainError

DEFAULT_UPSCALE = 224  # small images (28x28) are enlarged until their shorter side reaches this
LARGE_UPSCALE = 512  # the enlarged view of one map
OVERLAY_ALPHA = 0.75  # the strongest pixels nearly opaque: maps stay visible on busy images
SCALE_TAG = "xaidash_colour_scale"  # Image.info key: the image carries its colour bar (the scale's label)


def image_hwc(image01: Any) -> np.ndarray:
    """An image in [0, 1] as float (H, W, 3): accepts (C, H, W), (H, W, C) or (H, W), 1 or 3 channels."""
    img = as_array(image01).astype(np.float32)
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
    a = as_array(attribution).astype(np.float32)
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
def label_font(size: int | None) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans (shipped with matplotlib) at `size` px; PIL's small bitmap font when None or unavailable."""
    if size:
        path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
        try:
            return ImageFont.truetype(str(path), size)
        except OSError:
            pass
    return ImageFont.load_default()


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
    font = label_font(font_size)
    line = int(font.getbbox("0Ag")[3]) + 2
    lines = _wrap(label, font, width) if label else []
    img = Image.new("RGB", (width, max(height, bar_h + 1 + line * (1 + len(lines)))), "white")
    img.paste(_to_pil(rgb), (0, 0))
    draw = ImageDraw.Draw(img)
    hi_text, lo_text = tick_text(scale), tick_text(lo)
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


def scale_bar(scale: ColourScale, width: int = 320, font_size: int = 13) -> Image.Image:
    """The colour bar of `scale` as a picture: the framed ramp, its end values (and 0 when signed) and the
    label below, wrapped to `width` (DejaVu Sans at `font_size` px)."""
    width = max(64, int(width))
    bar_h, font = 16, label_font(font_size)
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
