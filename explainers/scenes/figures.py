"""Scene maps as pictures: one map over its image with the explained box drawn solid (or the explained region's
outline), the other detections faint, and the colour bar with the method's units below (`scene_figure`); the
predictions alone (`boxes_png`); and one self-contained HTML page of a session (`scene_report_html`).

Colours come from `explainers/figures/scales.ColourScale` (CAMs, never negative: dark to bright from 0; signed maps:
blue/white/red around 0), the blend over a grey copy of the image and the colour bar from `render`, and every PNG
from `png.png_bytes`, as every other map of xaidash. Only the boxes and outlines are drawn here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

from xaidash.data.formatting import fmt_number, seconds_text
from xaidash.explainers.figures.html_parts import esc
from xaidash.explainers.figures.html_report import ARROWS, CSS, table_html
from xaidash.explainers.figures.png import data_uri, input_image, png_bytes
from xaidash.explainers.figures.render import DEFAULT_UPSCALE, OVERLAY_ALPHA, greyscale, label_font, with_colour_bar
from xaidash.explainers.figures.scales import ColourScale, finite_range, tick_text
from xaidash.explainers.scenes.api import DEFAULT_MIN_SCORE, SceneExplanation
from xaidash.explainers.scenes.metrics import SCENE_METRICS
from xaidash.explainers.scenes.registry import get_scene_method
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget, class_name
from xaidash.models.scenes.predictions import Detections, Segmentation

SOLID = (0, 230, 118)  # the explained box or region: a green no colour map here uses
FAINT = (255, 255, 255, 120)  # the other detections: thin, half-transparent white
PALETTE = (  # one colour per class in the predictions picture (tab10)
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
)


@dataclass(frozen=True)
class SceneFigure:
    """One drawn map: `png` (the map over the image with the target marked and the colour bar below; None when the
    method failed, `caption` then says why), the `caption`, the map's finite `value_range` and its colour `scale`."""

    method: str
    label: str
    target_text: str
    png: bytes | None
    caption: str
    value_range: tuple[float, float] | None
    scale: ColourScale | None
    error: str | None = None


def factor_for(size: tuple[int, int], upscale: int | None) -> int:
    """The whole enlargement factor that makes the shorter side at least `upscale` px (render's rule)."""
    short = min(size)
    return 1 if not upscale or short >= upscale else math.ceil(upscale / short)


