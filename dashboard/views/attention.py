"""Attention: every layer x head for one input, one head large, the mean over heads per layer,
attention rollout, and (text) a bertviz-style head view and model view. For a generative language model (picked
on this page or opened from Generate): the same over its prompt and answer, with the causal mask (a token attends
to itself and the tokens before it), and the logit lens."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.generate_inside import language_attention_input
from xaidash.dashboard.components.head_view import attention_views_html
from xaidash.dashboard.components.inputs import PickedInput, input_picker
from xaidash.dashboard.components.inspect_charts import (
    GRID_ROWS_LIMIT,
    attention_grid_chart,
    attention_grid_figure,
    matrix_chart,
)
from xaidash.dashboard.components.logit_lens_view import logit_lens_section
from xaidash.dashboard.errors import guard
from xaidash.dashboard.run_facts import run_kind
from xaidash.dashboard.state import require_bundle, selected_run
from xaidash.explainers.inspection.attention import has_attention
from xaidash.explainers.inspection.attention_view import AttentionView, attention_view
from xaidash.explainers.language.inside import HEAD_MEASURES, causal_rollout, head_grid
from xaidash.models.bundle import ModelBundle

MEAN = "mean over heads"


@st.cache_data(max_entries=16, show_spinner=False)
def _view(key: str, input_key: str, _bundle: ModelBundle, _raw) -> AttentionView:
    return attention_view(_bundle, _raw)


@st.cache_data(max_entries=16, show_spinner=False)
def _proba(key: str, input_key: str, _bundle: ModelBundle, _raw) -> np.ndarray:
    return _bundle.predict_proba([_raw] if isinstance(_raw, str) else _raw)[0].numpy()


def header() -> None:
    st.title("Attention")
    st.caption(
        "Where each token looks in every layer and head of a transformer. Attention shows how information is "
        "routed, not why the model decides: read it beside the attribution methods of the Explain page."
    )


def require_attention(bundle: ModelBundle) -> None:
    """The page stops, saying which models have attention, for a model without."""
    if not has_attention(bundle.model):
        st.info(
            f"{bundle.spec.name} has no attention to show: only transformer models with global attention do "
            "(vit_tiny on images; text_transformer and minilm on text; imported ViT, DeiT or BERT-like models). "
            "Swin's windowed attention is not one matrix over the whole input. Pick or train another model.",
            icon=":material/block:",
        )
        st.stop()


def pick_input(bundle: ModelBundle, bundle_key: str) -> PickedInput:
    """One input; the page stops until there is one."""
    picked = input_picker(bundle, "attention", bundle_key=bundle_key, max_inputs=1)
    if not picked:
        st.stop()
    return picked[0]


def prediction_line(bundle: ModelBundle, bundle_key: str, item: PickedInput, view: AttentionView) -> None:
    """The input's name, predicted (and true) class, and the size of its attention."""
    proba = _proba(bundle_key, item.key, bundle, item.raw)
    pred = int(proba.argmax())
    truth = f" · true class {bundle.info.classes[int(item.label)]}" if item.label is not None else ""
    st.markdown(
        f"**{item.name}**: predicted **{bundle.info.classes[pred]}** ({proba[pred]:.0%}){truth} · "
        f"{view.layers} layers x {view.heads} heads over {len(view.tokens)} tokens"
    )


def patch_overlay(
    view: AttentionView, raw: Any, patch_map: np.ndarray, what: str = "class-token attention weight", **drawing
):
    """The class token's attention over the patch grid, drawn as blocks over a grey copy of the image (as the
    Explain page's maps), with its colour bar: the more attention, the more opaque and brighter the colour.
    `drawing`: `AttentionView.patch_figure`'s font_size and say_stretched."""
    if view.grid is None:
        raise ValueError("patch_overlay draws a vision transformer's patch grid; this model has none.")
    return view.patch_figure(patch_map, what, image=raw, **drawing)


def image_pair() -> list:
    """Two columns for two maps side by side, narrow enough that neither is drawn wider than 40% of the page."""
    return st.columns([2, 2, 1])[:2]


def pick_grid_scale() -> bool:
    """Whether the grid's tiles share one colour scale."""
    scale = st.radio(
        "Colour scale of the tiles",
        ["per tile", "shared"],
        horizontal=True,
        key="attention_grid_scale",
        format_func=lambda v: {
            "per tile": "per tile: each tile divided by its own maximum (patterns of faint heads show)",
            "shared": "shared: the attention weights on one scale (strong heads stand out)",
        }[v],
    )
    return scale == "shared"


