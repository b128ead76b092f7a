"""Model: the architecture, one input's feature maps, the first layer's filters, and how one input's
explanations changed over the epochs of training."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.explain_maps import map_card
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.inputs import PickedInput, input_picker
from xaidash.dashboard.components.inspect_charts import filter_figure, mosaic_figure
from xaidash.dashboard.errors import guard, show_error
from xaidash.dashboard.state import require_bundle
from xaidash.data.formatting import percent, r2_text
from xaidash.explainers import methods_for
from xaidash.explainers.comparison.across_training import (
    TrainingExplanations,
    default_methods,
    explanations_across_training,
)
from xaidash.explainers.registry import get_method
from xaidash.explainers.scoring import unit_words
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.activations import FeatureMaps, Filters, feature_maps, first_layer_filters
from xaidash.models.inspect.summary import ModelSummary, summarize_bundle
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run

MAX_CHANNELS = 64
IG_STEPS = 32


@st.cache_data(max_entries=8, show_spinner=False)
def _summary(key: str, _bundle: ModelBundle) -> ModelSummary:
    return summarize_bundle(_bundle)


@st.cache_data(max_entries=16, show_spinner=False)
def _maps(key: str, input_key: str, _bundle: ModelBundle, _raw) -> list[FeatureMaps]:
    return feature_maps(_bundle, _raw)


@st.cache_data(max_entries=8, show_spinner=False)
def _filters(key: str, _bundle: ModelBundle) -> Filters:
    return first_layer_filters(_bundle)


@st.cache_resource(show_spinner=False)
def _across() -> services.LRUCache:
    return services.LRUCache(16)


def architecture(bundle_key: str, bundle: ModelBundle) -> None:
    """Parameter counts and the layer table."""
    st.subheader("Architecture")
    with guard("Architecture summary"):
        summary = _summary(bundle_key, bundle)
        c1, c2, c3 = st.columns(3)
        c1.metric("Parameters", f"{summary.total:,}")
        c2.metric("Trainable", f"{summary.trainable:,}")
        shape = " x ".join(map(str, summary.input_shape))
        c3.metric("Input", "token ids" if bundle.adapter.tokenized else shape)
        st.dataframe(
            pd.DataFrame(summary.table()),
            hide_index=True,
            width="stretch",
            height=min(720, 40 + 35 * len(summary.rows)),
            column_config={
                "parameters": st.column_config.NumberColumn(format="localized"),
                "trainable": st.column_config.NumberColumn(format="localized"),
            },
        )
        st.caption(
            "Output shapes from one forward pass of a dummy input (batch dimension left out). Each parameter is "
            "counted once, at the module that owns it, so the column adds up to the total."
        )


def pick_input(bundle_key: str, bundle: ModelBundle) -> PickedInput | None:
    """The one input the feature maps and the explanations across training show (None until one is picked)."""
    st.subheader("Input")
    picked = input_picker(bundle, "model", bundle_key=bundle_key, max_inputs=1)
    return picked[0] if picked else None


def feature_map_section(bundle_key: str, bundle: ModelBundle, item: PickedInput | None) -> None:
    """One conv layer's feature maps of the input, as a mosaic beside the input."""
    st.subheader("Feature maps")
    if item is None:
        st.info("Pick an input above to see its feature maps.")
        return
    try:
        maps = _maps(bundle_key, item.key, bundle, item.raw)
    except ModelError as e:
        st.info(str(e), icon=":material/block:")
        maps = []
    if not maps:
        return
    labels = {
        m.path: f"{m.path} ({m.maps.shape[0]} x {m.maps.shape[1]}x{m.maps.shape[2]})"
        + (" · shortcut" if m.shortcut else "")
        for m in maps
    }
    c1, c2 = st.columns([3, 1])
    path = c1.selectbox("Conv layer", list(labels), format_func=lambda p: labels[p], key="model_fmap_layer")
    chosen = next(m for m in maps if m.path == path)
    k = int(
        c2.number_input(
            "Channels shown", 1, chosen.maps.shape[0], min(32, chosen.maps.shape[0]), key=f"model_fmap_k_{path}"
        )
    )
    left, right = st.columns([1, 4])
    left.image(to_pil(item.raw, 120), caption=item.name, width=120)
    right.image(
        mosaic_figure(chosen.maps[:k], cols=8, tile=72, labels=[f"ch {i}" for i in range(k)]),
        caption="Each map scaled to its own range: black lowest, white highest (the bar below).",
    )


