"""Side by side: the sidebar's run (model A) beside a second model that takes the same input (another run, or
this run at an earlier epoch): both models' predictions and the same methods' maps for the same inputs, one row
per (input, method), where they disagree highlighted."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.calibration_view import session_temperature
from xaidash.dashboard.components.charts import topk_chart
from xaidash.dashboard.components.explain_maps import map_card, map_display_choice
from xaidash.dashboard.components.images import to_pil
from xaidash.dashboard.components.inputs import PickedInput, _pick_key, input_picker
from xaidash.dashboard.components.model_queue import leased_model
from xaidash.dashboard.components.report_downloads import report_downloads
from xaidash.dashboard.components.row_inputs import cells_frame
from xaidash.dashboard.components.scene_run_choice import scene_view_chosen
from xaidash.dashboard.components.scene_side_by_side import scene_side_by_side_view
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.state import require_bundle, run_label
from xaidash.data.formatting import r2_text
from xaidash.data.registry import RegressionTarget
from xaidash.explainers.comparison.side_by_side import (
    InputSpec,
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
from xaidash.explainers.figures.legend import map_legend
from xaidash.explainers.figures.predictions import prediction_text, top_predictions, truth_text, verdict_text
from xaidash.explainers.figures.report import ExplainReport, RunInfo
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.registry import MethodSpec, featured_methods
from xaidash.explainers.scoring import unit_words
from xaidash.explainers.session import MethodResult, run_session
from xaidash.models.bundle import ModelBundle
from xaidash.models.runs.quality import accuracy_warning, run_warning
from xaidash.models.runs.store import Run

KEY = "sbs"
MAX_INPUTS = 4
OWN_PREDICTION = "own prediction"
SHARED, PER_MODEL = "shared where the units match", "per model"
MAP_PX = 320  # small maps are enlarged by a whole factor (nearest neighbour) until they are at least this wide
MAP_SHOWN_PX = 400  # drawn at most this wide (narrower when the column is), two maps a row: over 200 px at 1024 px
INPUT_PX = 112

Sides = dict[str, MethodResult]  # one method's maps of the inputs by model "A" and by model "B" (or their errors)


@dataclass
class Pair:
    """Model A (the sidebar's run) and model B: their bundles, cache keys and names."""

    run: Run
    a: ModelBundle
    key_a: str
    name_a: str
    choice_b: ModelChoice
    b: ModelBundle
    key_b: str
    name_b: str


@dataclass
class Choice:
    """What the controls say: the methods (ids), the target, the colour scale and the display."""

    methods: list[str]
    specs: dict[str, MethodSpec]
    target: int | None
    scale_mode: str
    display: str

    @property
    def shared(self) -> bool:
        return self.scale_mode == SHARED


@st.cache_resource(max_entries=3, show_spinner=False)
def _bundle_at_epoch(key: str, path: str, epoch: int) -> ModelBundle:
    return load_choice(ModelChoice(Run(Path(path)), epoch))


@st.cache_data(max_entries=8, show_spinner=False)
def _test_predictions_of_b(key: str, dataset: str, _bundle: ModelBundle) -> np.ndarray:
    """Model B's probabilities on model A's test split (B may have no data set of its own), as the gallery's."""
    with services.lease(key, _bundle) as bundle:
        return split_predictions(bundle, services.dataset_split(dataset, "test"), services.GALLERY_LIMIT)


@st.cache_resource(show_spinner=False)
def _reports() -> services.LRUCache:
    return services.LRUCache(4)


def choice_label(c: ModelChoice) -> str:
    """'this run at epoch 2 · val acc 83.0%', or the run's label, id and flag ('⚠ poor', 'accuracy not measured')."""
    if c.epoch is not None:
        return f"this run at epoch {c.epoch}" + (f" · {c.note}" if c.note else "")
    return f"{run_label(c.run)} · {c.run.id}" + (f" · {c.flag}" if c.flag else "")


def pick_model_b(run: Run, spec_a: InputSpec) -> ModelChoice:
    """Model A's line and the Model B selectbox (other runs that take the same input, this run's earlier epochs),
    with the runs that cannot be compared; the page stops when there is no model B."""
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
                help="other runs that take the same input (of the same data set with usable weights first, measured good "
                "before unmeasured before poor, the same model first, then the higher accuracy; poor ones flagged), "
                "and this run's weights after earlier epochs",
            )
            choice_b = by_key[str(pick)]
            if choice_b.warning:
                st.warning(f"Model B: {choice_b.warning}", icon=":material/warning:")
        if found.incompatible:
            with st.expander(f"{len(found.incompatible)} other run(s) cannot be compared with this one"):
                for r, why in found.incompatible:
                    st.markdown(f"- {run_label(r)} · `{r.id}` {why}.")
                can = [choice_label(c) for c in found.runs]
                st.caption("Runs that can: " + ("; ".join(can) if can else "none yet") + ".")
    if not choices:
        st.stop()
    return choice_b


