"""Compare's cost, before its button: the metrics offered as checkboxes with their declared cost per input (those
that recompute the method's maps unticked), and the run's expected time (`comparison.estimate`: declared passes
priced by the model's time per row, measured once on a probe batch and cached per model)."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from xaidash.dashboard.components.model_queue import leased_model
from xaidash.data.formatting import duration_text
from xaidash.explainers.comparison.estimate import (
    METRIC_PROBE_INPUTS,
    SANITY_PROBE_INPUTS,
    MethodProbe,
    PassTimes,
    cheapest_method,
    cost_words,
    estimate_compare,
    measure_metric_seconds,
    measure_pass_times,
    probe_method,
)
from xaidash.explainers.metrics.registry import metrics_for
from xaidash.explainers.scoring import metric_meaning
from xaidash.models.bundle import ModelBundle


def metric_choice(bundle: ModelBundle, steps: int) -> list[str]:
    """One checkbox per metric Compare scores that can apply to the model, its declared cost per input beside its
    title; ticked by default unless it recomputes maps (its cost is then a multiple of the slowest method's:
    `MetricSpec.recomputes_maps`)."""
    modality = bundle.modality
    offered = metrics_for("compare", modality, bundle)
    st.markdown(
        "**Metrics** (cost per input beyond its map; unticked by default: those that recompute the method's maps, "
        "whose cost grows with the method's)"
    )
    cols = st.columns(2)  # two to a row: 'ROAD MoRF · 10 forward passes + 10 imputations' is read whole
    chosen = []
    for j, spec in enumerate(offered):
        cost = cost_words(spec, steps)
        ticked = cols[j % 2].checkbox(
            f"{spec.title} · {cost}",
            value=not spec.recomputes_maps,
            key=f"compare_metric_{spec.id}",
            help=f"{metric_meaning(spec.id, modality)} ({spec.better}). Cost per input beyond its map: {cost}.",
        )
        if ticked:
            chosen.append(spec.id)
    return chosen


@st.cache_resource(max_entries=16, show_spinner=False)
def _pass_times(bkey: str, _bundle: ModelBundle) -> PassTimes:
    """The model's time per row, measured once per model on a probe batch of its test split."""
    with leased_model(bkey, _bundle) as replica:
        return measure_pass_times(replica)


@st.cache_resource(max_entries=64, show_spinner=False)
def _probe(
    bkey: str, _bundle: ModelBundle, method: str, params_json: str, sanity_steps: int | None
) -> MethodProbe | None:
    """One method timed once per model, method, parameters and sanity steps (None: it failed: the estimate then
    prices it from its declared passes)."""
    try:
        with leased_model(bkey, _bundle) as replica:
            return probe_method(replica, method, json.loads(params_json), sanity_steps)
    except Exception:  # noqa: BLE001 - the comparison itself reports the method's error
        return None


@st.cache_resource(max_entries=16, show_spinner=False)
def _metric_seconds(bkey: str, _bundle: ModelBundle, method: str, steps: int) -> dict[str, float]:
    """Each metric's seconds per input, timed once per model and curve steps on a probe of its test split (empty
    when the probe fails: the estimate then prices the metrics from their declared rows)."""
    try:
        with leased_model(bkey, _bundle) as replica:
            return measure_metric_seconds(replica, method, steps)
    except Exception:  # noqa: BLE001 - the comparison itself reports a metric's error
        return {}


def expected_time(
    bkey: str,
    bundle: ModelBundle,
    labels: dict[str, str],
    params: dict[str, dict[str, Any]],
    inputs: int,
    *,
    metrics: list[str],
    steps: int,
    sanity: bool,
    sanity_inputs: int,
    sanity_steps: int,
) -> None:
    """The run's expected time before its button (`labels`: the chosen methods' labels by id): the methods' and
    metrics' costs measured on probe inputs (declared passes where a probe fails)."""
    methods = list(labels)
    if not methods or inputs < 1:
        return
    try:
        with st.spinner("Pricing this comparison on a probe batch…"):
            times = _pass_times(bkey, bundle)
            probe = cheapest_method(bundle, methods, times)
            metric_s = _metric_seconds(bkey, bundle, probe, steps) if probe else {}
            probes = {
                m: _probe(
                    bkey, bundle, m, json.dumps(params.get(m, {}), sort_keys=True), sanity_steps if sanity else None
                )
                for m in methods
            }
    except Exception as err:  # noqa: BLE001 - no estimate is better than no page
        st.caption(f"No time estimate: {err}")
        return
    e = estimate_compare(
        bundle,
        methods,
        params,
        inputs,
        times,
        metrics=metrics,
        steps=steps,
        sanity=sanity,
        sanity_inputs=sanity_inputs,
        sanity_steps=sanity_steps,
        probes={m: v for m, v in probes.items() if v is not None},
        metric_seconds=metric_s,
    )
    parts = f"maps {duration_text(e.maps)}, metrics {duration_text(e.metrics)}" + (
        f", sanity check {duration_text(e.sanity)}" if sanity else ""
    )
    missing = (
        " Not counted: " + ", ".join(labels[m] for m in e.unpriced) + " (no declared model passes)."
        if e.unpriced
        else ""
    )
    st.markdown(
        f"Expected time: **about {duration_text(e.seconds)}** ({parts}) for {inputs} inputs × "
        f"{len(methods)} methods.{missing}"
    )
    st.caption(
        f"Priced on {bundle.device}: each method's maps and sanity check timed on {SANITY_PROBE_INPUTS} probe inputs "
        f"(a method that fails there at its declared model passes: {1e3 * times.forward:.2g} ms per forward row, "
        f"{1e3 * times.backward:.2g} ms per forward+backward row here), each metric on {METRIC_PROBE_INPUTS} (a "
        "recomputed map at its method's price); measured once per model and settings and kept."
    )
