"""Receptive fields: the theoretical window of every conv and pooling layer, one unit's window on an
input image, and the effective receptive field (input gradients) for trained and random weights."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.inputs import input_picker, stop_without_dataset
from xaidash.dashboard.components.inspect_charts import draw_box, erf_profile_chart, heat_figure, upscaled
from xaidash.dashboard.errors import guard
from xaidash.dashboard.state import require_bundle
from xaidash.explainers.inspection.effective_receptive_field import ERF, bundle_erf
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.receptive_field import RFLayer, bundle_receptive_fields, find_layer
from xaidash.models.registry import ModelError

Box = tuple[int, int, int, int]


@dataclass
class Unit:
    """The chosen layer and unit, and its theoretical field: clipped to the (h, w) image, and in full."""

    path: str
    layer: RFLayer
    row: int
    col: int
    h: int
    w: int
    box: Box
    raw_box: Box

    @property
    def cell(self) -> tuple[int, int]:
        return self.row, self.col

    @property
    def clipped(self) -> bool:
        return self.raw_box != self.box


@st.cache_data(max_entries=8, show_spinner=False)
def _layers(key: str, _bundle: ModelBundle) -> list[RFLayer]:
    return bundle_receptive_fields(_bundle)


@st.cache_data(max_entries=32, show_spinner=False)
def _erf(key: str, _bundle: ModelBundle, layer: str, unit: tuple[int, int], n: int, random_weights: bool) -> ERF:
    split = services.image_split(_bundle.info.name, "test")
    images = split.batch(range(min(n, len(split))))
    return bundle_erf(_bundle, images, layer, unit, random_weights=random_weights, batch_size=32)


def header() -> None:
    st.title("Receptive fields")
    st.caption(
        "Which input pixels can reach one unit of a layer. The theoretical field follows from each layer's "
        "kernel, stride, padding and dilation; the effective field measures how strongly each pixel actually "
        "moves the unit (the input gradient, averaged over many test images) — usually a blob much smaller "
        "than the theoretical box."
    )


def rf_layers(bundle_key: str, bundle: ModelBundle) -> list[RFLayer]:
    """The model's conv and pooling layers with their fields; the page stops with the reason for other models."""
    try:
        return _layers(bundle_key, bundle)
    except ModelError as e:
        st.info(f"{e}", icon=":material/block:")
        st.caption(
            "Receptive fields apply to convolutional image models: simple_cnn, resnet_small, resnet18, imported CNNs."
        )
        st.stop()
        raise  # unreachable: st.stop() raises


def layer_table(layers: list[RFLayer]) -> None:
    st.subheader("Theoretical receptive field per layer")
    st.dataframe(pd.DataFrame([layer.row() for layer in layers]), hide_index=True, width="stretch")
    st.caption(
        "Output size: the layer's feature map. Receptive field: input pixels one unit can see (padding "
        "included). Jump: input pixels between two neighbouring units. Start: centre of unit (0, 0)'s field in "
        "input pixels (pixel 0's centre is 0). Residual networks follow the main path: shortcut branches "
        "(identity or 1x1 convolutions with the block's stride) see a window centred on the same pixel and "
        "inside the main path's, so the main path's field is the block's."
    )


def pick_unit(bundle: ModelBundle, layers: list[RFLayer]) -> Unit:
    """The layer (the last conv by default) and the unit's row and column (the centre by default)."""
    h, w = (int(v) for v in bundle.info.input_shape[1:])
    c1, c2, c3 = st.columns([3, 1, 1])
    paths = [layer.path for layer in layers]
    default = next((i for i in range(len(layers) - 1, -1, -1) if layers[i].kind == "Conv2d"), len(layers) - 1)
    path = c1.selectbox(
        "Layer",
        paths,
        index=default,
        key="rf_layer",
        format_func=lambda p: (
            f"{p} ({find_layer(layers, p).row()['receptive field']}, {find_layer(layers, p).row()['output size']} "
            "units)"
        ),
    )
    layer = find_layer(layers, path)
    centre = layer.centre_unit()
    for k, top in ((f"rf_row_{path}", layer.output_size[0] - 1), (f"rf_col_{path}", layer.output_size[1] - 1)):
        if st.session_state.get(k, 0) > top:  # the same layer name in another run's model may be smaller
            st.session_state[k] = top
    row = int(c2.number_input("Unit row", 0, layer.output_size[0] - 1, centre[0], key=f"rf_row_{path}"))
    col = int(c3.number_input("Unit column", 0, layer.output_size[1] - 1, centre[1], key=f"rf_col_{path}"))
    return Unit(path, layer, row, col, h, w, layer.box((row, col), (h, w)), layer.box((row, col)))


