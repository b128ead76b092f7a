"""Embeddings: a layer's activations for many test samples, projected to 2-D (UMAP, t-SNE, PCA),
as an interactive scatter plot; click a point to open it on the Explain page; place your own input."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.inputs import OPEN_SAMPLE_PARAM, input_picker, stop_without_dataset
from xaidash.dashboard.components.inspect_charts import scatter_chart, thumbnail_url
from xaidash.dashboard.components.params import param_widget
from xaidash.dashboard.errors import guard, show_error
from xaidash.dashboard.state import require_bundle
from xaidash.data.registry import ImageSplit
from xaidash.explainers.projection import LABELS, METHODS, NO_TRANSFORM, PARAMS, Projection, project
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.activations import (
    CACHE_FOLDER,
    Activations,
    compute_activations,
    describe_layer,
    embedding_layers,
    input_activation,
)

EXPLAIN_PAGE = "views/explain.py"
TEXT_TIP = 160

alt.data_transformers.disable_max_rows()  # 10,000 points exceed altair's default 5,000-row guard

st.title("Embeddings")
st.caption(
    "How the model arranges the test samples inside: one layer's activations (the penultimate layer by default) "
    "projected to two dimensions. Samples the model finds similar land close together."
)

run, bundle = require_bundle("look inside")
stop_without_dataset(bundle, "the Embeddings page, which projects the test split,")
bundle_key = services.run_key(run)


@st.cache_resource(show_spinner=False)
def _memory() -> services.LRUCache:
    """(run weights, layer, N) -> Activations and (.., method, params) -> Projection, shared by sessions."""
    return services.LRUCache(32)


@st.cache_data(max_entries=4, show_spinner=False)
def _layer_names(key: str, _bundle: ModelBundle) -> dict[str, str]:
    return {layer: describe_layer(_bundle, layer) for layer in embedding_layers(_bundle)}


@st.cache_data(max_entries=8, show_spinner="Drawing thumbnails…")
def _thumbnails(dataset: str, indices: tuple[int, ...]) -> list[str]:
    split = services.image_split(dataset, "test")
    return [thumbnail_url(split.image(i)) for i in indices]


split = services.dataset_split(bundle.info.name, "test")
total = len(split)
names = _layer_names(bundle_key, bundle)
if st.session_state.get("emb_n", 0) > total:  # chosen for another run's larger test split
    st.session_state["emb_n"] = total
c1, c2, c3 = st.columns([3, 2, 2])
layer = c1.selectbox("Layer", list(names), format_func=lambda name: names[name], key="emb_layer")
n = int(
    c2.number_input(
        "Test samples (N)",
        min_value=min(10, total),
        max_value=total,
        value=min(1000, total),
        step=500 if total > 2000 else 100,
        key="emb_n",
        help=f"Up to the whole test split ({total}). Activations and maps are computed once and cached.",
    )
)
method = c3.selectbox(
    "Projection",
    list(METHODS),
    index=METHODS.index("pca"),
    format_func=lambda m: LABELS[m],
    key="emb_method",
    help="PCA: linear and instant, distances meaningful. UMAP: keeps neighbourhoods and much of the "
    "global layout. t-SNE: keeps neighbourhoods only.",
)
pcols = st.columns(max(1, len(PARAMS[method])) + 1)
params = {}
for col, param in zip(pcols, PARAMS[method], strict=False):  # one column more than parameters
    with col:
        params[param.name] = param_widget(param, bundle, key=f"emb_{method}_{param.name}")
colour = pcols[-1].radio("Colour by", ["true", "predicted", "correct"], horizontal=True, key="emb_colour")


# ---- activations (batched on the device, cached on disk under the run) ---------------------------------
def activations_for(layer: str, n: int) -> Activations:
    """The first `n` test samples' activations at `layer`: from memory, else the run's disk cache or computed."""
    key = (bundle_key, "acts", layer, n)
    cached: Activations | None = _memory().get(key)
    if cached is not None:
        return cached
    bar = st.progress(0.0, text=f"Activations of {names[layer]} for {n} samples…")
    try:
        acts, _ = _memory().get_or_compute(
            key,
            lambda: compute_activations(
                bundle,
                layer,
                n,
                "test",
                progress=lambda d, t: bar.progress(d / t, text=f"Activations: {d}/{t} samples"),
            ),
        )
    finally:
        bar.empty()
    return acts


try:
    acts = activations_for(layer, n)
except Exception as e:  # noqa: BLE001
    show_error(e, "Activations")
    st.stop()


# ---- projection (cached on disk per run, layer, method and parameters) ----------------------------------
def projection_of(acts: Activations, layer: str, n: int, method: str, params: dict[str, Any]) -> Projection:
    """The 2-D map of `acts` (layer `layer`, `n` samples) by `method`: from memory, else the run's disk
    cache or computed."""
    key = (bundle_key, "proj", layer, n, method, tuple(sorted(params.items())))
    cached: Projection | None = _memory().get(key)
    if cached is not None:
        return cached
    first = " (the first UMAP in a session compiles numba: about 20 s more)" if method == "umap" else ""
    with st.spinner(f"{LABELS[method]} of {len(acts)} points with {acts.features.shape[1]} features{first}…"):
        proj, _ = _memory().get_or_compute(
            key,
            lambda: project(
                acts.features,
                method,
                cache_dir=bundle.run_dir / CACHE_FOLDER / "projections" if bundle.run_dir else None,
                name=f"{layer}-n{len(acts)}",
                **params,
            ),
        )
    return proj


try:
    proj = projection_of(acts, layer, n, method, params)
except Exception as e:  # noqa: BLE001
    show_error(e, LABELS[method])
    st.stop()

classes = bundle.info.classes
df = pd.DataFrame(
    {
        "x": proj.coords[:, 0],
        "y": proj.coords[:, 1],
        "index": acts.indices,
        "true": [classes[i] for i in acts.labels],
        "predicted": [classes[i] for i in acts.preds],
        "correct": np.where(acts.labels == acts.preds, "correct", "wrong"),
    }
)
if isinstance(split, ImageSplit):
    df["image"] = _thumbnails(bundle.info.name, tuple(int(i) for i in acts.indices))
else:
    df["text"] = [t if len(t) <= TEXT_TIP else t[:TEXT_TIP] + "…" for t in (split.texts[int(i)] for i in acts.indices)]

# ---- your own inputs in the map ---------------------------------------------------------------------------
placed = None
with st.expander("Place your own input in the map"):
    if not proj.can_transform:
        st.info(NO_TRANSFORM, icon=":material/info:")
    else:
        # Uploads (or typed text) first: a test sample is already a point of the map.
        st.session_state.setdefault("emb_place_source", "Upload images" if bundle.modality == "image" else "Type text")
        inputs = input_picker(bundle, "emb_place", bundle_key=bundle_key, max_inputs=4)
        rows = []
        refit = (
            ""
            if proj.transform_ready or not inputs
            else (
                f" (UMAP's fit is not in memory since the map came from the disk cache: refitting it, about as long "
                f"as the map took, {proj.seconds:.0f} s)"
            )
        )
        with guard("Placing inputs"), st.spinner(f"Placing {len(inputs)} input(s){refit}…"):
            for p in inputs:
                feats = input_activation(bundle, p.raw, layer, acts.reduce)
                xy = proj.transform(feats)[0]
                pred = int(bundle.predict_proba([p.raw] if isinstance(p.raw, str) else p.raw)[0].argmax())
                rows.append({"x": float(xy[0]), "y": float(xy[1]), "name": f"{p.name} → {classes[pred]}"})
        if rows:
            placed = pd.DataFrame(rows)
            st.caption(f"{len(rows)} input(s) drawn as black diamonds ({LABELS[method]} transform).")

# ---- the map ------------------------------------------------------------------------------------------------
accuracy = float((acts.labels == acts.preds).mean())
title = f"{LABELS[method]} of {names[layer]} · {len(acts)} test samples · accuracy {accuracy:.1%}"
event = st.altair_chart(
    scatter_chart(df, colour, title, proj.axis_labels(), placed, point_size=14 if len(df) > 3000 else 24),
    on_select="rerun",
    selection_mode="pick",
    key=f"emb_chart_{layer}_{n}_{method}",
)
if proj.note:
    st.caption(f":warning: {proj.note}")
source = "read from cache" if acts.from_cache else "computed"
st.caption(
    f"Activations {source} ({acts.features.shape[1]} features per sample); "
    f"{LABELS[method]} {'read from cache' if proj.from_cache else f'computed in {proj.seconds:.1f} s'}. "
    "Hover a point for the sample, drag to pan, scroll to zoom, click to select, double-click to clear."
)

# ---- the selected sample -------------------------------------------------------------------------------------
picked = (event.selection.get("pick") or []) if event and event.selection else []
if picked:
    index = int(picked[0]["index"])
    pos = int(np.flatnonzero(acts.indices == index)[0])
    st.subheader(f"Test sample #{index}")
    left, right = st.columns([1, 3])
    if isinstance(split, ImageSplit):
        left.image(to_pil(split.image(index), 112), width=112)
    else:
        right.write(split.texts[index])
    right.markdown(f"true **{classes[acts.labels[pos]]}**, predicted **{classes[acts.preds[pos]]}**")
    if right.button("Open on the Explain page", key="emb_open", icon=":material/image_search:"):
        st.switch_page(EXPLAIN_PAGE, query_params={OPEN_SAMPLE_PARAM: f"test:{index}"})  # the picker reads it
