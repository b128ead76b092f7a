"""Side by side's view for detectors and segmenters: two scene models with the same task and classes on one scene,
their predictions beside each other, and each object explained by both (each detector on its own box of the
object, both segmenters on the same region), map beside map with the metrics against the true object.

Pairing objects is `explainers.scenes.pairs`; the maps are the Scenes page's (`scene_explain`, cached per model,
scene, target and method), drawn by its cards."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from xaidash.dashboard.components.scene_cache import scene_bundle
from xaidash.dashboard.components.scene_cards import SCENE_CARD_WIDTH, metrics_frame, scene_card
from xaidash.dashboard.components.scene_explain import Results, explain_all, stored_results
from xaidash.dashboard.components.scene_facts import scene_config, scene_picker_label
from xaidash.dashboard.components.scene_inputs import Scene, scene_picker
from xaidash.dashboard.components.scene_methods import MethodChoice, pick_methods
from xaidash.dashboard.components.scene_run_choice import pick_scene_run, usable_scene_runs
from xaidash.dashboard.components.scene_targets import PREVIEW_WIDTH, predict
from xaidash.dashboard.errors import show_error
from xaidash.explainers.scenes.api import SceneExplanation
from xaidash.explainers.scenes.figures import boxes_png
from xaidash.explainers.scenes.pair_report import ReportObject, ReportSide, scene_pair_report_html
from xaidash.explainers.scenes.pairs import PairedTarget, paired_targets
from xaidash.models.runs.store import Run
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.predictions import Detections

DEFAULT_OBJECTS = 2  # objects explained when a scene is first seen: 2 x 2 models x 3 methods maps, under a minute


class Side:
    """One model of the pair: its run, cache key and loaded model."""

    def __init__(self, run: Run, key: str, bundle: SceneBundle) -> None:
        self.run, self.key, self.bundle = run, key, bundle


def _fits(run: Run, bundle: SceneBundle) -> bool:
    """Whether `run` can stand beside `bundle`: same task and classes, and the same image size when both say."""
    section = scene_config(run)
    size = section.get("image_size")
    same_size = size is None or bundle.image_size is None or int(size) == bundle.image_size
    return section.get("task") == bundle.task and tuple(section.get("classes", ())) == bundle.classes and same_size


def _load(run: Run) -> Side | None:
    try:
        key, bundle = scene_bundle(run)
    except Exception as err:  # noqa: BLE001 - one line; the page stays usable
        show_error(err, f"Could not load run {run.id}")
        return None
    return Side(run, key, bundle)


def _model_b(a: Side) -> Side | None:
    runs = usable_scene_runs(lambda r: r.id != a.run.id and _fits(r, a.bundle))
    if not runs:
        what = "detector" if a.bundle.task == "detect" else "segmenter"
        st.info(
            f"No other {what} of {a.bundle.image_size or 'this'} px scenes with the classes "
            f"{', '.join(a.bundle.classes)} yet: train a second one on the Train page (fewer or more epochs, another "
            "seed) to put beside it.",
            icon=":material/info:",
        )
        return None
    ids = [r.id for r in runs]
    picked = st.selectbox(
        "Model B", ids, format_func=lambda i: scene_picker_label(runs[ids.index(i)]), key="sbs_scene_b",
        help="scene runs with model A's task and classes",
    )  # fmt: skip
    return _load(runs[ids.index(picked)])


def _predictions(a: Side, b: Side, scene: Scene) -> tuple[Any, Any]:
    st.subheader("What each model finds")
    pred_a, pred_b = predict(a.key, a.bundle, scene), predict(b.key, b.bundle, scene)
    for col, side, pred, who in zip(st.columns(2), (a, b), (pred_a, pred_b), "AB", strict=True):
        shown = pred.above(0.5) if isinstance(pred, Detections) else pred
        col.image(boxes_png(scene.image, shown, side.bundle.classes), width=PREVIEW_WIDTH)
        col.caption(f"**Model {who}**: {scene_picker_label(side.run)}")
    return pred_a, pred_b


def _pick_objects(pairs: list[PairedTarget]) -> list[PairedTarget]:
    """The objects to explain, by name (names stay when a model changes, so the choice does too), and how many
    each model found."""
    names = [p.name for p in pairs]
    chosen = st.multiselect(
        "Objects", names, default=names[:DEFAULT_OBJECTS], key="sbs_scene_objects",
        help="a detector explains its own box of the object (same class, IoU >= 0.5 with the true box); both "
        "segmenters explain the same region",
    )  # fmt: skip
    found_a, found_b = sum(p.a is not None for p in pairs), sum(p.b is not None for p in pairs)
    if found_a < len(pairs) or found_b < len(pairs):
        st.caption(f"Model A has a box of {found_a} of these {len(pairs)} objects, model B of {found_b}.")
    return [p for p in pairs if p.name in chosen]


def _explain(side: Side, scene: Scene, targets: list[Any], choice: MethodChoice, metrics: bool, go: bool) -> Results:
    if not targets:
        return {}
    if go:
        explain_all(side.key, side.bundle, scene, targets, choice, metrics)
    return stored_results(side.key, scene, targets, choice, metrics) or {}


ByObject = list[tuple[PairedTarget, list[SceneExplanation], list[SceneExplanation]]]


def by_object(objects: list[PairedTarget], found: tuple[Results, Results]) -> ByObject:
    """Each object with model A's and model B's maps of it ([] where that model has no target for it): each model's
    results are numbered by its own targets, in the objects' order."""
    place, out = [0, 0], []
    for pair in objects:
        lists: list[list[SceneExplanation]] = []
        for side, target in enumerate((pair.a, pair.b)):
            lists.append(found[side].get(place[side], []) if target is not None else [])
            place[side] += target is not None
        out.append((pair, lists[0], lists[1]))
    return out


