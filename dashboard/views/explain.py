"""Explain: inputs, the model's prediction, and several methods' maps (one block per input: the prediction and an
out-of-distribution hint, the maps with colour bars in rows that wrap, one metrics table, the diagnostics), and the
session's report (zip, HTML, JSON) for download.

A short flow of functions: pick the inputs and methods, compute each method (cached), build the report (cached;
explainers/figures/report.py, the same one `xaidash explain` writes), draw its cards, offer its downloads."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.attack_panel import attack_panel
from xaidash.dashboard.components.calibration_view import probability_note, session_temperature, temperature_caption
from xaidash.dashboard.components.charts import forecast_chart, topk_chart
from xaidash.dashboard.components.explain_maps import error_card, map_card, map_display_choice, ood_hint, ood_scores
from xaidash.dashboard.components.explain_tables import diagnostics_table, metrics_legend, metrics_table
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.influence_panel import influence_panel
from xaidash.dashboard.components.inputs import PickedInput, input_picker
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.components.params import param_controls
from xaidash.dashboard.components.report_downloads import report_downloads
from xaidash.dashboard.components.row_inputs import cells_frame
from xaidash.dashboard.components.row_what_if import what_if_panel
from xaidash.dashboard.components.session_results import results_sentence, shown_results, start_results, with_results
from xaidash.dashboard.components.stored_maps import show_stored_sample
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import require_bundle
from xaidash.data.modalities import GroundTruth
from xaidash.explainers import featured_methods, list_methods, methods_for
from xaidash.explainers.figures.predictions import prediction_text, truth_text, verdict_text
from xaidash.explainers.figures.report import TOP_K, ExplainReport, MethodSetting, ReportSettings, session_report
from xaidash.explainers.inputs import TextCoverage, text_coverage
from xaidash.explainers.metrics.deletion import CURVE_STEPS
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.registry import MethodSpec, layer_choices
from xaidash.explainers.scoring import METRICS, unit_words
from xaidash.explainers.session import MethodResult, Scoring, explain_session
from xaidash.models.bundle import ModelBundle
from xaidash.models.runs.store import Run


@dataclass
class Choice:
    """What the controls say: the methods (ids) and their parameters, the target, the scale and the display."""

    methods: list[str]
    specs: dict[str, MethodSpec]
    params: dict[str, dict[str, Any]]
    target_name: str
    target: int | None
    shared: bool
    display: str
    with_metrics: bool

    @property
    def scale_mode(self) -> str:
        return "units" if self.shared else "percentile"

    def method_key(self, m: str) -> tuple[Any, ...]:
        """What one method's maps depend on besides the model and inputs (its cache key)."""
        return (m, json.dumps(self.params.get(m, {}), sort_keys=True, default=str), self.target, self.with_metrics)


def pick_methods(run_id: str, bundle: ModelBundle, by_id: dict[str, MethodSpec]) -> list[str]:
    """The methods multiselect. Each run keeps its own choice (`explain_methods_by_run`), so a text run's methods
    never replace an image run's (which would drop Grad-CAM); a run not seen yet starts from the featured methods.
    The widget state is copied because Streamlit drops the state of widgets not drawn (a visit to another page).
    `explain_methods_kept`, when set (the stored view's Recompute), is a request for the selected run, used once."""
    ids = list(by_id)
    by_run: dict[str, list[str]] = st.session_state.setdefault("explain_methods_by_run", {})
    requested = st.session_state.pop("explain_methods_kept", None)
    stored: list[str] | None
    if requested is not None:
        stored = list(requested)
    elif st.session_state.get("explain_methods_run") == run_id and "explain_methods" in st.session_state:
        stored = list(st.session_state["explain_methods"])  # the widget's own value: same run as the last draw
    else:
        stored = by_run.get(run_id)
    if stored is None or any(m not in ids for m in stored):
        stored = (
            [m for m in (stored or []) if m in ids] or featured_methods(bundle.modality, among=ids, limit=3) or ids[:2]
        )
    st.session_state["explain_methods"] = stored
    st.session_state["explain_methods_run"] = run_id
    chosen = st.multiselect(
        "Methods",
        ids,
        format_func=lambda i: by_id[i].label,
        key="explain_methods",
        help="the methods that apply to this model (each run keeps its own choice)",
    )
    by_run[run_id] = list(chosen)
    return chosen


