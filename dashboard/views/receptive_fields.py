"""Receptive fields: the theoretical window of every conv and pooling layer, one unit's window on an
input (an image's box of pixels, a series' span of steps), and the effective receptive field (input gradients)
for trained and random weights. A series model's layers are one row high: the page draws steps, not boxes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.inputs import input_picker, stop_without_dataset
from xaidash.dashboard.components.inspect_charts import (
    draw_box,
    erf_profile_chart,
    heat_figure,
    series_field_chart,
    upscaled,
)
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

    @property
    def steps(self) -> bool:
        """A series layer: one row of steps, no rows to pick or boxes to draw."""
        return self.layer.axes == 1

    def where(self) -> str:
        return f"step {self.col}" if self.steps else f"unit ({self.row}, {self.col})"


@st.cache_data(max_entries=8, show_spinner=False)
def _layers(key: str, _bundle: ModelBundle) -> list[RFLayer]:
    return bundle_receptive_fields(_bundle)


@st.cache_data(max_entries=32, show_spinner=False)
def _erf(key: str, _bundle: ModelBundle, layer: str, unit: tuple[int, int], n: int, random_weights: bool) -> ERF:
    split = services.dataset_split(_bundle.info.name, "test")
    inputs = _bundle.adapter.items(split, range(min(n, len(split))))
    return bundle_erf(_bundle, inputs, layer, unit, random_weights=random_weights, batch_size=32)


def header(bundle: ModelBundle) -> None:
    units, inputs = bundle.adapter.units, bundle.adapter.label
    st.caption(
        f"Which input {units} can reach one unit of a layer. The theoretical field follows from each layer's "
        f"kernel, stride, padding and dilation; the effective field measures how strongly each of those {units} "
        f"actually moves the unit (the input gradient, averaged over many test {inputs}) — usually much "
        "narrower than the theoretical field."
    )


def rf_layers(bundle_key: str, bundle: ModelBundle) -> list[RFLayer]:
    """The model's conv and pooling layers with their fields; the page stops with the reason for other models."""
    try:
        return _layers(bundle_key, bundle)
    except ModelError as e:
        st.info(f"{e}", icon=":material/block:")
        st.caption(
            "Receptive fields apply to convolutional models of images (simple_cnn, resnet_small, resnet18, imported "
            "CNNs) and of series (series_cnn, the causal series_tcn)."
        )
        st.stop()
        raise  # unreachable: st.stop() raises


def layer_table(layers: list[RFLayer], units: str) -> None:
    st.subheader("Theoretical receptive field per layer")
    st.dataframe(pd.DataFrame([layer.row() for layer in layers]), hide_index=True, width="stretch")
    st.caption(
        f"Output size: the layer's feature map. Receptive field: input {units} one unit can see (padding "
        f"included). Jump: input {units} between two neighbouring units. Start: centre of unit 0's field in "
        f"input {units} (the first one's centre is 0). Residual networks follow the main path: shortcut branches "
        "(identities, or 1x1 convolutions with the block's stride) see a window centred on the same position and "
        "inside the main path's, so the main path's field is the block's."
        + (
            " Causal layers (each step sees only the steps up to it) have their unit on the last step by default: "
            "the one a forecaster's head reads."
            if any(layer.causal for layer in layers)
            else ""
        )
    )


def pick_unit(bundle: ModelBundle, layers: list[RFLayer]) -> Unit:
    """The layer (the last conv by default) and the unit: its row and column (the centre by default), or a series'
    step (the last one for a causal layer)."""
    c1, c2, c3 = st.columns([3, 1, 1])
    paths = [layer.path for layer in layers]
    default = next((i for i in range(len(layers) - 1, -1, -1) if layers[i].kind.startswith("Conv")), len(layers) - 1)
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
    first = layer.default_unit()
    for k, top in ((f"rf_row_{path}", layer.output_size[0] - 1), (f"rf_col_{path}", layer.output_size[1] - 1)):
        if st.session_state.get(k, 0) > top:  # the same layer name in another run's model may be smaller
            st.session_state[k] = top
    h, w = (1, int(bundle.info.input_shape[-1])) if layer.axes == 1 else (int(v) for v in bundle.info.input_shape[1:])
    if layer.axes == 1:
        row = 0
        col = int(c2.number_input("Unit (step)", 0, layer.output_size[1] - 1, first[1], key=f"rf_col_{path}"))
    else:
        row = int(c2.number_input("Unit row", 0, layer.output_size[0] - 1, first[0], key=f"rf_row_{path}"))
        col = int(c3.number_input("Unit column", 0, layer.output_size[1] - 1, first[1], key=f"rf_col_{path}"))
    return Unit(path, layer, row, col, h, w, layer.box((row, col), (h, w)), layer.box((row, col)))


