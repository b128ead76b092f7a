"""The Embeddings page for a graph model (a data set with graph facts): the node embeddings of one message-passing
layer at a time, projected to 2-D (the page's PCA, t-SNE or UMAP) and coloured by class or by ground-truth motif
membership, and how the spread of the embeddings shrinks from layer to layer (over-smoothing). The layers are what
the model's `embed(x, edge_index)` returns (explainers/inspection/graph_layers.py), not hooked modules: a graph
batch holds every node of its graphs, not one row per sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.embedding_map import (
    INTERACTIVE_MAX,
    density_frame,
    interactive_rows,
    map_chart,
    projection_choice,
)
from xaidash.dashboard.components.inputs import OPEN_SAMPLE_PARAM
from xaidash.dashboard.components.params import param_widget
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.nav import page_path
from xaidash.data.registry import DatasetInfo, Split
from xaidash.explainers.inspection.graph_layers import ENERGY, SPREAD, GraphLayers, graph_layers
from xaidash.explainers.inspection.projection import LABELS, PARAMS, Projection, project
from xaidash.explainers.params import MAX_TEXT_CHARS
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.activations import CACHE_FOLDER, sample_indices

EXPLAIN_PAGE = page_path("explain")
SOURCES = {"test": "Test split", "test+train": "Test + training splits"}
MOTIF = {True: "in the motif", False: "outside it"}
TEXT_TIP = 160


@dataclass
class GraphPoints:
    """The layers read for the chosen samples (the test part first), and each point's split."""

    layers: GraphLayers
    splits: np.ndarray
    measured: GraphLayers  # the test part: the over-smoothing numbers are its graphs'


@st.cache_resource(show_spinner=False)
def _memory() -> services.LRUCache:
    """(run weights, source, N) -> GraphPoints and (.., layer, method, params) -> Projection, shared by sessions."""
    return services.LRUCache(16)


def _join(parts: list[GraphLayers]) -> GraphLayers:
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    motifs = [p.motif for p in parts]
    return GraphLayers(
        names=first.names,
        embeddings=[np.concatenate(layer) for layer in zip(*(p.embeddings for p in parts), strict=True)],
        samples=np.concatenate([p.samples for p in parts]),
        nodes=np.concatenate([p.nodes for p in parts]),
        labels=np.concatenate([p.labels for p in parts]),
        preds=np.concatenate([p.preds for p in parts]),
        motif=None if any(m is None for m in motifs) else np.concatenate([m for m in motifs if m is not None]),
        spread=first.spread,
        energy=first.energy,
    )


def read_points(bundle: ModelBundle, bundle_key: str, splits: dict[str, Split], n: int) -> GraphPoints:
    """The layers of `n` samples: the test split first (a seeded subset when n is smaller), then training samples."""

    def compute() -> GraphPoints:
        parts, names = [], []
        left = n
        for name, split in splits.items():
            take = min(left, len(split))
            if take <= 0:
                break
            parts.append(graph_layers(bundle, split, sample_indices(len(split), take).tolist()))
            names.append(np.full(len(parts[-1]), name))
            left -= take
        return GraphPoints(_join(parts), np.concatenate(names), parts[0])

    with st.spinner("Reading every message-passing layer…"):
        points, _ = _memory().get_or_compute((bundle_key, "graph-layers", tuple(splits), n), compute)
    return points


def sources(bundle: ModelBundle, where: Any) -> dict[str, Split]:
    """The splits the samples come from, as the radio in `where` says (the training split's error shown)."""
    source = where.radio("Samples from", list(SOURCES), format_func=SOURCES.get, key="gemb_source")
    out = {"test": services.dataset_split(bundle.info.name, "test")}
    if source == "test+train":
        try:
            out["train"] = services.dataset_split(bundle.info.name, "train")
        except Exception as e:  # noqa: BLE001 - say why and carry on with the test split
            show_error(e, "The training split")
    return out


def sample_count(bundle: ModelBundle, where: Any, splits: dict[str, Split]) -> int:
    total = sum(len(s) for s in splits.values())
    key = f"gemb_n_{'+'.join(splits)}"  # its own N per source: all of the test split, then all of both
    if st.session_state.get(key, 0) > total:  # chosen for another run's larger split
        st.session_state[key] = total
    node_task = bundle.info.graph is not None and bundle.info.graph.task == "node"
    what = "node" if node_task else bundle.adapter.sample
    return int(
        where.number_input(
            "Samples (N)",
            min_value=1,
            max_value=total,
            value=min(1000, total),
            key=key,
            help=f"Up to {total:,}: the test split first, then training samples. Each sample is a {what}; the map "
            "shows every node of a graph asked about, one point per node.",
        )
    )