def grid_tiles(view: AttentionView) -> np.ndarray:
    """(layers, heads, ...) tiles: the patch maps (vision) or the token x token matrices (text), with a caption."""
    if view.grid is not None:
        tiles = np.stack(
            [[view.patch_map(view.matrix(layer, h)) for h in range(view.heads)] for layer in range(view.layers)]
        )
        st.caption(
            "Each tile: attention from the class token to every patch, laid out as the patch grid. Click a tile to "
            "see it large below. Overlays on the image (a grey copy, so the colours read the same on any object) "
            "stretch each map from its minimum (transparent) to its maximum (opaque); their colour bars give both."
        )
        return tiles
    st.caption("Each tile: the token x token matrix (rows attend to columns). Click a tile to see it large below.")
    return view.weights


def grid_chart(tiles: np.ndarray, shared: bool) -> None:
    """The interactive grid: a click on a tile moves the layer and head pickers below to it."""
    event = st.altair_chart(
        attention_grid_chart(tiles, "key", "query", scale="shared" if shared else "tile"),
        on_select="rerun",
        selection_mode="cell",
        key="attention_grid",
    )
    chosen = (event.selection.get("cell") or [None])[0] if event and event.selection else None
    if chosen is not None:
        marker = (int(chosen["layer"]), int(chosen["head"]))
        if st.session_state.get("attention_grid_applied") != marker:  # a new click moves the pickers below
            st.session_state["attention_grid_applied"] = marker
            st.session_state["attention_layer"] = marker[0]
            st.session_state["attention_head"] = marker[1]


def grid_image(tiles: np.ndarray, shared: bool) -> None:
    """The grid as one image with its colour bar, for too many tokens to draw interactively."""
    st.image(
        attention_grid_figure(tiles, shared=shared),
        caption="rows: layers, columns: heads (too many tokens for an interactive grid)",
    )


def grid_section(view: AttentionView) -> None:
    st.subheader("Every layer and head")
    shared = pick_grid_scale()
    tiles = grid_tiles(view)
    if tiles.size <= GRID_ROWS_LIMIT:
        grid_chart(tiles, shared)
    else:
        grid_image(tiles, shared)


def pick_head(view: AttentionView) -> tuple[int, int | None]:
    """The layer and the head (None: the mean over heads); choices kept from another model (more layers or
    heads) are brought back into range."""
    c1, c2 = st.columns(2)
    if st.session_state.get("attention_layer", 0) >= view.layers:
        st.session_state["attention_layer"] = view.layers - 1
    if st.session_state.get("attention_head", MEAN) not in (MEAN, *range(view.heads)):
        st.session_state["attention_head"] = MEAN
    layer = c1.selectbox("Layer", list(range(view.layers)), key="attention_layer")
    head = c2.selectbox(
        "Head", [MEAN, *range(view.heads)], key="attention_head", format_func=lambda h: h if h == MEAN else f"head {h}"
    )
    return layer, None if head == MEAN else int(head)


def head_maps(view: AttentionView, raw: Any, matrix: np.ndarray, name: str) -> None:
    """One head's weights: over the image and alone (vision), or as a matrix and coloured tokens (text)."""
    if view.grid is not None:
        left, right = image_pair()
        left.image(
            patch_overlay(view, raw, view.patch_map(matrix)),
            caption=f"{name}: class-token attention over the patches",
            width="stretch",
        )
        patches = view.patch_map(matrix)
        right.image(
            view.patch_figure(patches, "class-token attention weight", upscale=224),
            caption="the same weights alone",
            width="stretch",
        )
        with st.expander(f"All {len(view.tokens)} x {len(view.tokens)} token weights of {name}"):
            st.altair_chart(matrix_chart(matrix, view.tokens, name), width="content")
    else:
        st.altair_chart(matrix_chart(matrix, view.tokens, name), width="content")
        row = view.read_row(matrix)
        st.markdown(view.tokens_html(row, f"attention weight the prediction reads ({name})"), unsafe_allow_html=True)
        if is_causal(view):
            st.caption(
                "Causal mask: each token attends only to itself and the tokens before it (the matrix is empty above "
                "its diagonal). Token colours: the last token's row, what the next token is predicted from."
            )
        else:
            st.caption(
                "Token colours: the attention the prediction reads — from [CLS] where the model has one, else the "
                "mean over the tokens (text_transformer pools the mean of its tokens)."
            )


def is_causal(view: AttentionView) -> bool:
    """A decoder's view: the prediction reads the last token's row."""
    return view.grid is None and view.query == len(view.tokens) - 1 and len(view.tokens) > 1


