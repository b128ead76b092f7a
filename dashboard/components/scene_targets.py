"""What the model found in a scene (boxes with class and score, or the predicted mask), beside the truth when the
scene has it, and what to explain: one box or every box, one class's region or every class's, or a box drawn by
numbers."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st
import torch

from xaidash.dashboard.components.scene_cache import cached, model_lock
from xaidash.dashboard.components.scene_inputs import Scene
from xaidash.dashboard.services import content_key
from xaidash.explainers.scenes.api import detection_targets, region_targets, truth_object
from xaidash.explainers.scenes.figures import boxes_png
from xaidash.explainers.scenes.targets import BoxTarget, RegionTarget, SceneTargetSpec, class_name
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.predictions import Detections, Segmentation

ONE, EVERY, DRAWN = "one", "every", "drawn"
PREVIEW_WIDTH = 320  # px: the predictions, beside their table


@dataclass
class Picked:
    """The targets to explain (in the order the cards show them) and the prediction they were picked from."""

    targets: list[SceneTargetSpec]
    prediction: Detections | Segmentation


def predict(key: str, bundle: SceneBundle, scene: Scene) -> Detections | Segmentation:
    """The model's prediction for the scene, computed once per (weights, scene)."""

    def compute() -> Detections | Segmentation:
        with model_lock(key), torch.no_grad():
            return bundle.predict([scene.image])[0]

    prediction, _ = cached(("predict", key, scene.key), compute)
    return prediction


def target_key(target: SceneTargetSpec) -> tuple[object, ...]:
    """What identifies a target in the caches (a region's mask by its content)."""
    if isinstance(target, BoxTarget):
        return ("box", tuple(round(float(v), 2) for v in target.box), target.label, target.index)
    return ("region", target.label, target.name, content_key(target.mask))


def truth_text(target: SceneTargetSpec, scene: Scene, classes: tuple[str, ...]) -> str:
    """Which true object a target explains ('true object 2 (circle)'), or that none matches; '' without truth."""
    if scene.truth is None:
        return ""
    if isinstance(target, RegionTarget):  # scored against the class's every true pixel
        h, w = target.mask.shape
        pixels = int((scene.truth.semantic(h, w) == target.label).sum())
        name = class_name(classes, target.label)
        return f"the true {name} pixels ({pixels} px)" if pixels else f"no true {name} pixels in this scene"
    found = truth_object(target, scene.truth)
    if found is None:
        return "no true object (a false positive?)"
    return f"true object {found + 1} ({class_name(classes, int(scene.truth.labels[found]))})"


def _box_rows(targets: list[BoxTarget], scores: list[float], scene: Scene, classes: tuple[str, ...]) -> pd.DataFrame:
    rows = []
    for t, score in zip(targets, scores, strict=True):
        x0, y0, x1, y1 = (round(v) for v in t.box)
        row: dict[str, object] = {"box": t.index + 1 if t.index is not None else "-"}
        row["class"] = class_name(classes, t.label)
        row |= {"score": score, "x0": x0, "y0": y0, "x1": x1, "y1": y1}
        if scene.truth is not None:
            row["matches"] = truth_text(t, scene, classes)
        rows.append(row)
    return pd.DataFrame(rows)


def _missed(boxes: list[BoxTarget], scene: Scene, classes: tuple[str, ...]) -> str:
    """The true objects no shown box matches ('' when each is found, or without truth)."""
    if scene.truth is None:
        return ""
    found = {truth_object(t, scene.truth) for t in boxes}
    missed = [i for i in range(len(scene.truth)) if i not in found]
    names = ", ".join(f"{i + 1} ({class_name(classes, int(scene.truth.labels[i]))})" for i in missed)
    return f"True objects no box found: {names}." if missed else ""


def detections_view(bundle: SceneBundle, scene: Scene, prediction: Detections) -> list[BoxTarget]:
    """The boxes scoring at least the threshold, drawn and listed; those boxes (as targets)."""
    threshold = st.slider(
        "Show boxes scoring at least",
        0.05,
        1.0,
        0.5,
        0.05,
        key="scenes_threshold",
        help="the detector's confidence for the box's class (softmax over the classes of its box head)",
    )
    boxes = detection_targets(prediction, min_score=float(threshold))
    scores = [float(prediction.scores[t.index]) for t in boxes if t.index is not None]
    left, right = st.columns([1, 2])
    shown = Detections(
        prediction.boxes[[t.index for t in boxes]] if boxes else prediction.boxes[:0],
        prediction.labels[[t.index for t in boxes]] if boxes else prediction.labels[:0],
        prediction.scores[[t.index for t in boxes]] if boxes else prediction.scores[:0],
    )
    left.image(boxes_png(scene.image, shown, bundle.classes), width=PREVIEW_WIDTH, caption=scene.name)
    with right:
        if not boxes:
            st.warning(
                f"No box scores at least {threshold:.2f} on this scene: lower the threshold or pick another scene.",
                icon=":material/search_off:",
            )
        else:
            st.dataframe(_box_rows(boxes, scores, scene, bundle.classes), hide_index=True, width="stretch")
        missed = _missed(boxes, scene, bundle.classes)
        if missed:
            st.caption(missed)
    return boxes