def load_pair(run: Run, bundle_a: ModelBundle, choice_b: ModelChoice) -> Pair:
    """Model B loaded (a run's final weights, or this run's at an epoch), and both models' names; the page stops
    with the error when B cannot be loaded."""
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
    return Pair(run, bundle_a, services.run_key(run), name_a, choice_b, bundle_b, key_b, name_b)


def pick_disagreements(dataset: str, differ: list[int]) -> None:
    """The Show disagreements button's callback, before the picker is drawn: the gallery's own state keys set to
    the next test samples on which the models disagree (each click: the next ones, then from the start)."""
    st.session_state[f"{KEY}_source"] = "Test set"
    st.session_state[f"{KEY}_classes_{dataset}"] = []
    st.session_state[f"{KEY}_show"] = "all"
    key = _pick_key(KEY, dataset, [], "all")
    shown = [i for i in st.session_state.get(key) or [] if i in differ]
    start = differ.index(shown[-1]) + 1 if shown else 0  # each click: the next ones, then from the start
    st.session_state[key] = (differ[start:] if start < len(differ) else differ)[:MAX_INPUTS]


def measured_poor(pair: Pair, acc_a: float, acc_b: float) -> None:
    """Flag a model whose accuracy measured here, on the test split, is near chance, when nothing flagged it yet:
    an import has no accuracy of its own (a run whose summary says it is poor is flagged above already)."""
    classes = {"classes": list(pair.a.info.classes)}
    flagged = {"A": run_warning(pair.run) is not None, "B": pair.choice_b.warning is not None}
    for name, which, acc in (("A", pair.name_a, acc_a), ("B", pair.name_b, acc_b)):
        warning = accuracy_warning(classes, {"test_acc": acc})
        if warning and not flagged[name]:
            st.warning(f"Model {name} ({which}), measured here on the test split: {warning}", icon=":material/warning:")