def colour_choice(where: Any, layers: GraphLayers) -> str:
    options = ["true", "predicted", "correct"] + (["motif"] if layers.motif is not None else [])
    return str(
        where.radio(
            "Colour by",
            options,
            horizontal=True,
            key="gemb_colour",
            help="true or predicted class of the node's sample, whether the model is right, or whether the node lies in "
            "the ground-truth motif (the part of the graph that sets the label)",
        )
    )


def projection_of(bundle: ModelBundle, key: tuple, features: np.ndarray, method: str, params: dict) -> Projection:
    def compute() -> Projection:
        cache = bundle.run_dir / CACHE_FOLDER / "projections" if bundle.run_dir else None
        return project(features, method, cache_dir=cache, name=f"graph-{key[2]}-n{len(features)}", **params)

    with st.spinner(f"{LABELS[method]} of {len(features):,} node embeddings…"):
        proj, _ = _memory().get_or_compute((*key, method, tuple(sorted(params.items()))), compute)
    return proj


def points_frame(proj: Projection, points: GraphPoints, info: DatasetInfo, splits: dict[str, Split]) -> pd.DataFrame:
    layers = points.layers
    classes = info.classes
    frame = pd.DataFrame(
        {
            "x": proj.coords[:, 0],
            "y": proj.coords[:, 1],
            "point": np.arange(len(layers)),
            "split": points.splits,
            "index": layers.samples,
            "node": layers.nodes,
            "true": [classes[i] for i in layers.labels],
            "predicted": [classes[i] for i in layers.preds],
            "correct": np.where(layers.labels == layers.preds, "correct", "wrong"),
        }
    )
    if layers.motif is not None:
        frame["motif"] = [MOTIF[bool(m)] for m in layers.motif]
    return frame


def add_text(frame: pd.DataFrame, bundle: ModelBundle, splits: dict[str, Split]) -> None:
    """Each drawn point's sample in a line (the adapter's words), for its tooltip."""
    adapter, info = bundle.adapter, bundle.info
    frame["text"] = [
        adapter.one_line(adapter.item(splits[str(s)], int(i)), info, TEXT_TIP)
        for s, i in zip(frame["split"], frame["index"], strict=True)
    ]


def legend_order(colour: str, bundle: ModelBundle) -> list[str] | None:
    """The legend in the data set's class order (or the motif first), not by name."""
    if colour == "motif":
        return list(MOTIF.values())
    return list(bundle.info.classes) if colour in ("true", "predicted") else None


def tooltips(frame: pd.DataFrame) -> list[Any]:
    tips: list[Any] = ["node:Q", "true:N", "predicted:N"]
    if "motif" in frame.columns:
        tips.append("motif:N")
    if frame["split"].nunique() > 1:
        tips.insert(0, "split:N")
    return [*tips, alt.Tooltip("index:Q", title="sample"), alt.Tooltip("text:N", title="input")]


def smoothing_chart(layers: GraphLayers) -> alt.Chart:
    """The two over-smoothing measures per layer, side by side, each on its own axis from 0."""
    rows = [
        {"layer": k + 1, "measure": measure, "value": float(v)}
        for measure, values in ((SPREAD, layers.spread), (ENERGY, layers.energy))
        for k, v in enumerate(values)
    ]
    base = alt.Chart(pd.DataFrame(rows)).encode(
        x=alt.X("layer:O", title="message-passing layer", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=True)),
        tooltip=["measure:N", "layer:O", alt.Tooltip("value:Q", format=".4f")],
    )
    return (
        (base.mark_line(color="#4c78a8") + base.mark_point(color="#4c78a8", filled=True, size=60))
        .properties(width=420, height=220)
        .facet(column=alt.Column("measure:N", title=None, sort=[SPREAD, ENERGY]))
        .resolve_scale(y="independent")
    )


def smoothing_section(points: GraphPoints, info: DatasetInfo) -> None:
    layers = points.measured
    st.subheader("Over-smoothing: how alike the nodes become, layer by layer")
    where = "the whole graph" if info.graph is not None and info.graph.task == "node" else "every test graph read"
    st.altair_chart(smoothing_chart(layers), width="content")
    depth = len(layers.spread)
    st.caption(
        f"Both over every node of {where}, layer by layer, free of each layer's scale. **Spread**: the mean squared "
        "distance between two nodes' embeddings over twice their mean squared length (0: every node has the same "
        "embedding); distances rather than angles, since nodes that all start with the same features keep nearly "
        "one direction and differ in length. **Dirichlet energy**: how much neighbours still differ, tr(Hᵀ Δ H) / "
        "tr(Hᵀ H) with Δ the GCN's normalised Laplacian (self-loops added; Cai and Wang 2020); 0 where repeated "
        "neighbourhood averaging converges. Both falling layer after layer is over-smoothing. Here the spread "
        f"{_went(layers.spread)} and the energy {_went(layers.energy)} from layer 1 to layer {depth}."
    )


