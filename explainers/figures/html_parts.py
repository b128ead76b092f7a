"""A map's pieces as HTML: the one escape helper, the colour bar (legend) under a map, and highlighted words.

Shared by the dashboard, the explain report (explainers/figures/html_report.py) and the prompt report
(explainers/language/figures.py). Every text is HTML-escaped, so a word such as '<script>' is shown, never run.
A strip of coloured words is drawn through `scaled_tokens_html`, which always adds its scale's colour bar.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from xaidash.explainers.figures.scales import ColourScale, as_array, colorize, tick_text
from xaidash.explainers.params import ExplainError

TOKEN_BAR_MAX_PX = 420  # the colour bar under highlighted words: a readable ramp, not the column's whole width


def esc(value: Any) -> str:
    """`value` as text that HTML shows as it is (quotes escaped too, so it is safe inside attributes)."""
    return html.escape(str(value), quote=True)


def hex_colour(rgb: Sequence[float] | np.ndarray) -> str:
    """RGB floats in [0, 1] as '#rrggbb'."""
    r, g, b = (round(float(c) * 255) for c in rgb[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


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
    ramp = ", ".join(hex_colour(c) for c in colours)
    hi_text, lo_text = tick_text(s), tick_text(lo)
    if low is not None and not signed:  # an unsigned ramp from `low` (darkest) to `low + scale`
        hi_text, lo_text = tick_text(low + s), tick_text(low)
    if clipped:
        hi_text, lo_text = "≥ " + hi_text, ("≤ " + lo_text) if signed else lo_text
    ticks = [lo_text, "0", hi_text] if signed else [lo_text, hi_text]
    tick_html = "".join(f"<span>{esc(t)}</span>" for t in ticks)
    lines = []
    if units:
        lines.append(f"<b>{esc(units)}</b>")
    if value_range is not None:
        a, b = value_range
        lines.append(f"this map: {esc(tick_text(float(a)))} … {esc(tick_text(float(b)))}")
    first = " · ".join(lines)
    out = [
        '<div class="xai-cbar" style="font-family:sans-serif;font-size:13px;line-height:1.35;margin:2px 0 6px 0">',
        f'<div style="height:14px;border:1px solid #999;border-radius:2px;background:linear-gradient(to right, {ramp})"></div>',
        f'<div style="display:flex;justify-content:space-between;font-variant-numeric:tabular-nums">{tick_html}</div>',
    ]
    if first:
        out.append(f"<div>{first}</div>")
    if note:
        out.append(f'<div style="color:#555">{esc(note)}</div>')
    if meaning:
        out.append(f'<div style="color:#555">{esc(meaning)}</div>')
    out.append("</div>")
    return "".join(out)


def scale_html(scale: ColourScale, note: str = "") -> str:
    """The colour bar of `scale` (its label as the units), no wider than a readable ramp."""
    bar = colorbar_html(
        scale.signed,
        scale.span,
        scale.label,
        cmap=scale.cmap,
        clipped=scale.clipped,
        note=note,
        low=None if scale.signed else scale.low,
    )
    return f'<div style="max-width:{TOKEN_BAR_MAX_PX}px">{bar}</div>'


def _scores(words: Sequence[str], scores: Any) -> np.ndarray:
    s = as_array(scores).astype(np.float64).reshape(-1)
    if len(words) != len(s):
        raise ExplainError(f"Got {len(words)} words but {len(s)} scores.")
    return s


def scaled_tokens_html(words: Sequence[str], scores: Any, scale: ColourScale, note: str = "") -> str:
    """Highlighted words (`highlight_tokens`' spans, coloured by `scale`) followed by the scale's colour bar
    and label, as one HTML block."""
    s = _scores(words, scores)
    strip = _token_spans(words, s, scale.colours(s) if len(s) else np.zeros((0, 3)))
    return f'<div class="xai-scaled">{strip}{scale_html(scale, note)}</div>'


def highlight_tokens(
    words: Sequence[str],
    scores: Sequence[float] | np.ndarray,
    scale: float | None = None,
    signed: bool = True,
    cmap: str | None = None,
) -> str:
    """HTML: one <span> per word, background coloured by its score, the exact value as a tooltip.
    Words are HTML-escaped, so text such as '<script>' is shown, never run."""
    s = _scores(words, scores)
    colours = colorize(s, signed, scale, cmap) if len(s) else np.zeros((0, 3))
    return _token_spans(words, s, colours)


def _token_spans(words: Sequence[str], s: np.ndarray, colours: np.ndarray) -> str:
    """One <span> per word on its colour (black or white text by luminance), the value as a tooltip."""
    spans = []
    for word, value, rgb in zip(words, s, colours, strict=True):
        luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
        fg = "#000000" if luminance > 0.5 else "#ffffff"
        spans.append(
            f'<span style="background-color:{hex_colour(rgb)};color:{fg};padding:1px 3px;margin:1px;'
            f'border-radius:3px;display:inline-block" title="{esc(f"{value:.4g}")}">'
            f"{esc(word)}</span>"
        )
    return '<div class="xai-tokens" style="line-height:1.9;font-family:sans-serif">' + " ".join(spans) + "</div>"
