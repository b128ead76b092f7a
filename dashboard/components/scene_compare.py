"""Compare's view for detectors and segmenters: the chosen scene methods over a sample of test scenes, every true
object the model finds explained and scored against its exact mask; per method and metric the mean with its 95%
interval (table and charts, as for classifiers), how much the methods' maps agree, every target's values, and the
comparison as JSON. The numbers come from `explainers.scenes.compare`; this draws them."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from xaidash.dashboard.components.charts import matrix_heatmap
from xaidash.dashboard.components.inside_compare import metric_spread_charts, metrics_table
from xaidash.dashboard.components.scene_cache import model_lock, scene_bundle, scene_results, scene_test_split
from xaidash.dashboard.components.scene_methods import MethodChoice, pick_methods
from xaidash.dashboard.components.scene_run_choice import pick_scene_run
from xaidash.dashboard.errors import show_error
from xaidash.explainers.scenes.compare import DEFAULT_SCENES, SceneComparison, compare_scene_methods, sample_indices
from xaidash.explainers.scenes.metrics import SCENE_METRICS
from xaidash.models.scenes.bundle import SceneBundle

SHOWN = "scene_compare_shown"  # the last comparison this session asked for (its cache key)
MAX_SCENES = 50


def _titles() -> dict[str, tuple[str, str]]:
    return {m.id: (m.title, m.better) for m in SCENE_METRICS}


def _settings(bundle: SceneBundle, available: int) -> tuple[MethodChoice, list[int], bool]:
    """The methods, the test scenes and whether to run the curves."""
    choice = pick_methods(bundle)
    c1, c2, c3 = st.columns([1, 1, 2])
    count = int(
        c1.number_input(
            "Test scenes", 1, min(MAX_SCENES, available), min(DEFAULT_SCENES, available), 1, key="scene_compare_n",
            help="every true object the model finds in them is explained by each method",
        )
    )  # fmt: skip
    draw = c2.toggle("Random draw", key="scene_compare_random", help="a seeded random sample instead of the first ones")
    seed = int(c2.number_input("Seed", 0, 10_000, 0, key="scene_compare_seed")) if draw else None
    curves = c3.toggle(
        "Deletion and insertion",
        key="scene_compare_curves",
        help="also the curves of the target's score (2 x 17 model passes per map: slower)",
    )
    return choice, sample_indices(count, available, seed), bool(curves)


def _compute(key: str, bundle: SceneBundle, choice: MethodChoice, indices: list[int], curves: bool) -> None:
    """Run the comparison, keep it in the scene cache under the request's key."""
    assert bundle.dataset is not None
    split = scene_test_split(bundle.dataset)
    bar = st.progress(0.0, text="Comparing…")
    with model_lock(key):  # CAMs hook the model's layers: one job at a time on it
        result = compare_scene_methods(
            bundle, split, indices, choice.methods, choice.params, curves=curves,
            progress=lambda f, text: bar.progress(min(max(f, 0.0), 1.0), text=text),
        )  # fmt: skip
    bar.empty()
    scene_results().put(_request(key, choice, indices, curves), result)


def _request(key: str, choice: MethodChoice, indices: list[int], curves: bool) -> tuple[object, ...]:
    return ("compare", key, tuple(indices), tuple((m, choice.key(m)) for m in choice.methods), curves)


def _metrics(result: SceneComparison, labels: dict[str, str]) -> None:
    st.subheader("Metrics")
    columns = [m.id for m in SCENE_METRICS if m.id in set(result.summary.metric)]
    if not columns:
        st.error("No method produced a map that could be scored; see the messages above.")
        return
    text, style = metrics_table(result.summary, result.methods, columns, _titles(), result.best, labels)
    text, style = text.T, style.T
    text.index.name = style.index.name = "metric"
    st.dataframe(text.style.apply(lambda _: style, axis=None), width="stretch", height=35 * (len(text) + 1) + 3)
    st.caption("Each cell: the mean over the targets ± the half-width of its 95% interval; ★ the best method.")
    per_input = {m: {c: [v.get(c, float("nan")) for v in result.values[m]] for c in columns} for m in result.methods}
    ranges = {m.id: m.value_range for m in SCENE_METRICS}
    charts = metric_spread_charts(per_input, result.summary, _titles(), labels, result.methods, ranges)
    st.caption("In the charts: each faint dot is one target, the tick the mean, the bar its 95% confidence interval.")
    for start in range(0, len(charts), 2):
        for col, chart in zip(st.columns(2), charts[start : start + 2], strict=False):
            col.altair_chart(chart, width="stretch")
    st.markdown("\n".join(f"- **{m.title}** ({m.better}): {m.meaning}" for m in SCENE_METRICS if m.id in columns))


