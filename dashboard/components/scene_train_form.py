"""The Train page's form for a detector or a segmenter: the scene set (built in, or a COCO file or a mask folder of
one's own), the model among those the set can train, epochs and the recipe's settings, the expected time, and
Start. Settings that cannot work get one line under the button, before anything is written or started."""

from __future__ import annotations

from typing import Any

import streamlit as st

from xaidash.dashboard.components.scene_facts import scene_config
from xaidash.dashboard.errors import USER_ERRORS, show_error
from xaidash.dashboard.scene_jobs import scene_job
from xaidash.data.formatting import duration_text
from xaidash.data.scenes import generate
from xaidash.data.scenes.registry import SceneSetSpec, own_scene_forms, scene_set, scene_set_names
from xaidash.models.runs.store import Run, list_runs
from xaidash.models.scenes.train import EVAL_MAX, SceneTrainSettings
from xaidash.models.scenes.zoo import SCENE_MODELS, SceneModelSpec

OWN = "your own: a COCO file or a mask folder…"
TASK_WORDS = {"detect": "detector: boxes with a class and a score", "segment": "segmenter: a class for every pixel"}
START = {"detect": "Start training the detector", "segment": "Start training the segmenter"}
KEY = "scene_form_"  # the form's widget keys start so


def _scene_set() -> tuple[str, SceneSetSpec | None]:
    """The picked set's name and facts (None, with one line said, when an own path cannot be read)."""
    names = scene_set_names()
    left, right = st.columns([1, 2])
    choice = left.selectbox(
        "Scene set",
        [*names, OWN],
        format_func=lambda n: n if n == OWN else f"{scene_set(n).label} ({n})",
        key=KEY + "set",
        help="Generated scenes with exact boxes and masks, or your own annotated images.",
    )
    if choice != OWN:
        name = str(choice)
    else:
        forms = " or ".join(f"`{f}`" for f in own_scene_forms())
        name = right.text_input(
            "Your scene data (on the server)",
            key=KEY + "own",
            placeholder="coco:/data/annotations.json",
            help=f"Write {forms}: a COCO instances file (images beside it or in images/), or a folder of images/ "
            "with masks/ of the same names (each pixel its class index) and an optional classes.txt.",
        ).strip()
        if not name:
            st.caption(f"Name your data as {forms}.")
            return name, None
    try:
        spec = scene_set(name)
    except USER_ERRORS as e:
        show_error(e, "This scene data cannot be read")
        return name, None
    size = f"{spec.image_size} px" if spec.image_size else "images of their own size"
    masks = "boxes and masks" if spec.has_masks else "boxes only (no masks: no segmenter)"
    st.caption(f"{spec.description} · {len(spec.classes)} classes ({', '.join(spec.classes)}) · {size} · {masks}")
    return name, spec


def trainable(model: SceneModelSpec, data: SceneSetSpec) -> bool:
    """Whether the set has what the model learns from: every set has boxes; a segmenter needs masks."""
    return data.has_masks or model.task != "segment"


def _trainable_models() -> list[SceneModelSpec]:
    """The models trained here (imported-only architectures, `xaidash scenes import`, are never offered)."""
    return [m for m in SCENE_MODELS if m.trainable]


def _model(data: SceneSetSpec) -> SceneModelSpec | None:
    models = [m for m in _trainable_models() if trainable(m, data)]
    left_out = [m.label for m in _trainable_models() if not trainable(m, data)]
    if not models:
        st.warning("No scene model can learn from this data.", icon=":material/warning:")
        return None
    picked = st.selectbox(
        "Detector or segmenter",
        [m.id for m in models],
        format_func=lambda i: f"{SCENE_MODELS.get(i).label} · {TASK_WORDS.get(SCENE_MODELS.get(i).task, '')}",
        key=KEY + "model",
        help="Scene models train here from random weights (no download).",
    )
    spec = SCENE_MODELS.get(str(picked))
    note = f" · not offered: {', '.join(left_out)} (this data has no masks)" if left_out else ""
    st.caption(spec.description + note)
    return spec


def _numbers(model: SceneModelSpec) -> dict[str, Any]:
    """Epochs, batch and learning rate (the recipe's by default; the fields follow the model picked), and, folded,
    the training images and the seed."""
    r = model.training_recipe()
    a, b, c = st.columns(3)
    out: dict[str, Any] = {
        "epochs": int(a.number_input("Scene epochs", 1, 500, r.epochs, key=f"{KEY}epochs_{model.id}")),
        "batch_size": int(b.number_input("Scene batch size", 1, 1024, r.batch_size, key=f"{KEY}batch_{model.id}")),
        "lr": float(c.number_input("Scene learning rate", 1e-6, 1.0, r.lr, format="%g", key=f"{KEY}lr_{model.id}")),
    }
    with st.expander("More: training images, seed"):
        a, b = st.columns(2)
        count = int(
            a.number_input(
                "Training images (0: the whole train split)",
                0,
                10_000_000,
                r.train_count or 0,
                key=f"{KEY}count_{model.id}",
            )
        )
        out["train_count"] = count or None
        out["seed"] = int(b.number_input("Seed", 0, 2**31 - 1, 0, key=KEY + "seed"))
    return out


