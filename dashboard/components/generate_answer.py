"""The answer: each generated token as a chip coloured by its probability (with the colour bar), and each step's top
alternatives as a table."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import streamlit as st

from xaidash.explainers.figures.html_parts import colorbar_html, hex_colour
from xaidash.explainers.figures.scales import ColourScale
from xaidash.models.language.generate import Generation

PROB_CMAP = "Blues"  # white (improbable) to dark blue (certain): the chips' text stays readable either way
PROB_LABEL = "probability of the generated token at its step"
ORDINALS = ("1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th", "9th", "10th")


def shown_token(token: str) -> str:
    """A token as a chip shows it: line breaks and tabs as visible marks, a token of spaces alone as ␣ (a word's
    leading space is kept), an empty token as ∅."""
    text = token.replace("\r", "").replace("\n", "↵").replace("\t", "⇥")
    if text and not text.strip():
        return text.replace(" ", "␣")
    return text if text else "∅"


def chip(token: str, prob: float, rgb: np.ndarray, title: str, marked: bool = False) -> str:
    luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    fg = "#000" if luminance > 0.5 else "#fff"
    border = "2px solid #f0a000" if marked else "1px solid #9aa"
    return (
        f'<span title="{html.escape(title, quote=True)}" style="white-space:pre;display:inline-block;margin:2px 1px;'
        f"padding:1px 4px;border-radius:4px;border:{border};background:{hex_colour(rgb)};color:{fg};"
        f'font-size:15px;font-family:monospace">{html.escape(shown_token(token))}</span>'
    )


def chips_html(generation: Generation, marked: tuple[int, int] | None = None) -> str:
    """The answer's tokens as chips on the probability scale, with its colour bar below; steps in `marked` [start,
    stop) are outlined (the explained span)."""
    scale = ColourScale(0.0, 1.0, PROB_LABEL, cmap=PROB_CMAP)
    probs = np.array([s.prob for s in generation.steps], np.float64)
    colours = scale.colours(probs) if len(probs) else np.zeros((0, 3))
    parts = []
    for k, (step, rgb) in enumerate(zip(generation.steps, colours, strict=True)):
        alts = ", ".join(f"{t!r} {p:.1%}" for t, _, p in step.alternatives)
        title = f"step {k}: {step.token!r}, p = {step.prob:.1%}; top: {alts}"
        on = marked is not None and marked[0] <= k < marked[1]
        parts.append(chip(step.token, step.prob, rgb, title, on))
    bar = colorbar_html(False, 1.0, PROB_LABEL, "", cmap=PROB_CMAP)
    return f'<div style="line-height:2.1">{"".join(parts)}</div><div style="max-width:420px">{bar}</div>'


def answer_line(generation: Generation) -> str:
    how = (
        f"sampled at temperature {generation.temperature:g}, seed {generation.seed}" if generation.sample else "greedy"
    )
    n = len(generation.steps)
    return f"{n} token{'s' if n != 1 else ''} in {generation.seconds:.1f} s · {how} · stopped at {generation.stopped}"


def alternatives_table(generation: Generation) -> pd.DataFrame:
    """One row per step: the generated token, its probability, and the top alternatives with theirs."""
    rows = []
    for k, step in enumerate(generation.steps):
        row: dict[str, object] = {"step": k, "token": repr(step.token), "probability": step.prob}
        for i, (text, _, p) in enumerate(step.alternatives[: len(ORDINALS)]):
            row[ORDINALS[i]] = f"{text!r} {p:.1%}"
        rows.append(row)
    return pd.DataFrame(rows)


def answer_view(generation: Generation, marked: tuple[int, int] | None = None) -> None:
    """The answer as chips, its facts, and the alternatives table folded below."""
    st.markdown(chips_html(generation, marked), unsafe_allow_html=True)
    st.caption(answer_line(generation) + " · hover a token for its alternatives")
    with st.expander("Top alternatives at each step"):
        st.dataframe(
            alternatives_table(generation),
            hide_index=True,
            width="stretch",
            column_config={
                "probability": st.column_config.ProgressColumn(
                    "probability", min_value=0.0, max_value=1.0, format="percent"
                )
            },
        )