def unit_on_input(bundle: ModelBundle, bundle_key: str, unit: Unit) -> None:
    """The unit's theoretical field on a picked input (a box on an image, the steps of a series shaded), and its
    rows and columns or steps."""
    st.subheader("One unit's field on an input")
    picked = input_picker(bundle, "rf", bundle_key=bundle_key, max_inputs=1)
    box, raw_box = unit.box, unit.raw_box
    if unit.steps:
        if picked:
            chart = series_field_chart(
                np.asarray(picked[0].raw), (box[1], box[3]), bundle.info.channel_names, bundle.info.step_name
            )
            st.altair_chart(chart, width="stretch")
        st.caption(
            f"{unit.where()} of {unit.path} sees steps {box[1]}–{box[3]} of {unit.w} (shaded)"
            + (
                f"; its full {unit.layer.rf[1]}-step field starts at step {raw_box[1]}: the part before 0 is padding."
                if unit.clipped
                else "."
            )
        )
        return
    left, _ = st.columns(2)
    with left:
        if picked:
            img, factor = upscaled(picked[0].raw, 256)
            st.image(draw_box(img, box, factor), caption=f"{picked[0].name}: {unit.where()} of {unit.path}", width=320)
        st.caption(
            f"Box rows {box[0]}–{box[2]}, columns {box[1]}–{box[3]} of a {unit.h}x{unit.w} image"
            + (
                f" (the full {unit.layer.rf[0]}x{unit.layer.rf[1]} field reaches rows {raw_box[0]}–{raw_box[2]}, "
                f"columns {raw_box[1]}–{raw_box[3]}: the part outside is padding)."
                if unit.clipped
                else "."
            )
        )


def pick_samples(bundle: ModelBundle) -> int:
    """How many test inputs the effective field averages over."""
    inputs = bundle.adapter.label
    c1, c2 = st.columns([2, 3])
    n = int(
        c1.number_input(
            f"Test {inputs} averaged",
            1,
            2000,
            64,
            step=32,
            key="rf_erf_n",
            help="The gradient of the unit (summed over its channels) with respect to the input, "
            f"absolute, averaged over this many test {inputs}.",
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


def erf_steps(bundle_key: str, bundle: ModelBundle, unit: Unit, n: int) -> None:
    """A series layer's effective field: the mean |gradient| per step, trained and random weights on one chart over
    the steps, the theoretical field shaded, and how much of each lies inside it."""
    with guard("Effective receptive field"):
        with st.spinner("Computing input gradients…"):
            fields = [_erf(bundle_key, bundle, unit.path, unit.cell, n, r) for r in (False, True)]
        lo, hi = unit.box[1], unit.box[3]
        title = f"{bundle.info.step_name} of the input"
        chart = erf_profile_chart(fields[0].normalized()[0], fields[1].normalized()[0], unit.w, (lo, hi), title)
        st.altair_chart(chart, width="stretch")
        said = []
        for erf in fields:
            support = erf.support(0.05)
            reach = (
                f"steps {support[1]}–{support[3]} above 5% of its peak" if support else "no step above 5% of its peak"
            )
            said.append(
                f"{erf.weights.capitalize()} weights: {100 * erf.fraction_inside(unit.box):.1f}% inside, {reach}"
            )
        st.caption(
            f"Mean |∂ unit / ∂ step| over {fields[0].samples} test series, each curve scaled to its own peak; shaded: "
            f"the theoretical field of {unit.where()} (steps {lo}–{hi}). " + ". ".join(said) + "."
        )


def main() -> None:
    st.title("Receptive fields")
    run, bundle = require_bundle("look inside")
    header(bundle)
    bundle_key = services.run_key(run)
    layers = rf_layers(bundle_key, bundle)
    layer_table(layers, bundle.adapter.units)
    unit = pick_unit(bundle, layers)
    unit_on_input(bundle, bundle_key, unit)
    st.subheader("Effective receptive field")
    stop_without_dataset(bundle, f"the effective receptive field, an average over test {bundle.adapter.label},")
    n = pick_samples(bundle)
    if unit.steps:
        erf_steps(bundle_key, bundle, unit, n)
        return
    erf_maps(bundle_key, bundle, unit, n)
    erf_profile(bundle_key, bundle, unit, n)


main()