def image_passes(epochs: int, train: int, evaluated: int) -> int:
    """Images a run passes through its model: every epoch's training images and validation, then the test split
    (an evaluated image counted as a trained one: the estimate errs long for a run of few training images)."""
    return epochs * train + (epochs + 1) * evaluated


def measured_pace(model_id: str) -> float | None:
    """Seconds per image pass (`image_passes`) that the newest completed run of this model took on this machine,
    None when none has a measured time."""
    for run in list_runs():
        try:
            section, s = scene_config(run), run.summary()
            if section.get("model") != model_id or not s.get("elapsed_s") or s.get("state") != "completed":
                continue
            settings = section.get("settings") or {}
            images = settings.get("train_count") or _train_images(scene_set(str(section.get("dataset"))))
            evaluated = min(int(settings.get("eval_count") or EVAL_MAX), EVAL_MAX)
            epochs = int(s.get("epochs_done") or 0)
        except Exception:  # noqa: BLE001 - another kind of run, a damaged one, or data gone: no pace from it
            continue
        if images and epochs:
            return float(s["elapsed_s"]) / image_passes(epochs, int(images), evaluated)
    return None


def expected_text(model: SceneModelSpec, numbers: dict[str, Any], images: int | None) -> str:
    """'Expected about 4m 10s (from earlier runs of this model here): 8 epochs of 2,000 images.' or what is known."""
    count, epochs = numbers.get("train_count") or images, int(numbers["epochs"])
    what = f"{epochs} epochs" + (f" of {count:,} images" if count else "")
    if not count:
        return f"{what}; the time left shows once the first steps have run. Stop keeps what it has trained."
    pace, recipe_pace = measured_pace(model.id), model.training_recipe().seconds_per_image
    if pace is not None:
        total, source = pace * image_passes(epochs, int(count), EVAL_MAX), "earlier runs of this model on this machine"
    elif recipe_pace is not None:  # per training image and epoch, validation included
        total, source = recipe_pace * count * epochs, "the recipe's pace on a quiet 2-core CPU"
    else:
        return f"{what}; the time left shows once the first steps have run. Stop keeps what it has trained."
    return (
        f"Expected about **{duration_text(total)}** ({source}): {what}. Stop keeps what it has trained; Resume goes on."
    )


def scene_settings() -> tuple[SceneTrainSettings | None, str]:
    """The form (widgets outside a form: the expected time follows every change): the settings, or None when the
    data or the model cannot be used (said on the page); and the expected time's line."""
    name, data = _scene_set()
    if data is None:
        return None, ""
    model = _model(data)
    if model is None:
        return None, ""
    numbers = _numbers(model)
    settings = SceneTrainSettings(dataset=name, model=model.id, **numbers)
    return settings, expected_text(model, numbers, _train_images(data))


def _train_images(data: SceneSetSpec) -> int | None:
    """How many training images the set has, when it says without loading them (a generated set's fixed split)."""
    return int(generate.SPLIT_SIZES["train"]) if data.generated else None


def scene_form(busy: bool) -> None:
    """The form and Start; `busy`: a scene job trains (Start is off, the panel above says which)."""
    settings, expected = scene_settings()
    if expected:
        st.caption(expected)
    task = SCENE_MODELS.get(settings.model).task if settings is not None else ""
    pressed = st.button(
        START.get(task, "Start training"),
        type="primary",
        icon=":material/play_arrow:",
        disabled=busy or settings is None,
        key=KEY + "start",
        help="one detector or segmenter trains at a time on this server" if busy else None,
    )
    if not pressed or settings is None:
        return
    try:  # the numbers checked here, in one line under the button, before anything is written
        settings.resolved(SCENE_MODELS.get(settings.model))
    except USER_ERRORS as e:
        show_error(e, "These settings cannot work")
        return
    if not scene_job().start(settings):
        st.warning("A scene model is already training on this server: stop it first, or wait for it to end.")
        return
    st.rerun()


def resume_settings(run: Run) -> SceneTrainSettings:
    """The settings a run was started with (as its config.json keeps them), to resume it."""
    section = scene_config(run)
    saved = dict(section.get("settings") or {})
    saved.setdefault("dataset", section.get("dataset"))
    saved.setdefault("model", section.get("model"))
    known = SceneTrainSettings.__dataclass_fields__
    return SceneTrainSettings(**{k: v for k, v in saved.items() if k in known})
