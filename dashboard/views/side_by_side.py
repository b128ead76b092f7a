"""Side by side: the sidebar's run (model A) beside a second model that takes the same input (another run, or
this run at an earlier epoch): both models' predictions and the same methods' maps for the same inputs, one row
per (input, method), where they disagree highlighted."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.charts import topk_chart
from xaidash.dashboard.components.explain_maps import map_card
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.inputs import _pick_key, input_picker
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.components.report_downloads import report_downloads
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import require_bundle, run_label
from xaidash.explainers.comparison.side_by_side import (
    ModelChoice,
    PairExplanation,
    common_methods,
    disagreements,
    explain_one,
    input_spec,
    load_choice,
    pair_report,
    partners,
    row_scale,
    split_predictions,
    top_classes,
)
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.figures.render import map_legend
from xaidash.explainers.figures.report import ExplainReport, RunInfo
from xaidash.explainers.inputs import batch_inputs
from xaidash.explainers.registry import MethodSpec, featured_methods
from xaidash.models.bundle import ModelBundle
from xaidash.models.runs.store import Run

KEY = "sbs"
MAX_INPUTS = 4
OWN_PREDICTION = "own prediction"
SHARED, PER_MODEL = "shared where the units match", "per model"
MAP_PX = 320  # small maps are enlarged by a whole factor (nearest neighbour) until they are at least this wide
MAP_SHOWN_PX = 400  # drawn at most this wide (narrower when the column is), two maps a row: over 200 px at 1024 px
INPUT_PX = 112


@st.cache_resource(max_entries=3, show_spinner=False)
def _bundle_at_epoch(key: str, path: str, epoch: int) -> ModelBundle:
    return load_choice(ModelChoice(Run(Path(path)), epoch))


@st.cache_data(max_entries=8, show_spinner=False)
def _test_predictions_of_b(key: str, dataset: str, _bundle: ModelBundle) -> np.ndarray:
    """Model B's probabilities on model A's test split (B may have no data set of its own), as the gallery's."""
    with services.lease(key, _bundle) as bundle:
        return split_predictions(bundle, services.dataset_split(dataset, "test"), services.GALLERY_LIMIT)


def choice_label(c: ModelChoice) -> str:
    if c.epoch is not None:
        return f"this run at epoch {c.epoch}" + (f" · {c.note}" if c.note else "")
    return f"{run_label(c.run)} · {c.run.id}"


def explained(
    bundle: ModelBundle, model_key: str, raw: Any, input_keys: tuple[str, ...], method: str, target: int | None
) -> tuple[Explanation | None, BaseException | None]:
    """(Explanation or None, error or None), cached for every session per model, inputs, method and target."""
    cache = services.explanation_cache()
    key = ("side_by_side", model_key, input_keys, method, target)

    def compute() -> Explanation:
        with leased_model(model_key, bundle) as replica:
            return explain_one(replica, raw, method, target)

    try:
        value, _ = cache.get_or_compute(key, compute)
        return value, None
    except Exception as err:  # noqa: BLE001 - one model failing must not hide the other's maps
        return None, err


st.title("Side by side")
run, bundle_a = require_bundle("compare with another model")
key_a = services.run_key(run)
info = bundle_a.info
spec_a = input_spec(run)

# ---- model B -----------------------------------------------------------------------------------------
found = partners(run)
choices = found.choices
with st.container(border=True):
    st.markdown(f"**Model A** (the sidebar's run): {run_label(run)} · `{run.id}`, takes {spec_a.describe()}.")
    if not choices:
        st.info(
            f"No other model takes {spec_a.describe()}: train another model on {spec_a.dataset or 'the same input'} "
            "(or let this run save more than one epoch) to compare two models here.",
            icon=":material/info:",
        )
    else:
        by_key = {c.key: c for c in choices}
        pick = st.selectbox(
            "Model B",
            list(by_key),
            format_func=lambda k: choice_label(by_key[k]),
            key=f"{KEY}_b_{run.id}",
            help="other runs that take the same input, and this run's weights after earlier epochs",
        )
        choice_b = by_key[str(pick)]
    if found.incompatible:
        with st.expander(f"{len(found.incompatible)} other run(s) cannot be compared with this one"):
            for r, why in found.incompatible:
                st.markdown(f"- {run_label(r)} · `{r.id}` {why}.")
            can = [choice_label(c) for c in found.runs]
            st.caption("Runs that can: " + ("; ".join(can) if can else "none yet") + ".")