def head_section(view: AttentionView, raw: Any) -> None:
    st.subheader("One head")
    layer, head = pick_head(view)
    matrix = view.matrix(layer, head)
    name = f"layer {layer}, {'mean over heads' if head is None else f'head {head}'}"
    with guard("Attention map"):
        head_maps(view, raw, matrix, name)


def layer_means_section(view: AttentionView, raw: Any) -> None:
    st.subheader("Mean over heads, per layer")
    if view.grid is not None:
        st.caption("Each layer's map stretched from its own minimum (transparent) to its maximum: its bar gives both.")
    with guard("Mean attention"):
        cols = st.columns(min(view.layers, 4))
        for layer in range(view.layers):
            m = view.matrix(layer)
            with cols[layer % len(cols)]:
                if view.grid is not None:
                    st.image(
                        patch_overlay(
                            view, raw, view.patch_map(m), "mean attention weight", font_size=22, say_stretched=False
                        ),
                        caption=f"layer {layer}",
                        width="stretch",
                    )
                else:
                    st.markdown(f"layer {layer}")
                    st.markdown(view.tokens_html(view.read_row(m), "mean attention weight"), unsafe_allow_html=True)


def rollout_section(view: AttentionView, raw: Any) -> None:
    st.subheader("Attention rollout")
    st.caption(
        "Abnar & Zuidema (2020): each layer's mean attention mixed with the identity for the residual "
        "connection, multiplied through all layers — how much each input token flows into the output."
    )
    with guard("Rollout"):
        rolled = causal_rollout(view.weights) if is_causal(view) else view.rollout()
        if view.grid is not None:
            left, right = image_pair()
            left.image(
                patch_overlay(view, raw, view.patch_map(rolled), "rollout weight"),
                caption="rollout from the class token",
                width="stretch",
            )
            right.image(
                patch_overlay(view, raw, view.patch_map(view.matrix(view.layers - 1)), "mean attention weight"),
                caption="last layer alone, for comparison",
                width="stretch",
            )
        else:
            st.markdown(view.tokens_html(view.read_row(rolled), "rollout weight"), unsafe_allow_html=True)
            st.altair_chart(matrix_chart(rolled, view.tokens, "rollout through all layers"), width="content")


def head_view_section(view: AttentionView) -> None:
    """Text: the bertviz-style head view and model view."""
    st.subheader("Head view")
    st.caption(
        "As in bertviz: each token on the left sends a line to every token it attends to on the right; one colour "
        "per head, opacity = the weight (one scale, 0 to 1, for every head). Toggle heads with their coloured "
        "squares, hover a token to isolate its links; below, the model view shows every layer x head the same way."
    )
    with guard("Head view"):  # opens on the last layer; its own menu picks another
        page, height = attention_views_html(view.weights, view.tokens, layer=view.layers - 1)
        # st.iframe replaces components.html (deprecated, its removal date passed); the page escapes every token.
        st.iframe(page, height=height)


def head_summary_chart(grid: np.ndarray, measure: tuple[str, ...]) -> alt.LayerChart:
    """(layers, heads) summaries as a heatmap with each value written in its cell; a click selects that head."""
    layers, heads = grid.shape
    frame = pd.DataFrame(
        [{"layer": i, "head": h, "value": float(grid[i, h])} for i in range(layers) for h in range(heads)]
    )
    pick = alt.selection_point(name="cell", fields=["layer", "head"], on="click", clear=False)
    base = alt.Chart(frame).encode(
        x=alt.X("head:O", title="head", axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("layer:O", title="layer", axis=alt.Axis(labelOverlap=False)),
    )
    cells = (
        base.mark_rect(stroke="white", strokeWidth=1)
        .encode(
            color=alt.Color(
                "value:Q",
                scale=alt.Scale(scheme="viridis", domain=[0, 1]),
                legend=alt.Legend(title=[*measure, "(0 to 1)"], gradientLength=max(160, layers * 10), format=".1f"),
            ),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.5)),
            tooltip=["layer:O", "head:O", alt.Tooltip("value:Q", format=".3f", title=" ".join(measure))],
        )
        .add_params(pick)
    )
    text = base.mark_text(fontSize=10).encode(
        text=alt.Text("value:Q", format=".2f"),
        color=alt.condition("datum.value > 0.6", alt.value("black"), alt.value("white")),
    )
    return (cells + text).properties(width=58 * heads, height=20 * layers)