def _went(values: list[float]) -> str:
    """'falls from 0.696 to 0.099', 'rises from …', or 'stays at …'."""
    first, last = values[0], values[-1]
    if f"{first:.3g}" == f"{last:.3g}":
        return f"stays at {first:.3g}"
    return f"{'falls' if last < first else 'rises'} from {first:.3g} to {last:.3g}"


def selected_point(event: Any, frame: pd.DataFrame, bundle: ModelBundle, splits: dict[str, Split]) -> None:
    """The clicked node: its sample in a line, classes and motif, and (test samples) a button to explain it."""
    picked = (event.selection.get("pick") or []) if event and event.selection else []
    if not (picked and 0 <= int(picked[0].get("point", -1)) < len(frame)):
        return
    row = frame.iloc[int(picked[0]["point"])]
    split_name, index = str(row["split"]), int(row["index"])
    adapter = bundle.adapter
    st.subheader(f"{'Test' if split_name == 'test' else 'Training'} sample #{index}, node {int(row['node'])}")
    st.write(adapter.one_line(adapter.item(splits[split_name], index), bundle.info, MAX_TEXT_CHARS))
    motif = f"; {row['motif']}" if "motif" in frame.columns else ""
    st.markdown(f"true **{row['true']}**, predicted **{row['predicted']}**{motif}")
    if split_name != "test":
        st.caption("The Explain page lists the test split: training samples are shown here only.")
    elif st.button("Open on the Explain page", key="gemb_open", icon=":material/image_search:"):
        st.switch_page(EXPLAIN_PAGE, query_params={OPEN_SAMPLE_PARAM: f"test:{index}"})


def graph_embeddings(bundle: ModelBundle, bundle_key: str) -> None:
    """The page's graph view: controls, the map of one layer's node embeddings, the over-smoothing chart."""
    st.caption(
        "A graph model: every node's embedding after each message-passing layer (the model's own layers, input to "
        "output), one point per node, and below the map how alike the nodes become with depth."
    )
    c0, c1, c2, c3 = st.columns([2, 2, 3, 2])
    splits = sources(bundle, c0)
    n = sample_count(bundle, c1, splits)
    try:
        points = read_points(bundle, bundle_key, splits, n)
    except Exception as e:  # noqa: BLE001 - one sentence, the page stops
        show_error(e, "The layers' embeddings")
        return
    layers = points.layers
    layer = int(
        c2.selectbox("Layer", range(len(layers.names)), format_func=lambda k: layers.names[k], key="gemb_layer")
    )
    method = projection_choice(c3, "gemb_method")
    pcols = st.columns([1.0] * len(PARAMS[method]) + [1.6])  # the colouring: four or five choices in a row
    params = {}
    for param, col in zip(PARAMS[method], pcols, strict=False):  # one column more than parameters
        with col:
            params[param.name] = param_widget(param, key=f"gemb_{method}_{param.name}")
    colour = colour_choice(pcols[-1], layers)
    try:
        proj = projection_of(bundle, (bundle_key, tuple(splits), layer, n), layers.embeddings[layer], method, params)
    except Exception as e:  # noqa: BLE001 - one sentence, the page stops
        show_error(e, LABELS[method])
        return
    frame = points_frame(proj, points, bundle.info, splits)
    density = density_frame(frame, colour) if len(frame) > INTERACTIVE_MAX else None
    drawn = frame.iloc[interactive_rows(len(frame))].reset_index(drop=True)
    add_text(drawn, bundle, splits)
    per_sample = frame.drop_duplicates(["split", "index"])  # a graph's nodes count once
    accuracy = float((per_sample["correct"] == "correct").mean())
    title = (
        f"{LABELS[method]} of {layers.names[layer]} · {len(frame):,} nodes of {n:,} samples · accuracy {accuracy:.1%}"
    )
    alt.data_transformers.disable_max_rows()
    event = st.altair_chart(
        map_chart(
            drawn, colour, title, proj.axis_labels(), None, density, tooltips(drawn), legend_order(colour, bundle)
        ),
        on_select="rerun",
        selection_mode="pick",
        key=f"gemb_chart_{layer}_{n}_{method}",
    )
    st.caption(
        "One point per node, its embedding after this layer's message passing. Hover a node for its sample, click to "
        "select it, drag to pan, scroll to zoom, double-click to clear."
    )
    selected_point(event, frame, bundle, splits)
    smoothing_section(points, bundle.info)
