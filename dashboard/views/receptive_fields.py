"""Receptive fields: the theoretical window of every conv and pooling layer, one unit's window on an
input image, and the effective receptive field (input gradients) for trained and random weights."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.inputs import input_picker, stop_without_dataset
from xaidash.dashboard.components.inspect_charts import draw_box, erf_profile_chart, heat_image, scale_bar, upscaled
from xaidash.dashboard.errors import guard
from xaidash.dashboard.state import require_bundle
from xaidash.explainers.inspection.effective_receptive_field import ERF, bundle_erf
from xaidash.models.bundle import ModelBundle
from xaidash.models.inspect.receptive_field import RFLayer, bundle_receptive_fields, find_layer
from xaidash.models.registry import ModelError

st.title("Receptive fields")
st.caption(
    "Which input pixels can reach one unit of a layer. The theoretical field follows from each layer's "
    "kernel, stride, padding and dilation; the effective field measures how strongly each pixel actually "
    "moves the unit (the input gradient, averaged over many test images) — usually a blob much smaller "
    "than the theoretical box."
)

run, bundle = require_bundle("look inside")
bundle_key = services.run_key(run)


@st.cache_data(max_entries=8, show_spinner=False)
def _layers(key: str, _bundle: ModelBundle) -> list[RFLayer]:
    return bundle_receptive_fields(_bundle)


@st.cache_data(max_entries=32, show_spinner=False)
def _erf(key: str, _bundle: ModelBundle, layer: str, unit: tuple[int, int], n: int, random_weights: bool) -> ERF:
    split = services.image_split(_bundle.info.name, "test")
    images = split.batch(range(min(n, len(split))))
    return bundle_erf(_bundle, images, layer, unit, random_weights=random_weights, batch_size=32)


try:
    layers = _layers(bundle_key, bundle)
except ModelError as e:
    st.info(f"{e}", icon=":material/block:")
    st.caption(
        "Receptive fields apply to convolutional image models: simple_cnn, resnet_small, resnet18, imported CNNs."
    )
    st.stop()

st.subheader("Theoretical receptive field per layer")
st.dataframe(pd.DataFrame([layer.row() for layer in layers]), hide_index=True, width="stretch")
st.caption(
    "Output size: the layer's feature map. Receptive field: input pixels one unit can see (padding "
    "included). Jump: input pixels between two neighbouring units. Start: centre of unit (0, 0)'s field in "
    "input pixels (pixel 0's centre is 0). Residual networks follow the main path: shortcut branches "
    "(identity or 1x1 convolutions with the block's stride) see a window centred on the same pixel and "
    "inside the main path's, so the main path's field is the block's."
)

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
        f"{p} ({find_layer(layers, p).row()['receptive field']}, {find_layer(layers, p).row()['output size']} units)"
    ),
)
layer = find_layer(layers, path)
centre = layer.centre_unit()
for k, top in ((f"rf_row_{path}", layer.output_size[0] - 1), (f"rf_col_{path}", layer.output_size[1] - 1)):
    if st.session_state.get(k, 0) > top:  # the same layer name in another run's model may be smaller
        st.session_state[k] = top
row = int(c2.number_input("Unit row", 0, layer.output_size[0] - 1, centre[0], key=f"rf_row_{path}"))
col = int(c3.number_input("Unit column", 0, layer.output_size[1] - 1, centre[1], key=f"rf_col_{path}"))
box = layer.box((row, col), (h, w))
raw_box = layer.box((row, col))
clipped = raw_box != box

st.subheader("One unit's field on an input")
picked = input_picker(bundle, "rf", bundle_key=bundle_key, max_inputs=1)
left, right = st.columns(2)
with left:
    if picked:
        img, factor = upscaled(picked[0].raw, 256)
        st.image(draw_box(img, box, factor), caption=f"{picked[0].name}: unit ({row}, {col}) of {path}", width=320)
    st.caption(
        f"Box rows {box[0]}–{box[2]}, columns {box[1]}–{box[3]} of a {h}x{w} image"
        + (
            f" (the full {layer.rf[0]}x{layer.rf[1]} field reaches rows {raw_box[0]}–{raw_box[2]}, columns "
            f"{raw_box[1]}–{raw_box[3]}: the part outside is padding)."
            if clipped
            else "."
        )
    )

st.subheader("Effective receptive field")
stop_without_dataset(bundle, "the effective receptive field, an average over test images,")
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
    "Trained weights beside the same architecture with random weights: training usually concentrates the field further."
)
cols = st.columns(2)
for column, random_weights in zip(cols, (False, True), strict=True):
    with column, guard("Effective receptive field"):
        with st.spinner("Computing input gradients…"):
            erf = _erf(bundle_key, bundle, path, (row, col), n, random_weights)
        img, factor = heat_image(erf.map, 256)
        st.image(
            draw_box(img, box, factor, colour="#00e5ff", width=2),
            caption=f"{erf.weights} weights · {erf.samples} images · box: theoretical field",
            width="stretch",
        )
        peak = float(erf.map.max())
        st.image(
            scale_bar(0.0, peak, "mean |∂ unit / ∂ pixel|, 0 to this map's peak", cmap="inferno", width=300),
            width="content",
        )
        support = erf.support(0.05)
        norm = erf.normalized()
        inside = erf.fraction_inside(box)
        area = int((norm > 0.05).sum())
        st.caption(
            f"{100 * inside:.1f}% of the gradient inside the box; {area} pixels above 5% of the peak"
            + (f" (rows {support[0]}–{support[2]}, columns {support[1]}–{support[3]})." if support else ".")
        )
with guard("Profile"):
    trained = _erf(bundle_key, bundle, path, (row, col), n, False).normalized()
    rand = _erf(bundle_key, bundle, path, (row, col), n, True).normalized()
    r = (box[0] + box[2]) // 2
    st.altair_chart(erf_profile_chart(trained[r], rand[r], w, (box[1], box[3])), width="stretch")
    st.caption(
        f"Row {r} through the centre of the box, across the whole {w}-pixel width of the image; each map scaled "
        "to its own peak (the colour bars above give the peaks). Shaded: the theoretical field's columns."
    )
