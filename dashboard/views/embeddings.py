"""Embeddings: a layer's activations for many samples (the test split, optionally the training split too),
projected to 2-D (UMAP, t-SNE, PCA), as an interactive map; click a point to open it (test samples on the
Explain page); place your own input. Above `INTERACTIVE_MAX` samples the map draws every sample as binned
density and a seeded sample of them as points with tooltips (components/embedding_map.py). For a generative
language model: a text data set's sentences or tokens at one layer (components/lm_embeddings.py). For a graph model:
every message-passing layer's node embeddings and over-smoothing (components/graph_embeddings.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st
import torch

from xaidash.dashboard import services
from xaidash.dashboard.components.embedding_map import (
    INTERACTIVE_MAX,
    density_frame,
    interactive_rows,
    map_chart,
    projection_choice,
    value_bands,
)
from xaidash.dashboard.components.graph_embeddings import graph_embeddings
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.inputs import (
    OPEN_SAMPLE_PARAM,
    TEST_SET,
    input_picker,
    source_labels,
    stop_without_dataset,
)
from xaidash.dashboard.components.inspect_charts import thumbnail_url
from xaidash.dashboard.components.lm_embeddings import language_embeddings
from xaidash.dashboard.components.params import param_widget
from xaidash.dashboard.errors import guard, show_error
from xaidash.dashboard.nav import page_path
from xaidash.dashboard.run_facts import run_kind
from xaidash.dashboard.state import require_bundle, selected_run
from xaidash.data.formatting import r2_text
from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo, RegressionTarget, Split
from xaidash.explainers.inspection.projection import LABELS, NO_TRANSFORM, PARAMS, Projection, project
from xaidash.explainers.params import MAX_TEXT_CHARS
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.activations import (
    CACHE_FOLDER,
    Activations,
    compute_activations,
    describe_layer,
    embedding_layers,
    input_activation,
)

EXPLAIN_PAGE = page_path("explain")
TEXT_TIP = 160
SPLIT_LABELS = {"test": "Test split", "test+train": "Test + training splits"}


@dataclass
class Choice:
    """What the controls say: the training split (when chosen and loaded), layer, N, projection and its
    parameters, and the colouring."""

    train_split: Split | None
    layer: str
    n: int
    method: str
    params: dict[str, Any]
    colour: str


@dataclass
class Samples:
    """The activations of the test part and (when N exceeds the test split) the training part, concatenated."""

    parts: list[Activations]
    features: np.ndarray
    labels: np.ndarray
    preds: np.ndarray
    indices: np.ndarray
    splits: np.ndarray


@st.cache_resource(show_spinner=False)
def _memory() -> services.LRUCache:
    """(run weights, layer, N) -> Activations and (.., method, params) -> Projection, shared by sessions."""
    return services.LRUCache(32)


@st.cache_data(max_entries=4, show_spinner=False)
def _layer_names(key: str, _bundle: ModelBundle) -> dict[str, str]:
    return {layer: describe_layer(_bundle, layer) for layer in embedding_layers(_bundle)}


@st.cache_data(max_entries=8, show_spinner="Drawing thumbnails…")
def _thumbnails(dataset: str, split_name: str, indices: tuple[int, ...]) -> list[str]:
    data = services.image_split(dataset, split_name)
    return [thumbnail_url(data.image(i)) for i in indices]


def header() -> None:
    st.title("Embeddings")
    st.caption(
        "How the model arranges the data set's samples inside: one layer's activations (the penultimate layer by "
        "default) projected to two dimensions. Samples the model finds similar land close together."
    )


def training_split(bundle: ModelBundle, source: str) -> Split | None:
    """The training split when the samples come from it too; its error is shown and the test split carries on."""
    if source != "test+train":
        return None
    try:
        return services.dataset_split(bundle.info.name, "train")
    except Exception as e:  # noqa: BLE001 - say why and carry on with the test split
        show_error(e, "The training split")
        return None


def projection_params(bundle: ModelBundle, method: str) -> tuple[dict[str, Any], str]:
    """The projection's parameters and, in the column after them, the colouring."""
    pcols = st.columns(max(1, len(PARAMS[method])) + 1)
    params = {}
    for col, param in zip(pcols, PARAMS[method], strict=False):  # one column more than parameters
        with col:
            params[param.name] = param_widget(param, key=f"emb_{method}_{param.name}")
    third = "error" if bundle.regression is not None else "correct"  # a number: over- or under-predicted
    colour = pcols[-1].radio(
        "Colour by",
        ["true", "predicted", third],
        horizontal=True,
        key=f"emb_colour_{third}",
        help=None
        if bundle.regression is None
        else f"a fifth of the samples each: the quintiles of the true {bundle.regression.name}; 'predicted' uses "
        "the same bands; 'error': over- or under-predicted",
    )
    return params, colour


