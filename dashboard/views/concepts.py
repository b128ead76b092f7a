"""Concepts: TCAV for one class of the selected run: pick concepts (a data set's class, uploaded images or
sentences, gallery picks), the layers and the number of random sets; the scores with their spread and the
significance test (explainers/concepts). A concept that is not significant is shown as no finding."""

from __future__ import annotations

import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.concepts_chart import show_results
from xaidash.dashboard.components.concepts_sources import concept_picker
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import require_bundle
from xaidash.data.modalities import modality_of
from xaidash.explainers.concepts.api import DEFAULT_EXAMPLES, DEFAULT_RANDOM_SETS, MAX_RANDOM_SETS, concept_report
from xaidash.explainers.concepts.layers import default_layer, layer_choices
from xaidash.explainers.concepts.sources import MIN_EXAMPLES, list_sources

st.title("Concepts")
st.caption(
    "Testing with concept activation vectors (TCAV): does the model use a human concept, shown by a few examples, "
    "when it predicts a class? The concept is compared with random counter-examples, many times, and kept only "
    "when it differs from what random sets give."
)
run, bundle = require_bundle("test concepts on")
if reason := bundle.no_dataset_reason("TCAV (its random counter-examples and the class's test inputs)"):
    st.info(
        f"{reason} On the command line, `xaidash concepts --random folder:PATH --inputs-from folder:PATH` takes "
        "both from folders instead.",
        icon=":material/info:",
    )
    st.stop()
if not list_sources(bundle.modality):  # no source of concept examples reads this model's inputs
    st.info(
        f"TCAV needs examples of a concept as {bundle.adapter.label}, and no concept source reads "
        f"{bundle.adapter.label} yet: pick a run of a model of "
        f"{', '.join(sorted({modality_of(m).label for s in list_sources() for m in s.modalities}))}.",
        icon=":material/info:",
    )
    st.stop()
key = services.run_key(run)
results_key = f"concepts_report_{key}"

st.subheader("1. Concepts")
concepts = concept_picker(bundle)

st.subheader("2. Class, layers, random sets")
c1, c2 = st.columns(2)
target = c1.selectbox("Class to test", bundle.info.classes, key=f"concepts_class_{key}")
choices = list(layer_choices(bundle))
default = default_layer(bundle)
layers = c2.multiselect(
    "Layers",
    choices,
    default=[default] if default else [],
    key=f"concepts_layers_{key}",
    help="The model's conv/block layers, input to output. The default is the last block whose gradient differs "
    "between inputs (right before global average pooling it does not, and every score is 0 or 1).",
)
c3, c4 = st.columns(2)
random_count = c3.slider("Random sets", 2, MAX_RANDOM_SETS, DEFAULT_RANDOM_SETS, key="concepts_random_sets")
examples = c4.slider(
    "Examples per concept and random set", MIN_EXAMPLES, 200, DEFAULT_EXAMPLES, key="concepts_examples"
)

if st.button("Run TCAV", type="primary", disabled=not concepts or not layers, icon=":material/play_arrow:"):
    bar = st.progress(0.0, text="starting")

    def progress(fraction: float, text: str) -> None:
        bar.progress(min(1.0, fraction), text=text)

    try:
        report = concept_report(
            bundle,
            concepts,
            target,
            layers=layers,
            random_count=random_count,
            examples=examples,
            progress=progress,
        )
        st.session_state[results_key] = report.to_json()
    except Exception as e:  # noqa: BLE001 - shown as a message (show_error folds unexpected ones)
        show_error(e, "TCAV")
    bar.empty()

if results_key in st.session_state:
    show_results(st.session_state[results_key])