def controls(run: Run, bundle: ModelBundle) -> Choice:
    """The methods, target, scale, display and metrics controls, and each chosen method's parameters."""
    info = bundle.info
    by_id = {m.id: m for m in methods_for(bundle)}
    with st.container(border=True):
        chosen = pick_methods(run.id, bundle, by_id)
        c2, c4, c3 = st.columns([2, 2, 3])
        if info.regression is not None and info.num_classes > 1:  # a forecast: which step ahead
            target_name = c2.selectbox(
                "Step ahead",
                list(info.classes),
                key=f"explain_target_{info.name}",
                help="the forecast value the maps explain: t+1 is the next step",
            )
        elif info.regression is not None:  # one output: nothing to pick
            target_name = info.regression.name
            c2.markdown(f"**Target:** the predicted {target_name}")
            c2.caption("The model predicts one number: the maps explain it, in its units (no class to pick).")
        else:
            target_name = c2.selectbox(
                "Target class",
                ["predicted class", *info.classes],
                key=f"explain_target_{info.name}",
                help="the class whose evidence the maps show",
            )
        shared = c3.toggle(
            "Shared scale per unit",
            key="explain_shared",
            help="maps of an input whose values are in the same units (e.g. IG, DeepLift and GradientSHAP: logit "
            f"per {unit_words(bundle.modality)[0]}) share one colour scale; a method in units of its own keeps its "
            "own. Off: each map on its own scale, saturating at its 99th percentile of |value|",
        )
        display = map_display_choice(c4, "explain_display", adapter_of(bundle.modality).displays)
        with_metrics = c3.toggle(
            "Quality metrics",
            value=True,
            key="explain_metrics",
            help="deletion/insertion AUC, and pointing game, energy or completeness where they apply",
        )
        unusable = [m for m in list_methods(bundle.modality) if m.id not in by_id]
        if unusable:
            st.caption(
                "Not available for this model: "
                + "; ".join(f"{m.label} ({(m.applies(bundle) or 'not supported').rstrip('.')})" for m in unusable)
            )
        params: dict[str, dict[str, Any]] = {}
        if chosen:
            cols = st.columns(min(3, len(chosen)))
            for j, m in enumerate(chosen):
                with cols[j % len(cols)].expander(f"{by_id[m].label} parameters"):
                    params[m] = param_controls(by_id[m], "explain", layer_choices(bundle))
    named = target_name in info.classes and (info.regression is None or info.num_classes > 1)
    target = list(info.classes).index(target_name) if named and target_name != "predicted class" else None
    return Choice(chosen, by_id, params, str(target_name), target, bool(shared), str(display), bool(with_metrics))


def predict(bkey: str, bundle: ModelBundle, raw: Any) -> np.ndarray:
    """Class probabilities (N, classes) of the inputs (calibrated with the run's temperature when the sidebar's
    switch is on; each input's chart says which, `probability_note`); the page stops with the error when prediction
    fails."""
    t = session_temperature(bundle.run_dir)
    temperature_caption(t)
    try:
        with leased_model(bkey, bundle) as replica:
            return replica.predict_proba(raw, temperature=t).numpy()
    except Exception as err:
        show_error(err, "Prediction failed")
        st.stop()
        raise  # unreachable: st.stop() raises


def truth_of(inputs: list[PickedInput]) -> GroundTruth:
    """The inputs' object masks (when every input has one) and rationales (when any has one), for the metrics."""
    given = [p.mask for p in inputs if p.mask is not None]
    masks = np.stack(given) if len(given) == len(inputs) else None
    rationales = [p.rationale for p in inputs] if any(p.rationale for p in inputs) else None
    return GroundTruth(masks=masks, rationales=rationales)


def explain_all(
    bkey: str, bundle: ModelBundle, raw: Any, inputs: list[PickedInput], choice: Choice
) -> tuple[list[MethodResult], dict[str, BaseException]]:
    """Every chosen method as one session through the same function as `xaidash explain`, cached per method
    (changing one method's parameters recomputes that method only), each computed on a leased replica, with a
    progress bar and a Cancel button; (results, the exceptions of the methods that failed). A method that needs
    background samples gets the default set from `explain` itself.

    A click on Cancel reruns the page, which interrupts the work at the next method (or leaves the queue for the
    model at once); the rerun it causes stops here. Methods finished before the click stay cached."""
    if st.session_state.pop("explain_cancelled", False):
        st.info("Cancelled. Methods finished before the click are kept: press **Explain again** or change a setting.")
        st.button("Explain again", key="explain_again", icon=":material/refresh:")
        st.stop()
    cancel_slot = st.empty()
    cancel_slot.button(
        "Cancel",
        key="explain_cancel",
        icon=":material/cancel:",
        on_click=lambda: st.session_state.update(explain_cancelled=True),
        help="stop after the method being computed (methods already finished are kept)",
    )
    input_keys = tuple(p.key for p in inputs)
    bar = st.progress(0.0, text="Explaining…")
    results = explain_session(
        bundle,
        raw,
        {m: choice.params.get(m, {}) for m in choice.methods},
        target=choice.target,
        scoring=Scoring(page="explain" if choice.with_metrics else None, truth=truth_of(inputs), steps=CURVE_STEPS),
        cache=services.explanation_cache(),
        key=lambda m: (bkey, input_keys, *choice.method_key(m)),
        lease=lambda m: leased_model(bkey, bundle),
        progress=lambda fraction, text: bar.progress(fraction, text=text),
        label=lambda m: choice.specs[m].label,
    )
    bar.empty()
    cancel_slot.empty()
    return results, {r.method: r.exception for r in results if r.exception is not None}