def controls(bundle: ModelBundle, split: Split, names: dict[str, str]) -> Choice:
    """The samples' source, layer, N, projection and its parameters, and the colouring."""
    c0, c1, c2, c3 = st.columns([2, 3, 2, 2])
    source = c0.radio(
        "Samples from",
        list(SPLIT_LABELS),
        format_func=SPLIT_LABELS.get,
        key="emb_source",
        help="The whole test split first; with the training split too, up to every sample of the data set "
        "(70,000 for MNIST).",
    )
    train_split = training_split(bundle, source)
    total = len(split) + (len(train_split) if train_split is not None else 0)
    if st.session_state.get("emb_n", 0) > total:  # chosen for another run's larger split
        st.session_state["emb_n"] = total
    layer = c1.selectbox("Layer", list(names), format_func=lambda name: names[name], key="emb_layer")
    n = int(
        c2.number_input(
            "Samples (N)",
            min_value=min(10, total),
            max_value=total,
            value=min(1000, total),
            step=500 if total <= 20000 else 5000,
            key="emb_n",
            help=f"Up to {total:,}: the test split ({len(split):,}) first, then training samples. Activations and "
            f"maps are computed once and cached. Above {INTERACTIVE_MAX:,} samples the map shows all of them as "
            f"density and {INTERACTIVE_MAX:,} of them as points.",
        )
    )
    method = projection_choice(c3, "emb_method")
    params, colour = projection_params(bundle, method)
    return Choice(train_split, layer, n, method, params, colour)


def activations_for(
    bundle: ModelBundle, bundle_key: str, layer: str, layer_name: str, n: int, split_name: str = "test"
) -> Activations:
    """`n` samples' activations at `layer` from `split_name` (all of it, or a seeded subset): from memory,
    else the run's disk cache or computed (batched on the device, cached on disk under the run)."""
    key = (bundle_key, "acts", layer, n, split_name)
    cached: Activations | None = _memory().get(key)
    if cached is not None:
        return cached
    bar = st.progress(0.0, text=f"Activations of {layer_name} for {n:,} {split_name} samples…")
    try:
        acts, _ = _memory().get_or_compute(
            key,
            lambda: compute_activations(
                bundle,
                layer,
                n,
                split_name,
                progress=lambda d, t: bar.progress(d / t, text=f"Activations: {d:,}/{t:,} {split_name} samples"),
                samples=services.dataset_split(bundle.info.name, split_name),
            ),
        )
    finally:
        bar.empty()
    return acts


def samples_of(bundle: ModelBundle, bundle_key: str, names: dict[str, str], split: Split, choice: Choice) -> Samples:
    """The N samples' activations: the test split first, then training samples; the page stops on an error."""
    layer, n = choice.layer, choice.n
    try:
        parts = [activations_for(bundle, bundle_key, layer, names[layer], min(n, len(split)), "test")]
        if n > len(split):
            parts.append(activations_for(bundle, bundle_key, layer, names[layer], n - len(split), "train"))
    except Exception as e:
        show_error(e, "Activations")
        st.stop()
        raise  # unreachable: st.stop() raises
    return Samples(
        parts,
        np.concatenate([a.features for a in parts]) if len(parts) > 1 else parts[0].features,
        np.concatenate([a.labels for a in parts]),
        np.concatenate([a.preds for a in parts]),
        np.concatenate([a.indices for a in parts]),
        np.concatenate([np.full(len(a), a.split) for a in parts]),
    )


