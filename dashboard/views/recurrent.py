"""Recurrent: inside a GRU or LSTM for one series. The hidden state of every layer over time, projected with PCA
(beside one test series per class, so the classes' paths can be compared), and every gate's activations as unit x
time heatmaps under the series' line, recomputed from the layer's own weights (`explainers.inspection.recurrent`)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.inputs import PickedInput, input_picker
from xaidash.dashboard.errors import guard
from xaidash.dashboard.state import require_bundle
from xaidash.explainers.inspection.recurrent import (
    RecurrentTrace,
    bundle_trace,
    first_per_class,
    recurrent_reason,
    series_tensor,
    trajectories,
)
from xaidash.explainers.inspection.recurrent_charts import TOP_UNITS, gate_chart, series_chart, trajectory_chart
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import list_models


@st.cache_data(max_entries=32, show_spinner=False)
def _trace(key: str, input_key: str, _bundle: ModelBundle, _raw) -> RecurrentTrace:
    return bundle_trace(_bundle, _raw)


@st.cache_data(max_entries=8, show_spinner=False)
def _class_traces(key: str, _bundle: ModelBundle) -> list[tuple[str, RecurrentTrace]]:
    """The first test series of every class, named 'test #INDEX (class)', with its trace."""
    split = services.dataset_split(_bundle.info.name, "test")
    return [(name, bundle_trace(_bundle, raw)) for name, raw in first_per_class(split, _bundle.info.classes)]


@st.cache_data(max_entries=16, show_spinner=False)
def _proba(key: str, input_key: str, _bundle: ModelBundle, _raw) -> np.ndarray:
    raw = series_tensor(_raw)
    return _bundle.predict_proba(raw.reshape(1, *raw.shape[-2:]))[0].numpy()


def header() -> None:
    st.title("Recurrent")
    st.caption(
        "Inside a GRU or LSTM for one series: the hidden state at every time step, projected on its first two "
        "principal components, and what each gate lets through at every step. torch does not return the gates: "
        "they are recomputed from the layer's own weights, and the recomputed hidden states are checked against "
        "the layer's own outputs (to 1e-5) before anything is drawn."
    )


def require_recurrent(bundle: ModelBundle) -> None:
    """The page stops, naming the models that have a recurrent layer, for a model without one."""
    reason = recurrent_reason(bundle)
    if reason:
        having = ", ".join(s.name for s in list_models() if s.recurrent) or "none registered"
        st.info(f"{reason} Models with a recurrent layer: {having}.", icon=":material/block:")
        st.stop()


def pick_input(bundle: ModelBundle, bundle_key: str) -> PickedInput:
    """One series; the page stops until there is one."""
    picked = input_picker(bundle, "recurrent", bundle_key=bundle_key, max_inputs=1)
    if not picked:
        st.stop()
    return picked[0]


def prediction_line(bundle: ModelBundle, bundle_key: str, item: PickedInput, trace: RecurrentTrace) -> None:
    proba = _proba(bundle_key, item.key, bundle, item.raw)
    pred = int(proba.argmax())
    truth = f" · true class **{bundle.info.classes[int(item.label)]}**" if item.label is not None else ""
    st.markdown(
        f"**{item.name}** · predicted **{bundle.info.classes[pred]}** ({100 * proba[pred]:.1f}%){truth} · "
        f"{trace.kind} `{trace.path}`: {len(trace.layers)} layer(s) of {trace.units} units over {trace.steps} "
        f"{bundle.info.step_name}s (recomputed h_t within {trace.error:.1e} of torch's)"
    )


def pick_layer(trace: RecurrentTrace) -> int:
    if len(trace.layers) == 1:
        return 0
    options = list(range(len(trace.layers)))
    return int(
        st.selectbox(
            "Layer", options, index=len(options) - 1, format_func=lambda k: f"layer {k + 1}", key="recurrent_layer"
        )
    )


def trajectory_section(bundle: ModelBundle, bundle_key: str, item: PickedInput, trace: RecurrentTrace, layer: int):
    st.subheader("Hidden state over time (PCA)")
    compare = bundle.no_dataset_reason("the test series") is None and st.toggle(
        "Beside the first test series of every class",
        value=True,
        key="recurrent_compare",
        help="One PCA fitted on every step of every series shown, so the paths share one plane.",
    )
    picked = item.name if item.label is None else f"{item.name} ({bundle.info.classes[int(item.label)]})"
    named = [(picked, trace)]
    if compare:
        with st.spinner("Running the test series…"):
            named += [(n, t) for n, t in _class_traces(bundle_key, bundle) if n != picked]
    traj = trajectories([t for _, t in named], layer, labels=[n for n, _ in named])
    st.altair_chart(trajectory_chart(traj, bundle.info.step_name), width="content")
    ev = traj.explained
    st.caption(
        f"PCA of layer {layer + 1}'s {trace.units}-unit hidden state, fitted on the {sum(len(p) for p in traj.points)} "
        f"steps of {len(named)} series: PC1 explains {100 * ev[0]:.1f}% of their variance"
        + (f", PC2 {100 * ev[1]:.1f}% (together {100 * ev[:2].sum():.1f}%)." if len(ev) > 1 else ".")
        + " Colour: the time step; a grey line joins each series' steps in order."
    )


def gates_section(bundle: ModelBundle, item: PickedInput, trace: RecurrentTrace, layer: int) -> None:
    st.subheader("Gates over time")
    k = int(
        st.slider(
            "Units shown per gate",
            1,
            trace.units,
            min(TOP_UNITS, trace.units),
            key="recurrent_units",
            help="The units whose activation varies most over time, in unit order.",
        )
    )
    raw = series_tensor(item.raw)
    st.altair_chart(
        series_chart(raw.reshape(raw.shape[-2:]).numpy(), bundle.info.channel_names, bundle.info.step_name),
        width="content",
    )
    for gate in trace.gate_names:
        st.altair_chart(gate_chart(trace, layer, gate, bundle.info.step_name, k), width="content")
    st.caption(
        "Sigmoid gates (input, forget, output; reset, update) run from 0 (closed) to 1 (open); the cell candidate "
        "(LSTM) and the new state (GRU) are tanh, -1 to 1. Each gate: its mean over all units per step above, the "
        "units that vary most below, on the series' time axis."
    )


def main() -> None:
    header()
    run, bundle = require_bundle("look inside")
    bundle_key = services.run_key(run)
    require_recurrent(bundle)
    item = pick_input(bundle, bundle_key)
    with guard("Recurrent layer"):
        trace = _trace(bundle_key, item.key, bundle, item.raw)
        prediction_line(bundle, bundle_key, item, trace)
        layer = pick_layer(trace)
        trajectory_section(bundle, bundle_key, item, trace, layer)
        gates_section(bundle, item, trace, layer)


main()
