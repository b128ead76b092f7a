"""The logit lens (explainers/language/logit_lens.py): the residual stream after every layer decoded through the
final norm and the unembedding, drawn as a grid of layers x positions, each cell the top token written in it and
coloured by its probability (with the colour bar), a window of positions at a time."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard.components.generate_answer import shown_token
from xaidash.dashboard.components.generate_compute import LMContext, logit_lens_of
from xaidash.dashboard.errors import guard
from xaidash.explainers.language.logit_lens import LogitLens
from xaidash.models.language.prompt import Prompt

WINDOW = 12  # positions drawn at once (a cell must be wide enough to write its token)
CELL_W = 62
CELL_H = 17
LABEL_CHARS = 9  # a cell's token is cut to this many characters (the tooltip has it whole)
PAD = alt.AutoSizeParams(type="pad", contains="padding")


def _cut(text: str, n: int = LABEL_CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def lens_frame(
    top: Sequence[Sequence[str]], probs: np.ndarray, layers: Sequence[str], inputs: Sequence[str], first: int
) -> pd.DataFrame:
    """Long table of the grid: one row per (layer, position) with the top token, its probability and the input
    token at that position. `first`: the position of the window's first column."""
    rows = []
    for i, layer in enumerate(layers):
        for j in range(probs.shape[1]):
            pos = first + j
            token = shown_token(top[i][j])
            rows.append(
                {
                    "layer": layer,
                    "order": i,
                    "position": f"{pos} {_cut(shown_token(inputs[j]), 12)}",
                    "pos": pos,
                    "input": shown_token(inputs[j]),
                    "top": token,
                    "label": _cut(token),
                    "probability": float(probs[i, j]),
                }
            )
    return pd.DataFrame(rows)


def lens_chart(frame: pd.DataFrame, n_layers: int, n_positions: int) -> alt.LayerChart:
    """Layers up the side (the last, the model's own prediction, on top), positions across; each cell written with
    its top token, coloured by its probability on one 0-1 scale."""
    layer_order = list(dict.fromkeys(frame.sort_values("order", ascending=False)["layer"]))
    position_order = list(dict.fromkeys(frame.sort_values("pos")["position"]))
    x = alt.X(
        "position:N",
        sort=position_order,
        title="input position (the token read there)",
        axis=alt.Axis(labelAngle=-40, labelLimit=110, orient="top", labelOverlap=False, labelFontSize=11),
    )
    y = alt.Y("layer:N", sort=layer_order, title=None, axis=alt.Axis(labelLimit=90, labelOverlap=False))
    base = alt.Chart(frame).encode(x=x, y=y)
    cells = base.mark_rect(stroke="white", strokeWidth=0.5).encode(
        color=alt.Color(
            "probability:Q",
            scale=alt.Scale(scheme="blues", domain=[0, 1]),
            legend=alt.Legend(
                title=["probability of", "the top token"], format=".0%", gradientLength=max(120, n_layers * CELL_H // 2)
            ),
        ),
        tooltip=[
            alt.Tooltip("layer:N", title="after layer"),
            alt.Tooltip("pos:Q", title="position"),
            alt.Tooltip("input:N", title="reads"),
            alt.Tooltip("top:N", title="top next token"),
            alt.Tooltip("probability:Q", format=".1%"),
        ],
    )
    text = base.mark_text(fontSize=10, font="monospace").encode(
        text="label:N",
        color=alt.condition("datum.probability > 0.55", alt.value("white"), alt.value("black")),
    )
    return (cells + text).properties(width=CELL_W * n_positions, height=CELL_H * n_layers, autosize=PAD)


def pick_window(total: int, prompt_len: int, key: str) -> tuple[int, int]:
    """Positions [start, stop) to draw: by default the end of the prompt and the answer's first tokens."""
    if total <= WINDOW:
        return 0, total
    stop = min(total, prompt_len + 6)
    start = max(0, stop - WINDOW)
    first = st.slider(
        "First position shown",
        0,
        total - WINDOW,
        start,
        key=key,
        help=f"{WINDOW} positions are drawn at a time, so every cell can show its token",
    )
    return int(first), int(first) + WINDOW


def logit_lens_section(ctx: LMContext, ids: tuple[int, ...], prompt: Prompt, key: str) -> None:
    """The logit lens over `ids` (a prompt, then maybe its answer)."""
    st.markdown("**Logit lens**")
    st.caption(
        "What the model would predict next if it stopped after each layer: the residual stream after the layer, "
        "decoded through the final norm and the unembedding (nostalgebraist, 2020). Read a column upwards to see "
        "when the final prediction appears; the top row is the model's own output."
    )
    with guard("Logit lens"):
        lens = logit_lens_of(ctx, ids)
        top, probs, layers = lens_arrays(lens)
        start, stop = pick_window(probs.shape[1], len(prompt), f"{key}_window")
        inputs = ctx.lm.token_text(list(ids[start:stop]))
        frame = lens_frame([row[start:stop] for row in top], probs[:, start:stop], layers, inputs, start)
        st.altair_chart(lens_chart(frame, len(layers), stop - start), width="content")


def lens_arrays(lens: LogitLens) -> tuple[list[list[str]], np.ndarray, list[str]]:
    """(top token texts (rows, positions), their probabilities, one label per row) of a `LogitLens`."""
    return lens.top_grid(), np.asarray(lens.top_probs, np.float64)[..., 0], list(lens.layers)
