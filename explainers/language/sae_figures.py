"""An SAE feature's contexts as HTML: tokens on the colour of the feature's activation (one scale for all of a
feature's contexts, from 0 to its largest activation), the top token outlined, the exact value as a tooltip."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from xaidash.explainers.figures.html_parts import esc, hex_colour, scale_html
from xaidash.explainers.figures.scales import ColourScale, colorize

UNITS = "feature activation"


def activation_scale(max_value: float) -> ColourScale:
    return ColourScale(0.0, max(float(max_value), 1e-6), UNITS, cmap="Oranges")  # 0 white: text stays readable


def visible(token: str) -> str:
    """A token as it reads in a strip: newlines and tabs shown as symbols, a bare space as '␣'."""
    out = token.replace("\n", "↵").replace("\t", "⇥")
    return out if out.strip() else out.replace(" ", "␣") or "∅"


def context_html(words: Sequence[str], values: Sequence[float], focus: int, scale: ColourScale) -> str:
    """One context: each token coloured by its activation (grey where it was not harvested), `focus` outlined."""
    vals = np.array([0.0 if not math.isfinite(v) else v for v in values], dtype=np.float64)
    colours = colorize(vals, False, scale.span, scale.cmap) if len(vals) else np.zeros((0, 3))
    spans = []
    for i, (word, value, rgb) in enumerate(zip(words, values, colours, strict=True)):
        known = math.isfinite(value)
        bg = hex_colour(rgb) if known else "#eeeeee"
        luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2] if known else 1.0
        fg = "#000000" if luminance > 0.5 else "#ffffff"
        border = "2px solid #d62728" if i == focus else "1px solid transparent"
        tip = f"{value:.4g}" if known else "not harvested"
        spans.append(
            f'<span style="background-color:{bg};color:{fg};padding:0 2px;margin:0;border:{border};'
            f'border-radius:3px;white-space:pre" title="{esc(tip)}">{esc(visible(word))}</span>'
        )
    return (
        '<div class="xai-sae-context" style="line-height:1.9;font-family:monospace;font-size:13px;min-width:0">'
        + "<wbr>".join(spans)  # a long context wraps between tokens (a token is never cut)
        + "</div>"
    )


def contexts_html(rows: Sequence[tuple[Sequence[str], Sequence[float], int, float]], max_value: float) -> str:
    """A feature's top contexts (words, values, focus, top value) as one block, their colour bar after them."""
    scale = activation_scale(max_value)
    body = "".join(
        f'<div style="display:flex;gap:10px;align-items:baseline"><code style="min-width:4.5em;text-align:right">'
        f"{esc(f'{top:.3g}')}</code>{context_html(words, values, focus, scale)}</div>"
        for words, values, focus, top in rows
    )
    return f"<div>{body}{scale_html(scale, 'outlined: the token of each row’s activation; grey: a token not harvested')}</div>"
