"""Attention: every layer x head for one input, one head large, the mean over heads per layer,
attention rollout, and (text) a bertviz-style head view and model view."""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.head_view import attention_views_html
from xaidash.dashboard.components.inputs import PickedInput, input_picker
from xaidash.dashboard.components.inspect_charts import (
    GRID_ROWS_LIMIT,
    attention_grid_chart,
    attention_grid_figure,
    matrix_chart,
)
from xaidash.dashboard.errors import guard
from xaidash.dashboard.state import require_bundle
from xaidash.explainers.inspection.attention import has_attention
from xaidash.explainers.inspection.attention_view import AttentionView, attention_view
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
    truth = f" · true class {bundle.info.classes[item.label]}" if item.label is not None else ""
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
        st.caption(
            "Token colours: the attention the prediction reads — from [CLS] where the model has one, else the "
            "mean over the tokens (text_transformer pools the mean of its tokens)."
        )


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
        rolled = view.rollout()
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


def main() -> None:
    header()
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
