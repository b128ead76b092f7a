"""Compare: every chosen method on a sample of the test split, scored, with agreement and sanity checks; or the
report on a whole data set explained beforehand (a run's attribution store)."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.charts import matrix_heatmap
from xaidash.dashboard.components.compare_cost import expected_time, metric_choice
from xaidash.dashboard.components.dataset_report import VIEW_KEY, VIEWS, dataset_report
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.inputs import stop_without_dataset
from xaidash.dashboard.components.inside_compare import (
    metric_spread_charts,
    metrics_table,
    sanity_band_chart,
    sanity_table,
)
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.components.params import param_controls
from xaidash.dashboard.components.ranking_view import ranking_view
from xaidash.dashboard.components.report_downloads import report_downloads
from xaidash.dashboard.components.row_inputs import with_sparklines
from xaidash.dashboard.components.scene_compare import scene_compare_view
from xaidash.dashboard.components.scene_run_choice import scene_view_chosen
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import require_bundle
from xaidash.data.modalities import modality_of
from xaidash.explainers import featured_methods, methods_for
from xaidash.explainers.comparison.compare import (
    SANITY_MAP_PX,
    Comparison,
    compare_methods,
    comparison_report,
    metric_range,
    sanity_figure,
    sanity_tokens_html,
)
from xaidash.explainers.params import ExplainError
from xaidash.explainers.perturbation_curves import CURVE_STEPS
from xaidash.explainers.registry import MethodSpec, layer_choices
from xaidash.explainers.samples import pick_test_sample
from xaidash.explainers.scoring import METRICS, curves_legend, metric_meaning, unit_words
from xaidash.models.bundle import ModelBundle
from xaidash.models.runs.store import Run

# Inputs by default: enough that the sanity check's mean correlation moves little between random draws
# (resnet_small on shapes, six draws: Grad-CAM after the first randomised layer from -0.82 to 0.69 with the
# sanity check on 2 inputs, from -0.24 to 0.17 on 16; see the README), while the default run stays about a
# minute on a 2-core CPU (38 to 65 s measured under load; docs/dashboard.md, bench/compare_estimate.py).
DEFAULT_INPUTS = 16
DEFAULT_SANITY_STEPS = 3
# Ground-truth metrics noted under the metrics table, in its order; a hit metric is 1 or 0 per input, its mean a share.
GROUND_TRUTH_METRICS = ("pointing_game", "energy_in_mask", "rationale_pointing", "rationale_energy")
HIT_METRICS = frozenset({"pointing_game", "rationale_pointing"})


@dataclass
class Settings:
    """What the controls say: the methods and their parameters, the sample, the metrics' steps, the sanity check,
    and whether Compare was pressed in this run of the page."""

    methods: list[str]
    params: dict[str, dict[str, Any]]
    how: str
    n: int
    seed: int
    indices_text: str
    steps: int
    sanity: bool
    sanity_inputs: int
    sanity_steps: int
    metrics: list[str]
    go: bool

    def cache_key(self, bkey: str) -> tuple[Any, ...]:
        """What the comparison depends on besides the model (the run's key): its cache key."""
        return (
            bkey,
            self.how,
            self.n,
            self.seed,
            self.indices_text,
            tuple(self.methods),
            json.dumps(self.params, sort_keys=True, default=str),
            self.steps,
            self.sanity,
            self.sanity_inputs,
            self.sanity_steps,
            tuple(self.metrics),
        )

    def report_settings(self) -> dict[str, str]:
        """The settings the report states."""
        sample_text = (
            f"random sample of {self.n} test inputs (seed {self.seed})"
            if self.how == "random sample"
            else self.indices_text
        )
        return {
            "inputs": sample_text,
            "sanity check": "on" if self.sanity else "off",
            "metrics": ", ".join(METRICS[m][0] for m in self.metrics if m in METRICS) or "none",
        }

    @property
    def inputs(self) -> int:
        """How many inputs the run explains (the chosen indices counted; unparseable ones count as none)."""
        if self.how == "random sample":
            return self.n
        try:
            return len(parse_indices(self.indices_text))
        except ExplainError:
            return 0


def header() -> tuple[Run, ModelBundle]:
    """The run; the page stops without a model, or without the test split it scores on."""
    run, bundle = require_bundle("compare")
    stop_without_dataset(bundle, "Compare, which scores methods on test samples,")
    st.caption(
        f"Run `{run.id}`: **{bundle.spec.name}** on **{bundle.info.name}**, on {bundle.device}. "
        + (
            "Targets are the predicted classes."
            if bundle.regression is None
            else f"Target: the predicted {bundle.regression.name} (the model's one output, in its units)."
        )
    )
    return run, bundle


def whole_data_set_view(run: Run, bundle: ModelBundle) -> None:
    """Two views: methods compared live on a sample of inputs, or the report on a whole data set explained
    beforehand (`xaidash explain --input dataset:all`); ?compare_view=Whole+data+set in the address opens the
    second, which is drawn here and ends the page."""
    view = st.segmented_control(
        "View", VIEWS, default=VIEWS[0], required=True, key=VIEW_KEY, bind="query-params", label_visibility="collapsed"
    )
    if view == VIEWS[1]:
        dataset_report(run, bundle)
        st.stop()


def pick_methods(bundle: ModelBundle, by_id: dict[str, MethodSpec]) -> list[str]:
    """The methods multiselect: defaults on first use or after a change of run; the choice survives visits to
    other pages."""
    stored = st.session_state.get("compare_methods", st.session_state.get("compare_methods_kept"))
    if stored is None or any(m not in by_id for m in stored):  # first use, or another run was selected
        stored = (
            [m for m in (stored or []) if m in by_id]
            or featured_methods(bundle.modality, among=by_id, limit=4)
            or list(by_id)[:2]
        )
    st.session_state["compare_methods"] = stored
    methods = st.multiselect("Methods", list(by_id), format_func=lambda i: by_id[i].label, key="compare_methods")
    st.session_state["compare_methods_kept"] = methods  # survives visits to other pages
    return methods


def sample_controls() -> tuple[str, int, int, str]:
    """(how, n, seed, indices text): a random sample of the test split, or chosen indices."""
    c1, c2, c3 = st.columns([2, 1, 1], vertical_alignment="bottom")
    how = c1.radio(
        "Inputs from the test split", ["random sample", "chosen indices"], horizontal=True, key="compare_how"
    )
    if how == "random sample":
        n = c2.number_input("How many", 1, 256, DEFAULT_INPUTS, key="compare_n")
        seed = c3.number_input("Seed", 0, 2**31 - 1, 0, key="compare_seed")
        indices_text = ""
    else:
        indices_text = c2.text_input("Test indices (comma separated)", "0, 1, 2, 3", key="compare_indices")
        n, seed = 0, 0
    return str(how), int(n), int(seed), indices_text


def check_controls() -> tuple[int, bool, int, int]:
    """(deletion/insertion steps, sanity check on, its inputs, its steps)."""
    s1, s2, s3, s4 = st.columns(4)
    steps = s1.slider(
        "Deletion/insertion steps",
        4,
        64,
        CURVE_STEPS,
        key="compare_steps",
        help=f"{CURVE_STEPS} on the Explain page and in `xaidash explain`: keep it to compare AUCs with theirs",
    )
    sanity = s2.toggle(
        "Sanity check",
        value=True,
        key="compare_sanity",
        help="cascading randomisation of the model's layers (Adebayo et al. 2018): good maps change",
    )
    sanity_inputs = s3.number_input(
        "Sanity check inputs",
        1,
        256,
        DEFAULT_INPUTS,
        key="compare_sanity_inputs",
        disabled=not sanity,
        help="the first inputs of the sample (at most all of them; then the trained model's maps are reused). "
        "With 2 inputs the correlation swings widely between random draws.",
    )
    sanity_steps = s4.number_input(
        "Sanity check steps", 1, 12, DEFAULT_SANITY_STEPS, key="compare_sanity_steps", disabled=not sanity
    )
    return int(steps), bool(sanity), int(sanity_inputs), int(sanity_steps)


def method_params(bundle: ModelBundle, by_id: dict[str, MethodSpec], methods: list[str]) -> dict[str, dict[str, Any]]:
    """Each chosen method's parameters, in expanders three to a row."""
    params = {}
    if methods:
        cols = st.columns(min(3, len(methods)))
        for j, m in enumerate(methods):
            with cols[j % len(cols)].expander(f"{by_id[m].label} parameters"):
                params[m] = param_controls(by_id[m], "compare", layer_choices(bundle))
    return params


def controls(bkey: str, bundle: ModelBundle, by_id: dict[str, MethodSpec]) -> Settings:
    """The controls, the expected time and the Compare button; the page stops when no method is picked."""
    with st.container(border=True):
        methods = pick_methods(bundle, by_id)
        how, n, seed, indices_text = sample_controls()
        steps, sanity, sanity_inputs, sanity_steps = check_controls()
        metrics = metric_choice(bundle, steps)
        params = method_params(bundle, by_id, methods)
        settings = Settings(
            methods, params, how, n, seed, indices_text, steps, sanity, sanity_inputs, sanity_steps, metrics, False
        )
        expected_time(
            bkey,
            bundle,
            {m: by_id[m].label for m in methods},
            params,
            settings.inputs,
            metrics=metrics,
            steps=steps,
            sanity=sanity,
            sanity_inputs=sanity_inputs,
            sanity_steps=sanity_steps,
        )
        settings.go = st.button(
            "Compare", type="primary", icon=":material/play_arrow:", disabled=not methods, key="compare_go"
        )
    if not methods:
        st.info("Pick at least one method.")
        st.stop()
    return settings


def parse_indices(text: str) -> list[int]:
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise ExplainError(f"Test indices must be whole numbers separated by commas, got {text!r}.") from None


def compute(bkey: str, bundle: ModelBundle, settings: Settings) -> Comparison:
    """The comparison, with a progress bar; the page stops with the error when it fails."""
    bar = st.progress(0.0, text="Preparing the sample…")

    def show_progress(fraction: float, message: str) -> None:
        bar.progress(fraction, text=message)

    try:
        indices = parse_indices(settings.indices_text) if settings.how == "chosen indices" else None
        sample = pick_test_sample(bundle, n=settings.n, seed=settings.seed, indices=indices)
        with leased_model(bkey, bundle) as replica:
            result = compare_methods(
                replica,
                sample,
                settings.methods,
                params=settings.params,
                steps=settings.steps,
                sanity=settings.sanity,
                sanity_inputs=settings.sanity_inputs,
                sanity_steps=settings.sanity_steps,
                progress=show_progress,
                metrics=settings.metrics,
            )
    except Exception as err:  # noqa: BLE001
        bar.empty()
        show_error(err, "Comparison failed")
        st.stop()
    bar.empty()
    return result


def comparison(bkey: str, bundle: ModelBundle, settings: Settings) -> Comparison:
    """The comparison kept for these settings, or computed on a press of Compare (kept per run and settings); the
    page stops with a hint until there is one."""
    key = settings.cache_key(bkey)
    cache = services.comparison_cache()
    result: Comparison | None = cache.get(key)
    if settings.go and result is None:
        result = compute(bkey, bundle, settings)
        cache.put(key, result)
    if result is None:
        st.info("Set the sample and methods, then press **Compare**. Results are kept per run and settings.")
        st.stop()
    return result


def result_caption(result: Comparison, go: bool) -> None:
    """The sample's size, the time it took, and the methods' errors."""
    st.caption(
        f"{len(result.sample)} inputs × {len(result.explanations)} methods in {result.seconds:.1f} s"
        + (" (cached)" if not go else "")
    )
    for what, msg in result.errors.items():
        st.warning(f"{what}: {msg}", icon=":material/warning:")


def metric_notes(result: Comparison, n_inputs: int, shown: list[str], modality: str, regression: bool = False) -> str:
    """The caption under the metrics table: what the numbers are, and what each metric shown means, worded for the
    run's `modality` (`scoring.metric_meaning`, `curves_legend`: words for text, pixels for images)."""
    notes = [
        f"Mean over the {n_inputs} inputs ± half the width of its 95% confidence interval (t); ★ and green: the best "
        'mean per metric (↑ higher is better, ↓ lower is better); "(of k)": only k inputs had a value.'
    ]
    if any(c in result.metrics for c in ("deletion_auc", "insertion_auc")):
        notes.append(curves_legend(modality, result.steps, regression))
    units = unit_words(modality)[1]
    for metric in GROUND_TRUTH_METRICS:
        if metric in result.metrics:
            meaning = metric_meaning(metric, modality)
            if metric in HIT_METRICS:
                meaning = f"share of inputs for which {meaning.removeprefix('whether ')} (tied {units} share the hit)"
            notes.append(f"{METRICS[metric][0]}: {meaning}.")
    if "completeness_gap" in result.metrics:
        notes.append(
            f"Completeness gap: {metric_meaning('completeness_gap', modality)}, for path and SHAP methods (0 is "
            'exact); "n/a: no declared total": the method does not say what its attributions add up to, so there is '
            "no gap to measure."
        )
    constant_total = sum(result.constant_maps.values())
    notes.append(
        f"Constant maps: maps with a single value, which rank nothing; {constant_total} of "
        f"{n_inputs * len(shown)} here" + (" (they are kept in the scores, not dropped)." if constant_total else ".")
    )
    return " ".join(notes)


def metrics_section(result: Comparison, labels: dict[str, str], modality: str, regression: bool = False) -> None:
    """The methods x metrics table and the per-input spread charts; the page stops when no method produced maps."""
    st.subheader("Metrics")
    if result.metrics.empty:
        st.error("No method produced an explanation; see the messages above.")
        st.stop()
    shown = list(result.metrics.index)
    n_inputs = len(result.sample)
    summary = result.summary if result.summary is not None else pd.DataFrame(columns=["method", "metric", "mean"])
    text, style = metrics_table(
        summary, shown, list(result.metrics.columns), METRICS, result.best, labels, result.constant_maps, n_inputs
    )
    # Metrics as rows, methods as columns: a dozen metric columns ran past a 1440 px window, a few methods fit.
    text, style = text.T, style.T
    text.index.name = style.index.name = "metric"
    st.dataframe(
        text.style.apply(lambda _: style, axis=None),
        width="stretch",
        height=35 * (len(text) + 1) + 3,
    )
    st.caption(metric_notes(result, n_inputs, shown, modality, regression))
    ranges = {c: metric_range(c) for c in result.metrics.columns}
    charts = metric_spread_charts(result.per_input, summary, METRICS, labels, shown, ranges)
    st.caption("In the charts: each faint dot is one input, the tick the mean, the bar its 95% confidence interval.")
    for start in range(0, len(charts), 2):
        for col, chart in zip(st.columns(2), charts[start : start + 2], strict=False):  # the last row may be short
            col.altair_chart(chart, width="stretch")


def agreement_section(result: Comparison, labels: dict[str, str]) -> None:
    """The rank correlation between the methods' maps."""
    st.subheader("Agreement")
    if result.agreement is not None:
        st.altair_chart(
            matrix_heatmap(
                result.agreement.rename(index=labels, columns=labels),
                "Rank correlation of |attributions| between methods",
            ),
            width="content",
        )
    else:
        st.caption("Agreement needs at least two methods.")


def sanity_caption(rows: list[dict[str, Any]]) -> None:
    n_sanity = int(rows[0].get("n", 0))
    constant_sanity = sum(int(r.get("constant", 0)) for r in rows if r["step"] > 0)
    st.caption(
        "Maps of a model whose layers are re-initialised from the output down should change: a method whose "
        f"correlation with the trained model's maps stays high is not explaining the model. On {n_sanity} inputs; "
        "line: mean Spearman ρ over the inputs; band: its 95% confidence interval (the table gives the range "
        "[min, max] over the inputs). A map that becomes constant has no correlation: "
        + (
            f"{constant_sanity} randomised maps did, counted in the table and left out of the mean."
            if constant_sanity
            else "none did."
        )
    )


def sanity_chart(rows: list[dict[str, Any]], labels: dict[str, str], shown: list[str]) -> None:
    """The correlation with the trained model's maps per randomisation step, with the band picked, and the table."""
    band = st.radio(
        "Band",
        ["95% interval of the mean", "min–max over the inputs"],
        horizontal=True,
        key="compare_sanity_band",
        label_visibility="collapsed",
    )
    st.altair_chart(
        sanity_band_chart(
            [{**r, "method": labels.get(r["method"], r["method"])} for r in rows],
            methods=[labels.get(m, m) for m in shown],
            band="ci" if band.startswith("95") else "range",
        ),
        width="stretch",
    )
    st.dataframe(sanity_table(rows, labels), width="stretch")


def sanity_maps(result: Comparison, by_id: dict[str, MethodSpec], modality: str) -> None:
    """Per method, the first input and its map from the trained model through each randomisation step, each map
    with its colour bar (over a grey copy of the input, as on Explain)."""
    s = result.sanity
    frame = pd.DataFrame(s.rows)
    first_input = result.sample.raw[0]
    pictured = modality_of(modality).pictured  # the input shown first, each map over it; else each map's words
    for m, maps in s.maps.items():
        steps_of = frame[frame.method == m].sort_values("step")
        st.markdown(f"**{by_id[m].label if m in by_id else m}**: first input, trained → randomised")
        cols = st.columns(len(maps) + (1 if pictured else 0))
        if pictured:
            picture = to_pil(first_input, SANITY_MAP_PX)
            cols[0].image(picture, caption="input", width=picture.width)
            cols = cols[1:]
        for k, (col, a) in enumerate(zip(cols, maps, strict=True)):
            step = steps_of.iloc[k] if k < len(steps_of) else None
            first = np.asarray(a[0])
            caption = "trained" if k == 0 else (f"up to {step['layer']}" if step is not None else f"step {k}")
            if k and step is not None:
                rho = (step.get("values") or [float("nan")])[0]
                caption += " · constant map: no ρ" if np.ptp(first) == 0 or np.isnan(rho) else f" · ρ={rho:.2f}"
            if pictured:
                figure = sanity_figure(first, image=first_input)
                col.image(figure, caption=caption, width=figure.width)  # its own size: the bar's text stays 13 px
            else:
                col.caption(caption)
                tokens = result.explanations[m].tokens
                words = tokens[0] if tokens and len(tokens[0]) == len(first) else [str(j) for j in range(len(first))]
                col.markdown(sanity_tokens_html(first, words), unsafe_allow_html=True)


def sanity_section(result: Comparison, labels: dict[str, str], by_id: dict[str, MethodSpec], modality: str) -> None:
    """The cascading randomisation: its caption, chart, table and maps."""
    st.subheader("Sanity check")
    s = result.sanity
    if s is None:
        st.caption("Turned off.")
    elif not s.rows:
        st.warning("The sanity check produced no results.")
    else:
        sanity_caption(s.rows)
        sanity_chart(s.rows, labels, list(result.metrics.index))
        sanity_maps(result, by_id, modality)


def inputs_expander(result: Comparison, bundle: ModelBundle) -> None:
    """The sample's inputs with their indices and classes."""
    smp = result.sample
    names = [bundle.info.classes[lab] for lab in smp.labels]  # type: ignore[index]  # test samples are labelled
    with st.expander("The inputs"):
        if bundle.adapter.pictured:
            cols = st.columns(8)
            for j, (i, name) in enumerate(zip(smp.indices, names, strict=True)):
                cols[j % 8].image(to_pil(smp.raw[j], 64), caption=f"#{i} {name}", width="stretch")
        else:  # texts, series: one line each (a series also as a small line)
            adapter, raws = bundle.adapter, list(smp.raw)
            frame = pd.DataFrame(
                {"index": smp.indices, adapter.sample: [adapter.one_line(r, bundle.info) for r in raws], "label": names}
            )
            st.dataframe(frame, hide_index=True, column_config=with_sparklines(frame, adapter, raws))


def main() -> None:
    st.title("Compare")
    if scene_view_chosen("compare"):  # detectors and segmenters: methods per box or region over test scenes
        scene_compare_view()
        return
    run, bundle = header()
    bkey = services.run_key(run)
    whole_data_set_view(run, bundle)
    by_id = {m.id: m for m in methods_for(bundle)}
    settings = controls(bkey, bundle, by_id)
    result = comparison(bkey, bundle, settings)
    labels = {m: by_id[m].label if m in by_id else m for m in result.methods}
    result_caption(result, settings.go)
    metrics_section(result, labels, bundle.modality, bundle.regression is not None)
    ranking_view(result, labels, bundle.modality)
    agreement_section(result, labels)
    sanity_section(result, labels, by_id, bundle.modality)
    inputs_expander(result, bundle)
    report = functools.partial(comparison_report, bundle, run.id, result, settings.report_settings())
    report_downloads(report, "compare", "comparison")


main()