def projection_of(
    bundle: ModelBundle, bundle_key: str, features: np.ndarray, layer: str, n: int, method: str, params: dict[str, Any]
) -> Projection:
    """The 2-D map of `features` (layer `layer`, `n` samples) by `method`: from memory, else the run's disk
    cache (per run, layer, method and parameters) or computed."""
    key = (bundle_key, "proj", layer, n, method, tuple(sorted(params.items())))
    cached: Projection | None = _memory().get(key)
    if cached is not None:
        return cached
    first = " (the first UMAP on this server may compile numba: about 10 s more)" if method == "umap" else ""
    with st.spinner(f"{LABELS[method]} of {len(features):,} points with {features.shape[1]} features{first}…"):
        proj, _ = _memory().get_or_compute(
            key,
            lambda: project(
                features,
                method,
                cache_dir=bundle.run_dir / CACHE_FOLDER / "projections" if bundle.run_dir else None,
                name=f"{layer}-n{len(features)}",
                **params,
            ),
        )
    return proj


def projection(bundle: ModelBundle, bundle_key: str, samples: Samples, choice: Choice) -> Projection:
    """The samples' projection; the page stops on an error."""
    try:
        return projection_of(bundle, bundle_key, samples.features, choice.layer, choice.n, choice.method, choice.params)
    except Exception as e:
        show_error(e, LABELS[choice.method])
        st.stop()
        raise  # unreachable: st.stop() raises


def samples_frame(proj: Projection, samples: Samples, classes: tuple[str, ...]) -> pd.DataFrame:
    """One row per sample: its place in the map, split, index, true and predicted class, and whether right."""
    labels, preds = samples.labels, samples.preds
    return pd.DataFrame(
        {
            "x": proj.coords[:, 0],
            "y": proj.coords[:, 1],
            "point": np.arange(len(samples.indices)),
            "split": samples.splits,
            "index": samples.indices,
            "true": [classes[i] for i in labels],
            "predicted": [classes[i] for i in preds],
            "correct": np.where(labels == preds, "correct", "wrong"),
        }
    )


def values_frame(proj: Projection, samples: Samples, target: RegressionTarget, values: np.ndarray) -> pd.DataFrame:
    """A number to predict: one row per sample with its true and predicted value's quintile band (of the true
    values shown) and whether it was over- or under-predicted, instead of classes."""
    truth = samples.labels.astype(np.float64)
    edges, names = value_bands(truth, target)
    band = np.asarray(names)
    return pd.DataFrame(
        {
            "x": proj.coords[:, 0],
            "y": proj.coords[:, 1],
            "point": np.arange(len(samples.indices)),
            "split": samples.splits,
            "index": samples.indices,
            "true": band[np.searchsorted(edges, truth, side="right")],
            "predicted": band[np.searchsorted(edges, values, side="right")],
            "error": np.where(values >= truth, "over-predicted", "under-predicted"),
        }
    )


def true_and_predicted(bundle: ModelBundle, samples: Samples, split_of: dict[str, Split | None]) -> np.ndarray:
    """A number to predict: the samples' true values (the activations keep whole-number labels) put back in
    `samples.labels`, and the model's predicted values, in the target's units."""
    truth, values = [], []
    for part in samples.parts:
        data = split_of[part.split]
        assert data is not None  # the part's activations came from it
        rows = bundle.adapter.items(data, [int(i) for i in part.indices])
        truth.append(data.labels[torch.as_tensor(part.indices)].double().numpy())
        values.append(bundle.predict_proba(rows)[:, 0].double().numpy())
    samples.labels = np.concatenate(truth)
    return np.concatenate(values)