def _agreement(result: SceneComparison, labels: dict[str, str]) -> None:
    st.subheader("Agreement")
    if result.agreement is None:
        st.caption("Agreement needs at least two methods.")
        return
    frame = result.agreement.rename(index=labels, columns=labels)
    st.altair_chart(matrix_heatmap(frame, "Rank correlation of |map| between methods, per target"), width="content")


def _targets_table(result: SceneComparison, labels: dict[str, str]) -> None:
    with st.expander(f"Every target's values ({len(result.targets)} targets)"):
        rows = []
        for m in result.methods:
            for target, values in zip(result.targets, result.values[m], strict=True):
                rows.append({"target": target, "method": labels[m]} | {_titles()[k][0]: v for k, v in values.items()})
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=min(600, 35 * (len(rows) + 1) + 3))


def _result(run_id: str, bundle: SceneBundle, result: SceneComparison, choice: MethodChoice) -> None:
    labels = {m: choice.specs[m].label if m in choice.specs else m for m in result.methods}
    line = f"{len(result.targets)} targets on {len(result.scenes)} test scenes of {bundle.dataset}"
    if result.task == "detect":
        line += (
            f" (boxes scoring at least 0.5 that match a true object; {result.false_detections} false detections and "
            f"{result.missed} missed objects are not scored)"
        )
    st.caption(line + ".")
    for method, why in result.errors.items():
        st.error(f"{labels.get(method, method)}: {why}", icon=":material/error:")
    if not result.targets:
        st.warning("The model found no true object in these scenes: nothing was scored.", icon=":material/search_off:")
        return
    _metrics(result, labels)
    _agreement(result, labels)
    _targets_table(result, labels)
    document = {"run": run_id, "dataset": bundle.dataset} | result.to_json()
    st.download_button(
        "comparison.json", json.dumps(document, indent=1), "comparison.json", "application/json",
        icon=":material/download:", key="scene_compare_json",
    )  # fmt: skip


def scene_compare_view() -> None:
    """The scene model, the settings, Compare's button, and the comparison asked for last (from the cache)."""
    st.caption(
        "Each method explains every true object the model finds on a sample of test scenes; each map is scored "
        "against the object's exact mask. The means come with their 95% intervals, so a difference between two "
        "methods can be told from the luck of the draw."
    )
    run = pick_scene_run("Model", "scene_compare_run")
    if run is None:
        return
    try:
        key, bundle = scene_bundle(run)
        if bundle.dataset is None:
            st.info("This run names no data set, so it has no test scenes to compare on.", icon=":material/info:")
            return
        available = len(scene_test_split(bundle.dataset))
    except Exception as err:  # noqa: BLE001 - one line, the page stays usable
        show_error(err, f"Could not load run {run.id}")
        return
    choice, indices, curves = _settings(bundle, available)
    if not choice.methods:
        st.caption("Pick at least one method.")
        return
    request = _request(key, choice, indices, curves)
    label = f"Compare ({len(choice.methods)} methods on {len(indices)} scenes)"
    if st.button(label, type="primary", icon=":material/play_arrow:", key="scene_compare_go"):
        try:
            _compute(key, bundle, choice, indices, curves)
        except Exception as err:  # noqa: BLE001 - one line; the controls stay usable
            show_error(err, "Comparing failed")
            return
        st.session_state[SHOWN] = request
    found = scene_results().get(request)
    if found is None:
        if st.session_state.get(SHOWN):
            st.caption("The settings changed: press Compare for their numbers.")
        return
    _result(run.id, bundle, found, choice)