def regression_agreement(pair: Pair, target: RegressionTarget, truth: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """A number to predict: both models' R² and mean absolute error on the test rows (no classes to agree on)."""
    spread = float(((truth - truth.mean()) ** 2).sum()) or 1.0
    parts = []
    for name, which, values in (("A", pair.name_a, a), ("B", pair.name_b, b)):
        r2 = 1.0 - float(((values - truth) ** 2).sum()) / spread
        mae = target.value_text(float(np.abs(values - truth).mean()))
        parts.append(f"**{name}** {which} {r2_text(r2)}, mean absolute error {mae}")
        warning = accuracy_warning({}, {"test_r2": r2})
        if warning and not (run_warning(pair.run) if name == "A" else pair.choice_b.warning):
            st.warning(f"Model {name} ({which}), measured here on the test split: {warning}", icon=":material/warning:")
    st.markdown(f"On the first {len(truth)} test rows ({target.name}): " + "; ".join(parts) + ".")


def test_split_agreement(pair: Pair) -> None:
    """Both models' accuracy on the test split, how often they disagree, and a button that picks disagreements."""
    info = pair.a.info
    try:
        with st.spinner("Predicting the test split with both models…"):
            probs_a_test = services.test_predictions(pair.key_a, pair.a)
            probs_b_test = _test_predictions_of_b(pair.key_b, info.name, pair.b)
        labels_test = services.dataset_split(info.name, "test").labels[: len(probs_a_test)].numpy()
        if info.regression is not None:
            regression_agreement(pair, info.regression, labels_test, probs_a_test[:, 0], probs_b_test[:, 0])
            return
        differ = np.flatnonzero(disagreements(probs_a_test, probs_b_test)).tolist()
        acc_a = float((probs_a_test.argmax(1) == labels_test).mean())
        acc_b = float((probs_b_test.argmax(1) == labels_test).mean())
        measured_poor(pair, acc_a, acc_b)
        st.markdown(
            f"On the first {len(labels_test)} test samples: **A** {pair.name_a} {acc_a:.1%} correct, "
            f"**B** {pair.name_b} {acc_b:.1%} correct; they predict different classes for "
            f"**{len(differ)}** ({len(differ) / max(1, len(labels_test)):.1%})."
        )
        st.button(
            "Show disagreements",
            key=f"{KEY}_disagree",
            on_click=pick_disagreements,
            args=(info.name, differ),
            disabled=not differ,
            help=f"pick {MAX_INPUTS} test samples on which the models predict different classes (the next ones on "
            "each click)",
        )
    except Exception as e:  # noqa: BLE001 - the inputs below still work
        show_error(e, "Could not compare the models on the test split")


def pick_methods(modality: str, ids: list[str], by_id: dict[str, MethodSpec]) -> list[str]:
    """The methods multiselect (per modality): defaults on first use; the choice survives visits to other pages."""
    methods_key = f"{KEY}_methods_{modality}"
    stored = st.session_state.get(methods_key, st.session_state.get(f"{methods_key}_kept"))
    if stored is None or any(m not in ids for m in stored):
        stored = [m for m in (stored or []) if m in ids] or featured_methods(modality, among=ids, limit=2) or ids[:1]
    st.session_state[methods_key] = stored
    chosen = st.multiselect(
        "Methods", ids, format_func=lambda i: by_id[i].label, key=methods_key, help="the methods that apply to both"
    )
    st.session_state[f"{methods_key}_kept"] = chosen
    return chosen


def controls(pair: Pair) -> Choice:
    """The methods that apply to both models, the target, the colour scale and the display; the page stops when
    no method applies to both."""
    bundle_a, info = pair.a, pair.a.info
    common, skipped = common_methods(bundle_a, pair.b)
    ids = [m.id for m in common]
    by_id: dict[str, MethodSpec] = {m.id: m for m in common}
    with st.container(border=True):
        if not ids:
            st.warning("No explanation method applies to both models.")
            st.stop()
        chosen = pick_methods(bundle_a.modality, ids, by_id)
        c1, c2, c3 = st.columns(3)
        if info.regression is not None:  # one output: nothing to pick
            target_name = OWN_PREDICTION
            c1.markdown(f"**Target:** the predicted {info.regression.name}")
            c1.caption("Both models predict one number: the maps explain it, in its units (no class to pick).")
        else:
            target_name = c1.selectbox(
                "Target class",
                [OWN_PREDICTION, *info.classes],
                key=f"{KEY}_target_{info.name}",
                help="the class whose evidence the maps show: each model's own predicted class, or one class for "
                "both models",
            )
        scale_mode = c2.radio(
            "Colour scale",
            [SHARED, PER_MODEL],
            key=f"{KEY}_scale",
            help="shared: model A's and model B's map of one input and method on one scale when the method's values "
            f"are in the same units for both (e.g. logit contribution per {unit_words(bundle_a.modality)[0]}, attention "
            "weight); maps in relative "
            "units (the CAM family, guided backprop) always get one scale per model",
        )
        display = map_display_choice(c3, f"{KEY}_display", adapter_of(bundle_a.modality).displays)
        if skipped:
            st.caption(
                "Not available for both models: " + "; ".join(f"{label} ({why})" for label, why in skipped.items())
            )
        st.caption(
            "Every method runs with its default parameters, the same for both models. [Jump to the results ↓](#results)"
        )
    target = None if target_name == OWN_PREDICTION else list(info.classes).index(target_name)
    return Choice(chosen, by_id, target, str(scale_mode), str(display))


def pick_inputs(pair: Pair) -> list[PickedInput]:
    """The input picker (model A's gallery)."""
    with st.container(border=True):
        inputs = input_picker(pair.a, KEY, bundle_key=pair.key_a, max_inputs=MAX_INPUTS)
        if pair.a.has_dataset:
            st.caption(
                "The gallery's ✓/✗ and filters are model A's predictions."
                if pair.a.regression is None
                else "The rows' predicted values and errors are model A's."
            )
    return inputs


def predict_both(pair: Pair, raw: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both models' class probabilities of the inputs; the page stops with the error when prediction fails."""
    t_a, t_b = session_temperature(pair.a.run_dir), session_temperature(pair.b.run_dir)  # each model its own T
    if t_a is not None or t_b is not None:
        st.caption(
            "Calibrated probabilities (the sidebar's switch): "
            + "; ".join(
                f"model {n}: " + (f"T = {t:.2f}" if t else "none saved, plain softmax")
                for n, t in (("A", t_a), ("B", t_b))
            )
            + ". The predicted classes and the maps do not change."
        )
    try:
        with leased_model(pair.key_a, pair.a) as replica_a:
            probs_a = replica_a.predict_proba(raw, temperature=t_a).numpy()
        with leased_model(pair.key_b, pair.b) as replica_b:
            probs_b = replica_b.predict_proba(raw, temperature=t_b).numpy()
    except Exception as err:  # noqa: BLE001
        show_error(err, "Prediction failed")
        st.stop()
    return probs_a, probs_b


def explained(
    bundle: ModelBundle,
    model_key: str,
    who: str,
    raw: Any,
    input_keys: tuple[str, ...],
    method: str,
    target: int | None,
) -> MethodResult:
    """One model's maps (or why there are none), cached for every session per model, inputs, method and target and
    computed on a leased replica."""
    return explain_one(
        bundle,
        raw,
        method,
        target,
        run=who,
        cache=services.explanation_cache(),
        key=("side_by_side", model_key, input_keys, method, target),
        lease=lambda _method: leased_model(model_key, bundle),
    )


def explain_both(pair: Pair, raw: Any, input_keys: tuple[str, ...], choice: Choice) -> dict[str, Sides]:
    """Every chosen method on both models as one session, with a progress bar: results[method]["A" or "B"]; one
    model failing does not hide the other's maps."""

    def both(m: str) -> Sides:
        return {
            "A": explained(pair.a, pair.key_a, "A", raw, input_keys, m, choice.target),
            "B": explained(pair.b, pair.key_b, "B", raw, input_keys, m, choice.target),
        }

    bar = st.progress(0.0, text="Explaining…")
    outcomes = run_session(
        choice.methods,
        both,
        label=lambda m: choice.specs[m].label,
        progress=lambda fraction, text: bar.progress(fraction, text=text),
    )
    bar.empty()
    return {o.method: o.value for o in outcomes if o.value is not None}


def results_header(n_inputs: int, differ_here: np.ndarray, choice: Choice, regression: bool = False) -> None:
    """The Results heading (the controls' jump target), whether the models agree, and how the maps are scaled."""
    st.subheader("Results", anchor="results")
    n_differ = int(differ_here.sum())
    if regression:  # two predicted numbers: each input's values are below, there is no class to agree on
        pass
    elif n_differ:
        st.warning(
            f"**A and B predict different classes for {n_differ} of {n_inputs} input(s)** (marked below).",
            icon=":material/compare_arrows:",
        )
    else:
        st.success(f"A and B predict the same class for all {n_inputs} input(s).", icon=":material/check:")
    st.caption(
        ("Overlays are drawn on a grey copy of the input. " if choice.display == "overlay" else "")
        + (
            "Colour scale: model A's and model B's map of one row share one scale where the method's values are in "
            "the same units for both; otherwise (CAM maps, other relative units) each map has its own. Scales "
            "saturate at the 99th percentile of |value| (≥ on the bar when values go beyond). Each row states its "
            "scale."
            if choice.shared
            else "Colour scale: each map on its own scale (its 99th percentile of |value|), stated under it."
        )
    )


def build_report(
    pair: Pair,
    inputs: list[PickedInput],
    input_keys: tuple[str, ...],
    probs: tuple[np.ndarray, np.ndarray],
    results: dict[str, Sides],
    choice: Choice,
) -> ExplainReport:
    """Both models' maps as one report (cached per models, inputs, methods, target, scale and display): the
    `MapFigure`s the rows draw and the downloads."""
    pairs = [
        PairExplanation(
            m, results[m]["A"].explanation, results[m]["B"].explanation, results[m]["A"].error, results[m]["B"].error
        )
        for m in choice.methods
    ]
    calibrated = (probs[0].tobytes(), probs[1].tobytes())  # the probabilities change with the sidebar's switch
    key = (pair.key_a, pair.key_b, input_keys, tuple(choice.methods), choice.target, choice.scale_mode, choice.display)
    report_key = (*key, calibrated)
    report, _ = _reports().get_or_compute(
        report_key,
        lambda: pair_report(
            (
                RunInfo.of(pair.a, pair.run.id, "A", title=pair.name_a),
                RunInfo.of(pair.b, pair.choice_b.run.id, "B", pair.choice_b.epoch, pair.name_b),
            ),
            [(p.name, p.raw, p.label) for p in inputs],
            probs,
            pairs,
            shared=choice.shared,
            display=choice.display,
            target=choice.target,
            upscale=MAP_PX,
            info=pair.a.info,
        ),
    )
    return report


def prediction_block(
    probs: np.ndarray, label: float | None, title: str, classes: tuple[str, ...], target: RegressionTarget | None
) -> None:
    if target is not None:  # a number to predict: its value in units and the error, no class chart
        top = top_predictions(probs, classes, target=target)[0]
        st.markdown(f"**{title}**: **{prediction_text(top, target)}**{verdict_text(top, label, target)}")
        return
    label = None if label is None else int(label)
    pred = int(probs.argmax())
    mark = "" if label is None else (" ✓" if label == pred else " ✗")
    st.markdown(f"**{title}**: **{classes[pred]}** ({probs[pred]:.0%}){mark}")
    st.caption(" · ".join(f"{c} {p:.0%}" for c, p in top_classes(probs, classes, 3)))
    st.altair_chart(topk_chart([float(v) for v in probs], classes, 3, label), width="stretch")


def draw_map(report: ExplainReport, i: int, method: str, who: str) -> None:
    """One model's map of one row through the shared map card, its colour bar naming the model."""
    fig = report.figure(i, method, who)
    if fig is None:
        return
    width = min(fig.map_width, MAP_SHOWN_PX) if fig.map_width else MAP_SHOWN_PX  # a picture's own width, at most
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


def input_head(
    pair: Pair,
    p: PickedInput,
    picture: bool,
    probs_a: np.ndarray,
    probs_b: np.ndarray,
    differ: bool,
    cells: tuple[str, ...] = (),
) -> None:
    """The input (its picture, or its text), whether the models agree on it, and both models' predictions."""
    classes, target = pair.a.info.classes, pair.a.info.regression
    truth = f" · true: **{truth_text(p.label, classes, target)}**" if p.label is not None else ""
    pred_a, pred_b = classes[int(probs_a.argmax())], classes[int(probs_b.argmax())]
    if target is not None:  # two predicted numbers: their values, not agreement on a class
        head = f"**{p.name}**{truth} · A: **{target.value_text(float(probs_a[0]))}**, "
        head += f"B: **{target.value_text(float(probs_b[0]))}** ({target.name})"
    elif differ:
        head = f":red-background[:material/compare_arrows: **The models disagree**] **{p.name}**{truth}"
        head += f" · A: **{pred_a}**, B: **{pred_b}**"
    else:
        head = f":green-background[:material/check: Both agree] **{p.name}**{truth} · both: **{pred_a}**"
    if picture:
        c0, c1 = st.columns([1, 5], vertical_alignment="center")
        c0.image(to_pil(p.raw, INPUT_PX), width=INPUT_PX)
        c1.markdown(head)
    elif cells:  # a row of values
        st.markdown(head)
        st.dataframe(cells_frame(cells), hide_index=True, width="stretch")
    else:
        st.markdown(head)
        st.markdown(f"> {p.raw}")
    ca, cb = st.columns(2)
    with ca:
        prediction_block(probs_a, p.label, f"A · {pair.name_a}", classes, target)
    with cb:
        prediction_block(probs_b, p.label, f"B · {pair.name_b}", classes, target)


def method_row(report: ExplainReport, i: int, spec: MethodSpec, sides: Sides, choice: Choice, modality: str) -> None:
    """One method's maps of one input by both models, with the row's scale and what the values mean (or the
    error of a model whose maps failed)."""
    (ea, err_a), (eb, err_b) = ((sides[k].explanation, sides[k].exception) for k in ("A", "B"))
    target = report.run.regression  # a number to predict: the legend names it, in its units
    rs = row_scale(
        spec,
        ea.item(i) if ea is not None else None,
        eb.item(i) if eb is not None else None,
        choice.shared,
        modality,
        target,
    )
    st.divider()
    st.markdown(f"**{spec.label}** · scale: {rs.statement}")
    st.caption(f"{map_legend(spec, modality, target=target).meaning}.")
    ca, cb = st.columns(2)
    for col, expl, failure, who in ((ca, ea, err_a, "A"), (cb, eb, err_b, "B")):
        with col:
            if expl is None:
                show_error(failure or RuntimeError("no explanation"), f"{spec.label} on model {who}")
            else:
                draw_map(report, i, spec.id, who)


def main() -> None:
    st.title("Side by side")
    if scene_view_chosen("side_by_side"):  # two detectors or segmenters, object by object
        scene_side_by_side_view()
        return
    run, bundle_a = require_bundle("compare with another model")
    choice_b = pick_model_b(run, input_spec(run))
    pair = load_pair(run, bundle_a, choice_b)
    if bundle_a.has_dataset:
        test_split_agreement(pair)
    choice = controls(pair)
    inputs = pick_inputs(pair)
    if not inputs:
        st.stop()
    if not choice.methods:
        st.info("Pick at least one method.")
        st.stop()
    raw = pair.a.adapter.batch([p.raw for p in inputs])
    probs_a, probs_b = predict_both(pair, raw)
    differ_here = disagreements(probs_a, probs_b)
    input_keys = tuple(p.key for p in inputs)
    results = explain_both(pair, raw, input_keys, choice)
    results_header(len(inputs), differ_here, choice, pair.a.regression is not None)
    report = build_report(pair, inputs, input_keys, (probs_a, probs_b), results, choice)
    for i, p in enumerate(inputs):
        with st.container(border=True):
            inp = report.inputs[i]
            input_head(pair, p, inp.image is not None, probs_a[i], probs_b[i], bool(differ_here[i]), inp.cells)
            for m in choice.methods:
                method_row(report, i, choice.specs[m], results[m], choice, bundle_a.modality)
    report_downloads(report, KEY, "side_by_side")


main()