def _draw(a: Side, b: Side, scene: Scene, objects: ByObject, preds: Any, choice: MethodChoice) -> None:
    """Per object, per method: model A's map beside model B's (or why one has none)."""
    for k, (pair, maps_a, maps_b) in enumerate(objects):
        st.markdown(f"**{pair.name}**")
        for which, side, target in (("A", a, pair.a), ("B", b, pair.b)):
            words = target.describe(side.bundle.classes) if target is not None else "finds no box of this object"
            st.caption(f"Model {which}: {words}")
        mine = {"a": {e.method: e for e in maps_a}, "b": {e.method: e for e in maps_b}}
        with st.container(horizontal=True, gap="medium"):
            for method in choice.methods:
                with st.container(border=True, width="content", key=f"sbs_pair_{k}_{method}"):
                    st.markdown(f"**{choice.specs[method].label}**")
                    with st.container(horizontal=True, gap="small"):
                        for which, side, pred in (("a", a, preds[0]), ("b", b, preds[1])):
                            _card_or_gap(side, scene, mine[which].get(method), pred, which, k)


def _report(a: Side, b: Side, scene: Scene, objects: ByObject, preds: Any) -> None:
    """The HTML report's download button (the page is made when the button is pressed)."""

    def html() -> str:
        sides = (
            ReportSide(f"Model A: {scene_picker_label(a.run)}", preds[0]),
            ReportSide(f"Model B: {scene_picker_label(b.run)}", preds[1]),
        )
        items = [ReportObject(pair.name, maps_a, maps_b) for pair, maps_a, maps_b in objects]
        return scene_pair_report_html(
            scene.image, sides, items, a.bundle.classes, title=scene.name, subtitle=f"runs {a.run.id} and {b.run.id}"
        )

    st.download_button(
        "Report (.html)", data=html, file_name="scene-side-by-side.html", mime="text/html", key="sbs_scene_report",
        on_click="ignore", icon=":material/description:",
        help="both models' predictions, each object's maps in pairs with their colour bars, and the metrics, in one "
        "file that opens offline in any browser",
    )  # fmt: skip