def filter_section(bundle_key: str, bundle: ModelBundle) -> None:
    """The first layer's filters on one scale, with its scale bar."""
    st.subheader("First-layer filters")
    try:
        filters = _filters(bundle_key, bundle)
    except ModelError as e:
        st.info(str(e), icon=":material/block:")
        return
    grid, weight_scale, rgb = filter_figure(filters.weights[:MAX_CHANNELS], cols=8)
    st.image(
        grid,
        caption=f"{filters.path}: {filters.note}"
        + (f" (first {MAX_CHANNELS})" if len(filters.weights) > MAX_CHANNELS else "")
        + ", enlarged without smoothing (each square is one weight). "
        + (
            "Colour tiles: each filter's red, green and blue weights as a colour; mid-grey = 0, a bright colour "
            "= positive weights on that channel, a dark one = negative (the filter responds to the opposite "
            "colour)."
            if rgb
            else "Summed over the input channels: mid-grey = 0, white positive, black negative."
        )
        + f" One scale for every filter: ±{weight_scale:.3g}, the largest |weight|.",
        width=grid.width,
    )


def inside_the_model(bundle_key: str, bundle: ModelBundle, item: PickedInput | None) -> None:
    """Feature maps and filters for models whose inputs lie on a grid (images); a note for the others."""
    if bundle.adapter.spatial:
        feature_map_section(bundle_key, bundle, item)
        filter_section(bundle_key, bundle)
    else:
        units = unit_words(bundle.modality)[1]
        st.caption(f"Feature maps and filters are drawn for models that read images; this one's inputs are {units}.")


def checkpoint_epochs(run: Run) -> list[int]:
    """The epochs with a checkpoint; the page stops with a note when there are none."""
    checkpoints = run.checkpoints()
    if not checkpoints:
        elsewhere = run.kind == "imported"
        st.info(
            "An imported model has no per-epoch checkpoints: it was trained elsewhere."
            if elsewhere
            else "This run has no per-epoch checkpoints.",
            icon=":material/info:",
        )
        st.stop()
    return [e for e, _ in checkpoints]


def pick_across_methods(bundle: ModelBundle, epochs: list[int]) -> list[str]:
    """The methods multiselect and what the cards show; the page stops when none is picked."""
    usable = {m.id: m for m in methods_for(bundle)}
    preset = [m for m in default_methods(bundle.modality) if m in usable] or list(usable)[:1]
    if any(m not in usable for m in st.session_state.get("model_across_methods", [])):  # kept from another model
        del st.session_state["model_across_methods"]
    across_methods: list[str] = st.multiselect(
        "Methods",
        list(usable),
        default=preset,
        format_func=lambda m: usable[m].label,
        key="model_across_methods",
        help="any method that applies to this model; Integrated Gradients runs with "
        f"{IG_STEPS} steps here to keep one pass per epoch quick",
    )
    st.caption(
        f"{len(epochs)} checkpoint(s): epochs {', '.join(map(str, epochs))}. The input is explained with the "
        "weights after each epoch, always for "
        + (
            "the class the final model predicts"
            if bundle.regression is None
            else f"its predicted {bundle.regression.name}"
        )
        + " (each epoch's own prediction is in its caption). One colour scale per method across the epochs: the 99th percentile of "
        "|value| over all of them (values beyond it saturate), drawn over a grey copy of the input as on the "
        "Explain page."
    )
    if not across_methods:
        st.info("Pick at least one method.")
        st.stop()
    return across_methods