if not choices:
    st.stop()

if choice_b.epoch is None:
    key_b = services.run_key(choice_b.run)
    load_b = functools.partial(services.bundle_for, choice_b.run)
else:
    key_b = f"{services.run_key(choice_b.run)}#epoch{choice_b.epoch}"
    load_b = functools.partial(_bundle_at_epoch, key_b, str(choice_b.run.path), choice_b.epoch)
try:
    with st.spinner("Loading model B…"):
        bundle_b = load_b()
except Exception as e:  # noqa: BLE001 - shown with its cause; the page stops here
    show_error(e, "Could not load model B")
    st.stop()
name_a = bundle_a.spec.name
name_b = bundle_b.spec.name + (f" at epoch {choice_b.epoch}" if choice_b.epoch is not None else "")
if name_a == name_b:
    name_b += " (other run)"

# ---- agreement on the test split ------------------------------------------------------------------
if bundle_a.has_dataset:
    try:
        with st.spinner("Predicting the test split with both models…"):
            probs_a_test = services.test_predictions(key_a, bundle_a)
            probs_b_test = _test_predictions_of_b(key_b, info.name, bundle_b)
        labels_test = services.dataset_split(info.name, "test").labels[: len(probs_a_test)].numpy()
        differ = np.flatnonzero(disagreements(probs_a_test, probs_b_test)).tolist()
        acc_a = float((probs_a_test.argmax(1) == labels_test).mean())
        acc_b = float((probs_b_test.argmax(1) == labels_test).mean())

        def pick_disagreements() -> None:  # before the picker is drawn: the gallery's own state keys
            st.session_state[f"{KEY}_source"] = "Test set"
            st.session_state[f"{KEY}_classes_{info.name}"] = []
            st.session_state[f"{KEY}_show"] = "all"
            key = _pick_key(KEY, info.name, [], "all")
            shown = [i for i in st.session_state.get(key) or [] if i in differ]
            start = differ.index(shown[-1]) + 1 if shown else 0  # each click: the next ones, then from the start
            st.session_state[key] = (differ[start:] if start < len(differ) else differ)[:MAX_INPUTS]

        st.markdown(
            f"On the first {len(labels_test)} test samples: **A** {name_a} {acc_a:.1%} correct, "
            f"**B** {name_b} {acc_b:.1%} correct; they predict different classes for "
            f"**{len(differ)}** ({len(differ) / max(1, len(labels_test)):.1%})."
        )
        st.button(
            "Show disagreements",
            key=f"{KEY}_disagree",
            on_click=pick_disagreements,
            disabled=not differ,
            help=f"pick {MAX_INPUTS} test samples on which the models predict different classes (the next ones on "
            "each click)",
        )
    except Exception as e:  # noqa: BLE001 - the inputs below still work
        show_error(e, "Could not compare the models on the test split")