def _enlarged(rgb01: np.ndarray, factor: int) -> Image.Image:
    img = Image.fromarray((np.clip(rgb01, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8))
    return img.resize((img.width * factor, img.height * factor), Image.Resampling.NEAREST) if factor > 1 else img


def _box_xy(box: Sequence[float], factor: int) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = (float(v) * factor for v in box)
    return x0, y0, max(x0, x1 - 1), max(y0, y1 - 1)


def _outline(mask: torch.Tensor | np.ndarray, factor: int) -> np.ndarray:
    """(H f, W f) bool: the pixels of the enlarged mask that touch its outside (its 1 px outline, 2 px thick)."""
    m = np.asarray(mask, dtype=bool).repeat(factor, 0).repeat(factor, 1)
    padded = np.pad(m, 2)
    inner = m.copy()
    for dy in (-2, -1, 0, 1, 2):
        for dx in (-2, -1, 0, 1, 2):
            inner &= padded[2 + dy : 2 + dy + m.shape[0], 2 + dx : 2 + dx + m.shape[1]]
    return m & ~inner


def mark_targets(
    img: Image.Image,
    target: BoxTarget | RegionTarget,
    others: Detections | None,
    factor: int,
    classes: tuple[str, ...] = (),
) -> Image.Image:
    """`img` (the enlarged image) with the other detections faint, then the explained box solid with its class (or
    the explained region's outline)."""
    out = img.convert("RGBA")
    faint = Image.new("RGBA", out.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(faint)
    own = torch.tensor(target.box, dtype=torch.float32) if isinstance(target, BoxTarget) else None
    if others is not None:
        for i in range(len(others)):
            if own is None or not torch.allclose(others.boxes[i].float(), own, atol=1e-3):
                draw.rectangle(_box_xy(others.boxes[i].tolist(), factor), outline=FAINT, width=1)
    out = Image.alpha_composite(out, faint)
    if isinstance(target, RegionTarget):
        rgba = np.array(out)
        rgba[_outline(target.mask.cpu(), factor)] = (*SOLID, 255)
        return Image.fromarray(rgba).convert("RGB")
    draw = ImageDraw.Draw(out)
    x0, y0, x1, y1 = _box_xy(target.box, factor)
    draw.rectangle((x0, y0, x1, y1), outline=(*SOLID, 255), width=max(2, factor))
    if classes:
        font = label_font(12)
        text = class_name(classes, target.label)
        w = draw.textlength(text, font=font)
        ty = y0 - 15 if y0 >= 15 else y1 + 1
        draw.rectangle((x0, ty, x0 + w + 4, ty + 14), fill=(*SOLID, 255))
        draw.text((x0 + 2, ty), text, fill=(0, 0, 0, 255), font=font)
    return out.convert("RGB")


def map_over_image(values: np.ndarray, scale: ColourScale, image: Any) -> np.ndarray:
    """(H, W, 3) in [0, 1]: the map's colours blended over a grey copy of the image, opacity growing with the
    distance from the scale's low end (from 0 when signed): render.scaled_map's blend, kept as an array so the
    boxes can be drawn on it before the colour bar goes below."""
    base = greyscale(image)
    pos = scale.positions(values)
    strength = np.abs(pos - 0.5) * 2.0 if scale.signed else pos
    weight = OVERLAY_ALPHA * strength[..., None]
    return np.asarray((1.0 - weight) * base + weight * scale.colours(values), dtype=np.float32)


def colour_scale(values: np.ndarray, units: str, signed: bool) -> ColourScale:
    """The map's own scale: 0 to its largest value, or ±its largest |value| when the method's maps are signed."""
    return ColourScale.of(values, units, signed=signed)


def scene_figure(
    image: Any,
    explanation: SceneExplanation,
    boxes: Detections | None,
    classes: tuple[str, ...],
    *,
    scale: ColourScale | None = None,
    upscale: int | None = DEFAULT_UPSCALE,
) -> SceneFigure:
    """One map drawn over `image` (3, H, W) in [0, 1], enlarged to `upscale` px, with the explained box solid (or
    the region's outline), the other `boxes` faint, and the colour bar (its own scale unless `scale` is given) in
    the method's units below. The caption: method · target · time · metrics."""
    spec = get_scene_method(explanation.method)
    target_text = explanation.target.describe(classes)
    caption = f"{spec.label} · {target_text} · {seconds_text(explanation.seconds)}"
    if explanation.map is None:
        error = explanation.error or "no map"
        return SceneFigure(spec.id, spec.label, target_text, None, f"{caption} · {error}", None, None, error)
    values = np.asarray(explanation.map, dtype=np.float32)
    scale = scale or colour_scale(values, spec.units, spec.signed)
    factor = factor_for(values.shape, upscale)
    over = _enlarged(map_over_image(values, scale, image), factor)
    drawn = mark_targets(over, explanation.target, boxes, factor, classes)
    png = png_bytes(with_colour_bar(drawn, scale))
    if explanation.metrics:
        caption += " · " + ", ".join(f"{_metric_title(k)} {fmt_number(v)}" for k, v in explanation.metrics.items())
    return SceneFigure(spec.id, spec.label, target_text, png, caption, finite_range(values), scale)


def _metric_title(key: str) -> str:
    found = SCENE_METRICS.find(key)
    return found.title if found is not None else key


def boxes_png(
    image: Any, prediction: Detections | Segmentation, classes: tuple[str, ...], upscale: int | None = DEFAULT_UPSCALE
) -> bytes:
    """The predictions alone: each box in its class's colour with its class and score, or the predicted mask's
    classes blended over the image with a key below."""
    rgb = np.asarray(input_image(image), dtype=np.float32) / 255.0
    factor = factor_for(rgb.shape[:2], upscale)
    if isinstance(prediction, Segmentation):
        return png_bytes(_mask_picture(rgb, prediction, classes, factor))
    out = _enlarged(rgb, factor)
    draw = ImageDraw.Draw(out)
    font = label_font(12)
    for i in range(len(prediction)):
        label = int(prediction.labels[i])
        colour = PALETTE[(label - 1) % len(PALETTE)]
        x0, y0, x1, y1 = _box_xy(prediction.boxes[i].tolist(), factor)
        draw.rectangle((x0, y0, x1, y1), outline=colour, width=max(2, factor - 1))
        text = f"{i + 1} {class_name(classes, label)} {float(prediction.scores[i]):.2f}"
        w = draw.textlength(text, font=font)
        ty = y0 - 15 if y0 >= 15 else y1 + 1
        draw.rectangle((x0, ty, x0 + w + 4, ty + 14), fill=colour)
        draw.text((x0 + 2, ty), text, fill="white", font=font)
    return png_bytes(out)


def _mask_picture(rgb: np.ndarray, prediction: Segmentation, classes: tuple[str, ...], factor: int) -> Image.Image:
    mask = prediction.mask.numpy()
    colours = np.array([(0, 0, 0), *PALETTE], dtype=np.float32) / 255.0
    index = np.where(mask > 0, (mask - 1) % len(PALETTE) + 1, 0)
    weight = np.where(mask > 0, 0.55, 0.0)[..., None]
    img = _enlarged((1 - weight) * rgb + weight * colours[index], factor)
    present = prediction.classes_present()
    font = label_font(12)
    key = Image.new("RGB", (img.width, 18 * max(1, math.ceil(len(present) / 3))), "white")
    draw = ImageDraw.Draw(key)
    for j, label in enumerate(present):
        x, y = (j % 3) * (img.width // 3) + 2, (j // 3) * 18 + 2
        draw.rectangle((x, y + 2, x + 10, y + 12), fill=PALETTE[(label - 1) % len(PALETTE)])
        draw.text((x + 14, y), class_name(classes, label), fill="black", font=font)
    out = Image.new("RGB", (img.width, img.height + key.height + 4), "white")
    out.paste(img, (0, 0))
    out.paste(key, (0, img.height + 4))
    return out


def metrics_table_html(items: Sequence[SceneExplanation]) -> str:
    """One row per method, one column per metric any of them has (title, arrow, meaning as the tooltip)."""
    keys = [m.id for m in SCENE_METRICS.all() if any(m.id in e.metrics or m.id in e.metric_errors for e in items)]
    if not keys:
        return ""
    head: list[str | tuple[str, str]] = ["Method"]
    for k in keys:
        spec = SCENE_METRICS.get(k)
        head.append((f"{esc(spec.title)} {ARROWS.get(spec.better, '')}", spec.meaning))
    rows = []
    for e in items:
        cells = [f"<td>{esc(get_scene_method(e.method).label)}</td>"]
        for k in keys:
            if k in e.metrics:
                cells.append(f"<td>{esc(fmt_number(e.metrics[k]))}</td>")
            else:
                cells.append(f'<td class="muted" title="{esc(e.metric_errors.get(k, ""))}">–</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return table_html(head, rows, "metrics")


def card_html(fig: SceneFigure) -> str:
    """One map as an HTML card: its title, the map with its colour bar, its value range and caption."""
    title = f'<div class="title">{esc(fig.label)}</div>'
    if fig.png is None:
        return f'<div class="card error">{title}<div>{esc(fig.error or "no map")}</div></div>'
    lo, hi = fig.value_range or (0.0, 0.0)
    legend = f'<div class="legend">this map: {esc(tick_text(lo))} … {esc(tick_text(hi))}</div>'
    img = f'<img class="map" alt="{esc(fig.label)} map of {esc(fig.target_text)} with its colour bar" '
    return (
        f'<figure class="card" style="margin:0">{title}{img}src="{data_uri(fig.png)}">{legend}'
        f'<div class="small muted">{esc(fig.caption)}</div></figure>'
    )


def scene_report_html(
    image: Any,
    explanations: Sequence[SceneExplanation],
    prediction: Detections | Segmentation | None,
    classes: tuple[str, ...],
    *,
    title: str = "Scene explanations",
    subtitle: str = "",
    min_score: float = DEFAULT_MIN_SCORE,
) -> str:
    """One self-contained HTML page of a session (inline CSS and PNGs as data: URIs, no scripts, every text from
    a user or a file escaped): the predictions, then per explained box or region each method's map with the target
    marked and its colour bar, and the metrics table. Detections under `min_score` are left out of the pictures
    (an explained box is drawn whatever its score)."""
    boxes = prediction.above(min_score) if isinstance(prediction, Detections) else None
    shown_prediction = boxes if boxes is not None else prediction
    # One section per target, told apart by what it is (its words name box, class, corners or region and size):
    # a page's cached maps carry equal targets that are not the same object.
    groups: dict[str, list[SceneExplanation]] = {}
    for e in explanations:
        groups.setdefault(e.target.describe(classes), []).append(e)
    shown = data_uri(
        boxes_png(image, shown_prediction, classes) if shown_prediction is not None else png_bytes(input_image(image))
    )
    which = f"detections scoring at least {min_score:g}" if boxes is not None else "the predicted mask"
    sections = [
        f'<section><h2>Predictions</h2><img class="input-img" style="width:288px" alt="the predictions" '
        f'src="{shown}"><div class="small muted">{esc(which)}</div></section>'
    ]
    for words, items in groups.items():
        cards = "".join(card_html(scene_figure(image, e, boxes, classes)) for e in items)
        sections.append(
            f'<section><h2>{esc(words)}</h2><div class="maps">{cards}</div>{metrics_table_html(items)}</section>'
        )
    return document_html(title, subtitle, REPORT_NOTE, sections)


REPORT_NOTE = (
    "CAM maps (never negative): dark to bright from 0; signed maps: blue/white/red around 0. Each map has its own "
    "colour scale, written under it. The explained box is drawn solid green, the other detections faint."
)


def document_html(title: str, subtitle: str, note: str, sections: Sequence[str]) -> str:
    """The report's page around its sections: inline CSS, the title and subtitle escaped, no scripts."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<header><div class="inner"><h1>{esc(title)}</h1><div class="muted">{esc(subtitle)}</div></div></header>'
        f'<main><p class="muted small">{esc(note)}</p>{"".join(sections)}</main>'
        '<footer class="small muted">xaidash scene report.</footer></body></html>\n'
    )