def _card_or_gap(side: Side, scene: Scene, e: Any, pred: Any, which: str, k: int) -> None:
    who = f"Model {which.upper()}"
    if e is None:
        with st.container(width=SCENE_CARD_WIDTH):
            st.caption(f"{who}: no box of this object, so no map.")
        return
    scene_card(side.bundle, scene.image, e, pred, key=f"sbs_card_{which}_{k}_{e.method}", title=who)


def _table(a: Side, b: Side, objects: list[PairedTarget], found: tuple[Results, Results]) -> None:
    """Every map's metrics, object by object and method by method, model A's row above model B's."""
    frames = []
    for side, which, results in ((a, "A", found[0]), (b, "B", found[1])):
        named = [(p.name, t) for p in objects if (t := p.a if which == "A" else p.b) is not None]
        frame = metrics_frame(side.bundle, [t for _, t in named], results)
        if not frame.empty:
            names = {t.describe(side.bundle.classes): name for name, t in named}
            frames.append(frame.assign(model=which, object=frame["target"].map(names)))
    if not frames:
        return
    table = pd.concat(frames).dropna(axis=1, how="all")
    order = {p.name: k for k, p in enumerate(objects)} | {m: k for k, m in enumerate(dict.fromkeys(table["method"]))}
    table = table.sort_values(["object", "method", "model"], key=lambda c: c if c.name == "model" else c.map(order))
    shown = table[["object", "method", "model", *[c for c in table.columns if c not in ("object", "method", "model")]]]
    st.dataframe(shown, hide_index=True, width="stretch", height=min(1200, 35 * (len(shown) + 1) + 3))


def scene_side_by_side_view() -> None:
    """Model A (the session's scene run), model B, the scene, both predictions, the objects and methods; Explain both
    computes what the caches lack, and what they hold is drawn at once."""
    st.caption(
        "Two detectors (or two segmenters) with the same classes on the same scene: each object explained by both, "
        "map beside map, scored against the object's true mask."
    )
    run_a = pick_scene_run("Model A", "sbs_scene_a")
    a = _load(run_a) if run_a is not None else None
    b = _model_b(a) if a is not None else None
    if a is None or b is None:
        return
    st.subheader("Scene")
    scene = scene_picker(a.bundle, key="sbs_scene")
    if scene is None:
        return
    preds = _predictions(a, b, scene)
    pairs = paired_targets(preds[0], preds[1], scene.truth, a.bundle.classes)
    if not pairs:
        st.info("Neither model finds an object in this scene: pick another.", icon=":material/search_off:")
        return
    st.subheader("What to explain")
    objects = _pick_objects(pairs)
    choice = pick_methods(a.bundle)
    metrics = bool(st.toggle("Quality metrics", value=True, key="sbs_scene_metrics"))
    if not objects or not choice.methods:
        st.caption("Pick at least one object and one method.")
        return
    targets_a = [p.a for p in objects if p.a is not None]
    targets_b = [p.b for p in objects if p.b is not None]
    maps = (len(targets_a) + len(targets_b)) * len(choice.methods)
    go = st.button(f"Explain both ({maps} maps)", type="primary", icon=":material/play_arrow:", key="sbs_scene_go")
    try:
        found = (
            _explain(a, scene, targets_a, choice, metrics, go),
            _explain(b, scene, targets_b, choice, metrics, go),
        )
    except Exception as err:  # noqa: BLE001 - one line; the controls stay usable
        show_error(err, "Explaining failed")
        return
    if not found[0] and not found[1]:
        st.caption("Press Explain both for the maps.")
        return
    grouped = by_object(objects, found)
    st.subheader("Maps")
    _draw(a, b, scene, grouped, preds, choice)
    st.subheader("Quality against the true objects")
    _table(a, b, objects, found)
    _report(a, b, scene, grouped, preds)