# ---- methods and inputs ------------------------------------------------------------------------------
common, skipped = common_methods(bundle_a, bundle_b)
ids = [m.id for m in common]
by_id: dict[str, MethodSpec] = {m.id: m for m in common}
with st.container(border=True):
    if not ids:
        st.warning("No explanation method applies to both models.")
        st.stop()
    methods_key = f"{KEY}_methods_{bundle_a.modality}"
    stored = st.session_state.get(methods_key, st.session_state.get(f"{methods_key}_kept"))
    if stored is None or any(m not in ids for m in stored):
        stored = (
            [m for m in (stored or []) if m in ids]
            or featured_methods(bundle_a.modality, among=ids, limit=2)
            or ids[:1]
        )
    st.session_state[methods_key] = stored
    chosen = st.multiselect(
        "Methods", ids, format_func=lambda i: by_id[i].label, key=methods_key, help="the methods that apply to both"
    )
    st.session_state[f"{methods_key}_kept"] = chosen
    c1, c2, c3 = st.columns(3)
    target_name = c1.selectbox(
        "Target class",
        [OWN_PREDICTION, *info.classes],
        key=f"{KEY}_target_{info.name}",
        help="the class whose evidence the maps show: each model's own predicted class, or one class for both models",
    )
    scale_mode = c2.radio(
        "Colour scale",
        [SHARED, PER_MODEL],
        key=f"{KEY}_scale",
        help="shared: model A's and model B's map of one input and method on one scale when the method's values "
        "are in the same units for both (e.g. logit contribution per pixel, attention weight); maps in relative "
        "units (the CAM family, guided backprop) always get one scale per model",
    )
    display = "tokens"
    if bundle_a.modality == "image":
        display = c3.radio(
            "Show maps as",
            ["overlay", "heatmap"],
            horizontal=True,
            key=f"{KEY}_display",
            help="overlay: the map over a grey copy of the input (opacity grows with |value|); heatmap: the map alone",
        )
    if skipped:
        st.caption("Not available for both models: " + "; ".join(f"{label} ({why})" for label, why in skipped.items()))
    st.caption(
        "Every method runs with its default parameters, the same for both models. [Jump to the results ↓](#results)"
    )
with st.container(border=True):
    inputs = input_picker(bundle_a, KEY, bundle_key=key_a, max_inputs=MAX_INPUTS)
    if bundle_a.has_dataset:
        st.caption("The gallery's ✓/✗ and filters are model A's predictions.")
if not inputs:
    st.stop()
if not chosen:
    st.info("Pick at least one method.")
    st.stop()

# ---- predictions and maps ---------------------------------------------------------------------------------
raw = batch_inputs([p.raw for p in inputs])
try:
    with leased_model(key_a, bundle_a) as replica_a:
        probs_a = replica_a.predict_proba(raw).numpy()
    with leased_model(key_b, bundle_b) as replica_b:
        probs_b = replica_b.predict_proba(raw).numpy()
except Exception as err:  # noqa: BLE001
    show_error(err, "Prediction failed")
    st.stop()
target = None if target_name == OWN_PREDICTION else list(info.classes).index(target_name)
differ_here = disagreements(probs_a, probs_b)
input_keys = tuple(p.key for p in inputs)
results: dict[str, dict[str, tuple[Explanation | None, BaseException | None]]] = {}
bar = st.progress(0.0, text="Explaining…")
for j, m in enumerate(chosen):
    bar.progress(j / len(chosen), text=f"Explaining with {by_id[m].label} ({j + 1}/{len(chosen)})…")
    results[m] = {
        "A": explained(bundle_a, key_a, raw, input_keys, m, target),
        "B": explained(bundle_b, key_b, raw, input_keys, m, target),
    }
bar.empty()

st.subheader("Results", anchor="results")
n_differ = int(differ_here.sum())
if n_differ:
    st.warning(
        f"**A and B predict different classes for {n_differ} of {len(inputs)} input(s)** (marked below).",
        icon=":material/compare_arrows:",
    )
else:
    st.success(f"A and B predict the same class for all {len(inputs)} input(s).", icon=":material/check:")
st.caption(
    ("Overlays are drawn on a grey copy of the input. " if display == "overlay" else "")
    + (
        "Colour scale: model A's and model B's map of one row share one scale where the method's values are in the "
        "same units for both; otherwise (CAM maps, other relative units) each map has its own. Scales saturate at "
        "the 99th percentile of |value| (≥ on the bar when values go beyond). Each row states its scale."
        if scale_mode == SHARED
        else "Colour scale: each map on its own scale (its 99th percentile of |value|), stated under it."
    )
)


def prediction_block(probs: np.ndarray, label: int | None, title: str) -> None:
    pred = int(probs.argmax())
    mark = "" if label is None else (" ✓" if label == pred else " ✗")
    st.markdown(f"**{title}**: **{info.classes[pred]}** ({probs[pred]:.0%}){mark}")
    st.caption(" · ".join(f"{c} {p:.0%}" for c, p in top_classes(probs, info.classes, 3)))
    st.altair_chart(topk_chart([float(v) for v in probs], info.classes, 3, label), width="stretch")