@st.cache_resource(show_spinner=False)
def _reports() -> services.LRUCache:
    return services.LRUCache(8)


def build(
    run: Run,
    bundle: ModelBundle,
    inputs: list[PickedInput],
    probs: np.ndarray,
    results: list[MethodResult],
    choice: Choice,
    ood: list[Any] | None,
    notes: list[str],
) -> ExplainReport:
    """The session's report (every map as a `MapFigure`), cached per model, inputs, methods and display."""
    key = (
        services.run_key(run),
        tuple(p.key for p in inputs),
        probs.tobytes(),  # calibrated or not (the sidebar's switch)
        tuple((*choice.method_key(r.method), r.cached, r.error) for r in results),
        choice.scale_mode,
        choice.display,
        ood is not None,
    )
    settings = ReportSettings(
        methods=[
            MethodSetting(
                r.method,
                choice.specs[r.method].label,
                r.explanation.params if r.explanation is not None else choice.params.get(r.method, {}),
            )
            for r in results
        ],
        target=choice.target,
        target_name=choice.target_name,
        scale_mode=choice.scale_mode,
        display=choice.display,
        metrics=choice.with_metrics,
        steps=CURVE_STEPS if choice.with_metrics else None,
    )
    report, _ = _reports().get_or_compute(
        key,
        lambda: session_report(
            bundle,
            run.id,
            [(p.name, p.raw, p.label) for p in inputs],
            probs,
            results,
            settings,
            ood=ood,
            notes=notes,
            source="Explain page",
            futures=[p.future for p in inputs],
        ),
    )
    return report


def scale_caption(choice: Choice, modality: str) -> None:
    st.caption(
        "**Colour scale:** "
        + (
            "maps in the same units share one scale per input (e.g. IG, DeepLift and GradientSHAP: logit per "
            f"{unit_words(modality)[0]}); "
            "a method in units of its own keeps its own scale, saturating at its 99th percentile of |value|."
            if choice.shared
            else "each map on its own scale, saturating at its 99th percentile of |value| (values beyond get the end "
            "colour)."
        )
        + " Signed maps: red/white/blue around 0; unsigned maps: dark to bright (never red-blue)."
        + (" Overlays are drawn on a grey copy of the input." if choice.display == "overlay" else "")
    )


def series_frame(series: list[list[float]]) -> pd.DataFrame:
    """A series' channels as the columns of a frame indexed by step (one 'value' column for one channel)."""
    names = ["value"] if len(series) == 1 else [f"channel {c + 1}" for c in range(len(series))]
    return pd.DataFrame(dict(zip(names, series, strict=True)))


def input_header(
    report: ExplainReport, i: int, probs: np.ndarray, coverage: TextCoverage | None = None, note: str = ""
) -> None:
    """The input, its name, true and predicted class, the out-of-distribution hint and the top-k chart. A text
    shows only the words the model reads (and says how many of how many: the maps explain those alone); `note`: which
    probabilities the chart shows (plain or calibrated, and how to switch)."""
    inp = report.inputs[i]
    classes, target = report.run.classes, report.run.regression
    top = inp.predictions["A"][0]
    truth = f" · true: **{truth_text(inp.label, classes, target)}**" if inp.label is not None else ""
    if inp.future and target is not None:  # a forecast: what came next, beside the forecast of t+1 below
        truth = f" · true t+1: **{target.value_text(inp.future[0])}**"
    mark = verdict_text(top, inp.label, target)
    with st.container(horizontal=True, gap="medium"):
        if inp.image is not None:
            st.image(to_pil(inp.image, 224), width=200)
        ahead = inp.predictions["A"]
        if inp.series is not None and target is not None and len(ahead) > 1:  # a forecast: history and steps ahead
            with st.container(width=560):
                title = target.name + (f" ({target.unit})" if target.unit else "")
                forecast = [float(p.value or 0.0) for p in ahead]
                chart = forecast_chart(inp.series[0], forecast, title, truth=inp.future)
                st.altair_chart(chart, width="stretch")
        elif inp.series is not None:  # a series: its channels as lines over the steps
            st.line_chart(series_frame(inp.series), width=320, height=180)
        with st.container(width=300 if target is None else 640):  # no class chart beside a value
            if inp.text is not None and not inp.cells:  # a row's values are the table below
                cut = coverage is not None and coverage.truncated
                st.markdown(f"> {coverage.read_text(inp.text) if coverage else inp.text}{' …' if cut else ''}")
                if coverage is not None and cut:
                    st.warning(coverage.sentence(), icon=":material/content_cut:")
            shown = f"**{prediction_text(top, target)}**" if target else f"**{top.name}** ({top.probability or 0:.0%})"
            st.markdown(f"**{inp.name}**{truth} · predicted: {shown}{mark}")
            ood_hint(inp.ood)
        if target is None:  # a number to predict has no classes to chart: its value is the line above
            with st.container(width=300):
                label = None if inp.label is None else int(inp.label)
                st.altair_chart(topk_chart(probs, classes, TOP_K, label), width="stretch")
                if note:
                    st.caption(note)
    if inp.cells:  # a row of values: its values, in the columns' units
        st.dataframe(cells_frame(inp.cells), hide_index=True, width="stretch", key=f"explain_row_{i}")