MEASURE_NAMES = {  # the legend's title, in lines
    "entropy": ("spread of", "attention"),
    "first": ("attention to", "the first token"),
    "previous": ("attention to", "the previous token"),
    "self": ("attention to", "itself"),
}


def head_summary_section(view: AttentionView) -> None:
    """A decoder's layers x heads at a glance: one number per head (its T x T tiles would be too small to read)."""
    st.subheader("Every layer and head")
    measure = st.radio(
        "Each head summarised by",
        list(HEAD_MEASURES),
        horizontal=True,
        key="attention_head_measure",
        format_func=lambda m: " ".join(MEASURE_NAMES.get(m, (m,))),
    )
    st.caption(f"Each cell: {HEAD_MEASURES[measure]}. Click a cell to see that head below.")
    event = st.altair_chart(
        head_summary_chart(head_grid(view.weights, measure), MEASURE_NAMES.get(measure, (measure,))),
        on_select="rerun",
        selection_mode="cell",
        key="attention_head_grid",
    )
    chosen = (event.selection.get("cell") or [None])[0] if event and event.selection else None
    if chosen is not None:
        marker = (int(chosen["layer"]), int(chosen["head"]))
        if st.session_state.get("attention_grid_applied") != marker:
            st.session_state["attention_grid_applied"] = marker
            st.session_state["attention_layer"] = marker[0]
            st.session_state["attention_head"] = marker[1]
    with st.expander(f"Every head's {len(view.tokens)} x {len(view.tokens)} weights (one picture)"):
        grid_image(view.weights, pick_grid_scale())


def without_first(view: AttentionView) -> AttentionView:
    """The view with the first token's row and column left out (for display only)."""
    if len(view.tokens) < 3:
        return view
    query = None if view.query is None else view.query - 1
    return AttentionView(view.weights[:, :, 1:, 1:], view.tokens[1:], None, query)


def language_rollout_section(view: AttentionView, skip_first: bool) -> None:
    """Rollout through the causal mask, computed over every token; drawn without the first one when asked."""
    st.subheader("Attention rollout")
    st.caption(
        "Abnar & Zuidema (2020): each layer's mean attention mixed with the identity for the residual "
        "connection, multiplied through all layers (causal: nothing flows from a later token). Token colours: "
        "how much each token flows into the last one, which predicts the next token."
    )
    with guard("Rollout"):
        rolled = causal_rollout(view.weights)
        shown = view
        if skip_first and len(view.tokens) >= 3:
            rolled, shown = rolled[1:, 1:], without_first(view)
            st.caption(
                f"The first token is left out; it receives {causal_rollout(view.weights)[-1, 0]:.0%} of the last row."
            )
        st.markdown(shown.tokens_html(shown.read_row(rolled), "rollout weight"), unsafe_allow_html=True)
        st.altair_chart(matrix_chart(rolled, shown.tokens, "rollout through all layers"), width="content")


def language_main() -> None:
    """A generative language model's prompt (and answer): every layer and head, one head, rollout, the head view,
    and the logit lens."""
    picked = language_attention_input()
    view = picked.view
    st.markdown(
        f"**{picked.ctx.lm.name}**: {view.layers} layers x {view.heads} heads over {len(view.tokens)} tokens "
        f"({picked.prompt_tokens} of the prompt, {len(view.tokens) - picked.prompt_tokens} of the answer)"
    )
    head_summary_section(view)
    skip = st.toggle(
        "Leave out the first token below",
        value=True,
        key="attention_skip_first",
        help="most heads of a decoder park their attention on the first token (an 'attention sink': see 'attention "
        "to the first token' above); left out, the colours show how the rest is shared. The weights are not "
        "renormalised (a row's values add up to less than one), and positions are counted without it.",
    )
    shown = without_first(view) if skip else view
    head_section(shown, None)
    language_rollout_section(view, skip)
    head_view_section(shown)
    logit_lens_section(picked.ctx, picked.ids, picked.prompt, key="attention_lens")


def main() -> None:
    header()
    shown = selected_run("any")  # a language model when it was picked last (or opened from Generate)
    if shown is not None and run_kind(shown) == "language_model":
        language_main()
        return
    run, bundle = require_bundle("look inside")
    bundle_key = services.run_key(run)
    require_attention(bundle)
    item = pick_input(bundle, bundle_key)
    view = _view(bundle_key, item.key, bundle, item.raw)
    prediction_line(bundle, bundle_key, item, view)
    grid_section(view)
    head_section(view, item.raw)
    layer_means_section(view, item.raw)
    rollout_section(view, item.raw)
    if view.grid is None:
        head_view_section(view)


main()