@st.cache_resource(show_spinner=False)
def _reports() -> services.LRUCache:
    return services.LRUCache(4)


def build_report() -> ExplainReport:
    """Both models' maps as one report (cached per models, inputs, methods, target, scale and display): the
    `MapFigure`s the rows draw and the downloads."""
    pairs = [
        PairExplanation(m, results[m]["A"][0], results[m]["B"][0], *(_why(results[m][k][1]) for k in ("A", "B")))
        for m in chosen
    ]
    key = (key_a, key_b, input_keys, tuple(chosen), target, scale_mode, display)
    report, _ = _reports().get_or_compute(
        key,
        lambda: pair_report(
            (
                RunInfo.of(bundle_a, run.id, "A", title=name_a),
                RunInfo.of(bundle_b, choice_b.run.id, "B", choice_b.epoch, name_b),
            ),
            [(p.name, p.raw, p.label) for p in inputs],
            (probs_a, probs_b),
            pairs,
            shared=scale_mode == SHARED,
            display=display if bundle_a.modality == "image" else "overlay",
            target=target,
            upscale=MAP_PX,
        ),
    )
    return report


def _why(err: BaseException | None) -> str | None:
    return None if err is None else f"{type(err).__name__}: {err}"


def draw_map(report: ExplainReport, i: int, method: str, who: str) -> None:
    """One model's map of one row through the shared map card, its colour bar naming the model."""
    fig = report.figure(i, method, who)
    if fig is None:
        return
    width = min(fig.map_width, MAP_SHOWN_PX) if fig.modality == "image" else MAP_SHOWN_PX
    map_card(
        fig,
        key=f"{KEY}_card_{i}_{method}_{who}",
        title=f"{who} · {fig.label}",
        caption=f"explains **{fig.target_name}**",
        width=width,
        meaning=False,
        enlarge=False,
        warn=False,
    )


report = build_report()
for i, p in enumerate(inputs):
    with st.container(border=True):
        truth = f" · true: **{info.classes[p.label]}**" if p.label is not None else ""
        pred_a, pred_b = info.classes[int(probs_a[i].argmax())], info.classes[int(probs_b[i].argmax())]
        if differ_here[i]:
            head = f":red-background[:material/compare_arrows: **The models disagree**] **{p.name}**{truth}"
            head += f" · A: **{pred_a}**, B: **{pred_b}**"
        else:
            head = f":green-background[:material/check: Both agree] **{p.name}**{truth} · both: **{pred_a}**"
        if bundle_a.modality == "image":
            c0, c1 = st.columns([1, 5], vertical_alignment="center")
            c0.image(to_pil(p.raw, INPUT_PX), width=INPUT_PX)
            c1.markdown(head)
        else:
            st.markdown(head)
            st.markdown(f"> {p.raw}")
        ca, cb = st.columns(2)
        with ca:
            prediction_block(probs_a[i], p.label, f"A · {name_a}")
        with cb:
            prediction_block(probs_b[i], p.label, f"B · {name_b}")
        for m in chosen:
            spec = by_id[m]
            (ea, err_a), (eb, err_b) = results[m]["A"], results[m]["B"]
            rs = row_scale(
                spec,
                ea.item(i) if ea is not None else None,
                eb.item(i) if eb is not None else None,
                scale_mode == SHARED,
                bundle_a.modality,
            )
            st.divider()
            st.markdown(f"**{spec.label}** · scale: {rs.statement}")
            st.caption(f"{map_legend(spec, bundle_a.modality).meaning}.")
            ca, cb = st.columns(2)
            for col, expl, failure, who in ((ca, ea, err_a, "A"), (cb, eb, err_b, "B")):
                with col:
                    if expl is None:
                        show_error(failure or RuntimeError("no explanation"), f"{spec.label} on model {who}")
                    else:
                        draw_map(report, i, m, who)
report_downloads(report, KEY, "side_by_side")