def unit_on_input(bundle: ModelBundle, bundle_key: str, unit: Unit) -> None:
    """The unit's theoretical field as a box on a picked input, and its rows and columns."""
    st.subheader("One unit's field on an input")
    picked = input_picker(bundle, "rf", bundle_key=bundle_key, max_inputs=1)
    box, raw_box = unit.box, unit.raw_box
    left, _ = st.columns(2)
    with left:
        if picked:
            img, factor = upscaled(picked[0].raw, 256)
            st.image(
                draw_box(img, box, factor),
                caption=f"{picked[0].name}: unit ({unit.row}, {unit.col}) of {unit.path}",
                width=320,
            )
        st.caption(
            f"Box rows {box[0]}–{box[2]}, columns {box[1]}–{box[3]} of a {unit.h}x{unit.w} image"
            + (
                f" (the full {unit.layer.rf[0]}x{unit.layer.rf[1]} field reaches rows {raw_box[0]}–{raw_box[2]}, "
                f"columns {raw_box[1]}–{raw_box[3]}: the part outside is padding)."
                if unit.clipped
                else "."
            )
        )


def pick_samples() -> int:
    """How many test images the effective field averages over."""
    c1, c2 = st.columns([2, 3])
    n = int(
        c1.number_input(
            "Test images averaged",
            1,
            2000,
            64,
            step=32,
            key="rf_erf_n",
            help="The gradient of the unit (summed over its channels) with respect to the input, "
            "absolute, averaged over this many test images.",
        )
    )
    c2.caption(
        "Trained weights beside the same architecture with random weights: training usually concentrates the "
        "field further."
    )
    return n


def erf_card(erf: ERF, box: Box) -> None:
    """One effective field: the map with the theoretical box, its colour bar, and how much of it the box holds."""
    st.image(
        heat_figure(erf.map, "mean |∂ unit / ∂ pixel|, 0 to this map's peak", box),
        caption=f"{erf.weights} weights · {erf.samples} images · box: theoretical field",
        width="stretch",
    )
    support = erf.support(0.05)
    norm = erf.normalized()
    inside = erf.fraction_inside(box)
    area = int((norm > 0.05).sum())
    st.caption(
        f"{100 * inside:.1f}% of the gradient inside the box; {area} pixels above 5% of the peak"
        + (f" (rows {support[0]}–{support[2]}, columns {support[1]}–{support[3]})." if support else ".")
    )


def erf_maps(bundle_key: str, bundle: ModelBundle, unit: Unit, n: int) -> None:
    """The effective field with trained weights beside the one with random weights."""
    cols = st.columns(2)
    for column, random_weights in zip(cols, (False, True), strict=True):
        with column, guard("Effective receptive field"):
            with st.spinner("Computing input gradients…"):
                erf = _erf(bundle_key, bundle, unit.path, unit.cell, n, random_weights)
            erf_card(erf, unit.box)


def erf_profile(bundle_key: str, bundle: ModelBundle, unit: Unit, n: int) -> None:
    """Both fields along the row through the box's centre."""
    with guard("Profile"):
        trained = _erf(bundle_key, bundle, unit.path, unit.cell, n, False).normalized()
        rand = _erf(bundle_key, bundle, unit.path, unit.cell, n, True).normalized()
        box, w = unit.box, unit.w
        r = (box[0] + box[2]) // 2
        st.altair_chart(erf_profile_chart(trained[r], rand[r], w, (box[1], box[3])), width="stretch")
        st.caption(
            f"Row {r} through the centre of the box, across the whole {w}-pixel width of the image; each map scaled "
            "to its own peak (the colour bars above give the peaks). Shaded: the theoretical field's columns."
        )


def main() -> None:
    header()
    run, bundle = require_bundle("look inside")
    bundle_key = services.run_key(run)
    layers = rf_layers(bundle_key, bundle)
    layer_table(layers)
    unit = pick_unit(bundle, layers)
    unit_on_input(bundle, bundle_key, unit)
    st.subheader("Effective receptive field")
    stop_without_dataset(bundle, "the effective receptive field, an average over test images,")
    n = pick_samples()
    erf_maps(bundle_key, bundle, unit, n)
    erf_profile(bundle_key, bundle, unit, n)


main()