def input_tables(report: ExplainReport, i: int, with_metrics: bool) -> None:
    """One metrics table for the input, and the diagnostics behind a details panel."""
    done = [e for e in report.for_input(i) if e.figure is not None]
    values = {e.label: e.metrics for e in done}
    if with_metrics and any(values.values()):
        st.dataframe(metrics_table(values, METRICS), width="stretch", key=f"explain_metrics_table_{i}")
        st.caption(metrics_legend(report.modality, CURVE_STEPS, report.run.regression is not None))
    diagnostics = {e.label: e.diagnostics for e in done}
    notes = {
        e.label: [f"{k}: not computed ({msg})" for k, msg in e.metric_errors.items()] for e in done if e.metric_errors
    }
    if any(diagnostics.values()) or notes:
        with st.expander("Details: diagnostics", icon=":material/info:"):
            st.dataframe(diagnostics_table(diagnostics, notes), hide_index=True, width="stretch")


def input_block(
    report: ExplainReport,
    i: int,
    probs: np.ndarray,
    choice: Choice,
    failures: dict,
    coverage: TextCoverage | None = None,
    note: str = "",
) -> None:
    """Per input: the header, the map cards (rows that wrap), the tables."""
    with st.container(border=True):
        input_header(report, i, probs, coverage, note)
        with st.container(horizontal=True, gap="small"):
            for e in report.for_input(i):
                if e.figure is None:
                    error_card(e.label, failures.get(e.method) or e.error)
                else:
                    map_card(e.figure, key=f"explain_card_{i}_{e.method}")
        input_tables(report, i, choice.with_metrics)
        what_if_panel(report, i, choice)
        attack_panel(report, i, choice)
        influence_panel(report, i, choice.target)


def main() -> None:
    st.title("Explain")
    run, bundle = require_bundle("explain")
    bkey = services.run_key(run)
    st.caption(f"Run `{run.id}`: **{bundle.spec.name}** on **{bundle.info.name}**, on {bundle.device}.")
    if show_stored_sample(run, bundle):  # ?stored=SPLIT:INDEX (a click in Compare's data-set report): stored maps
        st.stop()
    with st.container(border=True):
        inputs = input_picker(bundle, "explain", bundle_key=bkey)
    choice = controls(run, bundle)  # drawn even without inputs so a choice survives switching the input source
    if not inputs:
        st.stop()
    if not choice.methods:
        st.info("Pick at least one method.")
        st.stop()
    raw = bundle.adapter.batch([p.raw for p in inputs])
    probs = predict(bkey, bundle, raw)
    note = probability_note(run, session_temperature(bundle.run_dir))
    results, failures = explain_all(bkey, bundle, raw, inputs, choice)
    with leased_model(bkey, bundle) as replica:
        ood, ood_reason = ood_scores(replica, bkey, raw)
    # How much of each text the model reads: said on the page and in the report's notes.
    coverage = [text_coverage(bundle, p.raw) if isinstance(p.raw, str) else None for p in inputs]
    notes = [f"{p.name}: {c.sentence()}" for p, c in zip(inputs, coverage, strict=True) if c and c.truncated]
    report = build(run, bundle, inputs, probs, results, choice, ood, ([ood_reason] if ood_reason else []) + notes)
    scale_caption(choice, bundle.modality)
    if ood_reason:
        st.caption(ood_reason)
    start_results()  # the panels below register what they show, for the downloads
    for i in range(len(inputs)):
        input_block(report, i, probs[i], choice, failures, coverage[i], note)
    parts = shown_results()
    report_downloads(lambda: with_results(report, parts), "explain", "explanations", results_sentence(parts))


main()