def add_tooltips(points: pd.DataFrame, info: DatasetInfo, split_of: dict[str, Split | None]) -> None:
    """Each point's thumbnail (pictures) or its input in a line (a text, a row's values), cut at `TEXT_TIP`
    characters, for the tooltips."""
    adapter = modality_of(info.modality)
    if adapter.pictured:
        points["image"] = np.concatenate(
            [
                _thumbnails(info.name, name, tuple(int(i) for i in points["index"][points["split"] == name]))
                for name in ("test", "train")
                if (points["split"] == name).any()
            ]
        )  # points are sorted by row, and rows hold the test samples first
    else:
        points["text"] = [
            adapter.one_line(adapter.item(data, int(i)), info, TEXT_TIP) if data is not None else ""
            for data, i in ((split_of.get(str(s)), i) for s, i in zip(points["split"], points["index"], strict=True))
        ]


def place_inputs(
    bundle: ModelBundle, bundle_key: str, proj: Projection, samples: Samples, choice: Choice, classes: tuple[str, ...]
) -> pd.DataFrame | None:
    """Your own inputs in the map (behind an expander): their places and predicted classes, or None."""
    placed = None
    with st.expander("Place your own input in the map"):
        if not proj.can_transform:
            st.info(NO_TRANSFORM, icon=":material/info:")
        else:
            # The input's own sources first (uploads, typed text): a test sample is already a point of the map.
            own = source_labels(bundle.adapter)[1:]
            st.session_state.setdefault("emb_place_source", own[0] if own else TEST_SET)
            inputs = input_picker(bundle, "emb_place", bundle_key=bundle_key, max_inputs=4)
            rows = []
            refit = (
                ""
                if proj.transform_ready or not inputs
                else (
                    " (UMAP's fit is not in memory since the map came from the disk cache: rebuilding its neighbour "
                    "graph around the cached map)"
                )
            )
            with guard("Placing inputs"), st.spinner(f"Placing {len(inputs)} input(s){refit}…"):
                for p in inputs:
                    feats = input_activation(bundle, p.raw, choice.layer, samples.parts[0].reduce)
                    xy = proj.transform(feats)[0]
                    out = bundle.predict_proba([p.raw] if isinstance(p.raw, str) else p.raw)[0]
                    target = bundle.regression  # a number: the predicted value, not a class
                    said = target.value_text(float(out[0])) if target else classes[int(out.argmax())]
                    rows.append({"x": float(xy[0]), "y": float(xy[1]), "name": f"{p.name} → {said}"})
            if rows:
                placed = pd.DataFrame(rows)
                st.caption(f"{len(rows)} input(s) drawn as black diamonds ({LABELS[choice.method]} transform).")
    return placed


def draw_map(
    points: pd.DataFrame,
    density: pd.DataFrame | None,
    placed: pd.DataFrame | None,
    title: str,
    proj: Projection,
    choice: Choice,
) -> Any:
    """The map (points you can pick, density bins beyond `INTERACTIVE_MAX`); the chart's selection event."""
    alt.data_transformers.disable_max_rows()  # the bins of a large map can exceed altair's 5,000-row guard
    return st.altair_chart(
        map_chart(points, choice.colour, title, proj.axis_labels(), placed, density),
        on_select="rerun",
        selection_mode="pick",
        key=f"emb_chart_{choice.layer}_{choice.n}_{choice.method}",
    )


def map_title(
    samples: Samples, choice: Choice, names: dict[str, str], total: int, values: np.ndarray | None = None
) -> str:
    """The map's title: projection, layer, samples and how well the model does on them (accuracy, or R²)."""
    parts = samples.parts
    what = "test samples" if len(parts) == 1 else f"samples ({len(parts[0]):,} test, {len(parts[1]):,} training)"
    if values is not None:  # a number to predict: R² over the samples shown
        truth = samples.labels.astype(np.float64)
        spread = float(((truth - truth.mean()) ** 2).sum()) or 1.0
        score = r2_text(1.0 - float(((values - truth) ** 2).sum()) / spread)
    else:
        score = f"accuracy {float((samples.labels == samples.preds).mean()):.1%}"
    return f"{LABELS[choice.method]} of {names[choice.layer]} · {total:,} {what} · {score}"