def explain_across_training(run: Run, key: tuple[Any, ...], raw: Any, methods: list[str]) -> TrainingExplanations:
    """`raw` explained with the weights after every epoch, with a progress bar (cached for every session)."""
    method_params = {"ig": {"steps": IG_STEPS}} if "ig" in methods else {}
    bar = st.progress(0.0, text="Explaining at every epoch…")

    def show_progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Epoch {done}/{total}")

    try:
        result, _ = _across().get_or_compute(
            key,
            lambda: explanations_across_training(
                run, raw, methods, method_params=method_params, progress=show_progress
            ),
        )
    finally:
        bar.empty()
    return result


def across_training_result(
    run: Run, bundle_key: str, item: PickedInput, methods: list[str], epochs: list[int]
) -> TrainingExplanations:
    """The cached result, or computed (after a click when there are more than three epochs); the page stops with
    the error when it fails."""
    key = (bundle_key, item.key, tuple(methods))
    cached: TrainingExplanations | None = _across().get(key)
    if (
        cached is None
        and len(epochs) > 3
        and not st.button(f"Explain at all {len(epochs)} epochs", key="model_across_go")
    ):
        st.stop()
    try:
        return cached if cached is not None else explain_across_training(run, key, item.raw, methods)
    except Exception as e:  # noqa: BLE001
        show_error(e, "Explanations across training")
        st.stop()


def across_training_cards(bundle: ModelBundle, item: PickedInput, result: TrainingExplanations) -> None:
    """Per method, the epochs' maps side by side in rows that wrap (the last eight epochs at most)."""
    for method, reason in result.skipped.items():
        st.caption(f"{get_method(method, bundle.modality).label} skipped: {reason}")
    classes = bundle.info.classes
    target = bundle.regression  # a number to predict: its one output, each epoch's value in its units
    st.markdown(
        f"Explaining the predicted **{target.name}**." if target else f"Explaining class **{classes[result.target]}**."
    )
    shown = result.epochs[-8:] if len(result.epochs) > 8 else result.epochs
    if len(shown) < len(result.epochs):
        st.caption(f"The last {len(shown)} epochs are shown.")
    for method in result.methods():
        st.markdown(f"**{get_method(method, bundle.modality).label}**")
        with st.container(horizontal=True, gap="small"):  # the epochs side by side, in rows that wrap
            image = item.raw if bundle.adapter.pictured else None
            for at_epoch, fig in result.figures(method, classes, image, shown, target):
                map_card(
                    fig,
                    key=f"model_across_card_{method}_{at_epoch.epoch}",
                    title=f"epoch {at_epoch.epoch}",
                    caption=f"val {r2_text(at_epoch.val_acc)} · predicted {target.value_text(at_epoch.probability)}"
                    if target
                    else f"val acc {percent(at_epoch.val_acc)} · pred {classes[at_epoch.predicted]} · "
                    f"p={at_epoch.probability:.2f}",
                    enlarge=False,
                )


def across_training(run: Run, bundle_key: str, bundle: ModelBundle, item: PickedInput | None) -> None:
    """How the input's explanations changed over the epochs of training."""
    st.subheader("Explanations across training")
    epochs = checkpoint_epochs(run)
    if item is None:
        st.info("Pick an input above.")
        st.stop()
    methods = pick_across_methods(bundle, epochs)
    result = across_training_result(run, bundle_key, item, methods, epochs)
    across_training_cards(bundle, item, result)


def main() -> None:
    st.title("Model")
    run, bundle = require_bundle("look inside")
    bundle_key = services.run_key(run)
    st.caption(f"{bundle.spec.name} on {bundle.info.name}: {bundle.spec.description}")
    architecture(bundle_key, bundle)
    item = pick_input(bundle_key, bundle)
    inside_the_model(bundle_key, bundle, item)
    across_training(run, bundle_key, bundle, item)


main()