def _region_rows(regions: list[RegionTarget], scene: Scene, classes: tuple[str, ...]) -> pd.DataFrame:
    rows = []
    for r in regions:
        row: dict[str, object] = {"class": class_name(classes, r.label), "predicted px": int(r.mask.sum())}
        if scene.truth is not None:
            h, w = r.mask.shape
            true = scene.truth.semantic(h, w) == r.label
            union = int((true | r.mask.bool()).sum())
            row["true px"] = int(true.sum())
            row["IoU"] = float((true & r.mask.bool()).sum()) / union if union else None
        rows.append(row)
    return pd.DataFrame(rows)


def segmentation_view(bundle: SceneBundle, scene: Scene, prediction: Segmentation) -> list[RegionTarget]:
    """The predicted mask drawn and its classes listed (with their IoU against the truth); one region per class."""
    regions = region_targets(prediction)
    left, right = st.columns([1, 2])
    left.image(boxes_png(scene.image, prediction, bundle.classes), width=PREVIEW_WIDTH, caption=scene.name)
    with right:
        if not regions:
            st.warning(
                "The model finds no object in this scene (every pixel background): pick another scene, or draw a "
                "box below.",
                icon=":material/search_off:",
            )
        else:
            st.dataframe(_region_rows(regions, scene, bundle.classes), hide_index=True, width="stretch")
    return regions


def drawn_box(
    bundle: SceneBundle, scene: Scene, task_word: str
) -> tuple[tuple[float, float, float, float], int] | None:
    """A box typed as numbers (pixels, x1 and y1 exclusive) and its class; None (with one line) when it is empty."""
    h, w = int(scene.image.shape[-2]), int(scene.image.shape[-1])
    cols = st.columns(5)
    names = list(bundle.classes)
    label = 1 + names.index(cols[0].selectbox("Class", names, key="scenes_drawn_class", help=f"the class {task_word}"))
    edges = []
    for col, (name, top, default) in zip(
        cols[1:], (("x0", w, w // 4), ("y0", h, h // 4), ("x1", w, 3 * w // 4), ("y1", h, 3 * h // 4)), strict=True
    ):
        edges.append(int(col.number_input(name, 0, top, default, 1, key=f"scenes_drawn_{name}")))
    x0, y0, x1, y1 = edges
    if x1 <= x0 or y1 <= y0:
        st.warning(f"The box ({x0}, {y0})-({x1}, {y1}) is empty: x1 must exceed x0 and y1 y0.", icon=":material/crop:")
        return None
    return (float(x0), float(y0), float(x1), float(y1)), label


def _drawn_target(bundle: SceneBundle, scene: Scene, detect: bool) -> SceneTargetSpec | None:
    task_word = "whose box score is explained" if detect else "whose logits are summed over the box"
    drawn = drawn_box(bundle, scene, task_word)
    if drawn is None:
        return None
    box, label = drawn
    if detect:
        return BoxTarget(box, label, None)
    x0, y0, x1, y1 = (int(v) for v in box)
    mask = torch.zeros(scene.image.shape[-2:], dtype=torch.bool)
    mask[y0:y1, x0:x1] = True
    return RegionTarget(label, mask, f"the box ({x0}, {y0})-({x1}, {y1})")


def choose_targets(
    bundle: SceneBundle, scene: Scene, found: list[SceneTargetSpec], detect: bool
) -> list[SceneTargetSpec]:
    """What to explain among what the model found (one, every one) or a box drawn by numbers; [] with one line
    when there is nothing to explain."""
    noun = "box" if detect else "class's region"
    options = {ONE: f"One {noun}", EVERY: f"Every {noun}", DRAWN: "A box drawn by numbers"}
    how = st.radio(
        "Explain",
        list(options),
        format_func=options.__getitem__,
        horizontal=True,
        key="scenes_what",
        help="a drawn box: for a detector, the score of the detection that overlaps it most (IoU > 0.5, same "
        "class); for a segmenter, the class's logits summed over the box",
    )
    if how == DRAWN:
        target = _drawn_target(bundle, scene, detect)
        return [target] if target is not None else []
    if not found:
        return []
    if how == EVERY:
        return found
    labels = [t.describe(bundle.classes) for t in found]
    picked = st.selectbox(noun.capitalize(), range(len(found)), format_func=labels.__getitem__, key="scenes_one")
    return [found[int(picked or 0)]]