def map_caption(proj: Projection, samples: Samples, method: str, total: int, drawn_points: int, binned: bool) -> None:
    """The projection's note, where the activations and the map came from, how the map is drawn."""
    if proj.note:
        st.caption(f":warning: {proj.note}")
    source = "read from cache" if all(a.from_cache for a in samples.parts) else "computed"
    drawn = (
        ""
        if not binned
        else f"All {total:,} samples are drawn as bins (colour: the most common class, darker: more samples); "
        f"{drawn_points:,} of them, a fixed random sample, as points. "
    )
    st.caption(
        f"Activations {source} ({samples.features.shape[1]} features per sample); "
        f"{LABELS[method]} {'read from cache' if proj.from_cache else f'computed in {proj.seconds:.1f} s'}. "
        + drawn
        + "Hover a point for the sample, drag to pan, scroll to zoom, click to select, double-click to clear."
    )


def selected_sample(
    event: Any,
    samples: Samples,
    split_of: dict[str, Split | None],
    info: DatasetInfo,
    total: int,
    df: pd.DataFrame | None = None,
) -> None:
    """The clicked sample: its image or text, true and predicted class, and (test samples) a button that opens
    it on the Explain page."""
    picked = (event.selection.get("pick") or []) if event and event.selection else []
    if not (picked and 0 <= int(picked[0].get("point", -1)) < total):
        return
    row = int(picked[0]["point"])
    index, split_name = int(samples.indices[row]), str(samples.splits[row])
    data = split_of[split_name]
    st.subheader(f"{'Test' if split_name == 'test' else 'Training'} sample #{index}")
    left, right = st.columns([1, 3])
    adapter = modality_of(info.modality)
    if data is not None and adapter.pictured:
        left.image(to_pil(adapter.item(data, index), 112), width=112)
    elif data is not None:
        right.write(adapter.one_line(adapter.item(data, index), info, MAX_TEXT_CHARS))
    classes = info.classes
    if info.regression is not None and df is not None:  # the values' bands, as the map colours them
        right.markdown(f"true **{df['true'][row]}**, predicted **{df['predicted'][row]}** ({info.regression.name})")
    else:
        right.markdown(f"true **{classes[samples.labels[row]]}**, predicted **{classes[samples.preds[row]]}**")
    if split_name != "test":
        right.caption("The Explain page's gallery lists the test split: training samples are shown here only.")
    elif right.button("Open on the Explain page", key="emb_open", icon=":material/image_search:"):
        st.switch_page(EXPLAIN_PAGE, query_params={OPEN_SAMPLE_PARAM: f"test:{index}"})  # the picker reads it


def main() -> None:
    shown = selected_run("any")  # a language model when it was picked last (or opened from Generate)
    if shown is not None and run_kind(shown) == "language_model":
        language_embeddings(shown)
        return
    header()
    run, bundle = require_bundle("look inside")
    stop_without_dataset(bundle, "the Embeddings page, which projects the test split,")
    bundle_key = services.run_key(run)
    if bundle.info.graph is not None:  # graphs: a batch holds every node of its graphs, read through `embed`
        graph_embeddings(bundle, bundle_key)
        return
    split = services.dataset_split(bundle.info.name, "test")
    names = _layer_names(bundle_key, bundle)
    choice = controls(bundle, split, names)
    samples = samples_of(bundle, bundle_key, names, split, choice)
    proj = projection(bundle, bundle_key, samples, choice)
    classes = bundle.info.classes
    split_of = {"test": split, "train": choice.train_split}
    if bundle.regression is not None:
        values = true_and_predicted(bundle, samples, split_of)
        df = values_frame(proj, samples, bundle.regression, values)
    else:
        df = samples_frame(proj, samples, classes)
    density = density_frame(df, choice.colour) if len(df) > INTERACTIVE_MAX else None
    points = df.iloc[interactive_rows(len(df))].reset_index(drop=True)
    add_tooltips(points, bundle.info, split_of)
    placed = place_inputs(bundle, bundle_key, proj, samples, choice, classes)
    title = map_title(samples, choice, names, len(df), values if bundle.regression is not None else None)
    event = draw_map(points, density, placed, title, proj, choice)
    map_caption(proj, samples, choice.method, len(df), len(points), density is not None)
    selected_sample(event, samples, split_of, bundle.info, len(df), df)


main()
