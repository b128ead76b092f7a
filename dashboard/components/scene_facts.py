"""What the pages say about a scene run (a detector or a segmenter trained on scenes), as plain data: its model and
data set, its headline score (test mAP@50 or mIoU), its table row, its settings. No Streamlit here, so every
sentence can be tested on its own; everything reads the run's files defensively and says less rather than fail."""

from __future__ import annotations

import time
from typing import Any

from xaidash.data.formatting import duration_text
from xaidash.models.runs.quality import quality_label
from xaidash.models.runs.store import SCENE_MARK, Run, run_liveness
from xaidash.models.runs.table import epochs_cell

# The scores a scene run can report, in the order a page shows them: (summary key, short name, meaning). A detector
# reports the mAPs, a segmenter mIoU and pixel accuracy; the first one a run has is its headline.
SCORES = (
    ("map_50", "mAP@50", "mean average precision at IoU 0.5 (COCO-style, 101-point), over the classes"),
    ("map", "mAP", "mean average precision averaged over IoU 0.5 to 0.95 (COCO's headline)"),
    ("map_75", "mAP@75", "mean average precision at IoU 0.75"),
    ("mar_100", "mAR@100", "mean average recall with up to 100 detections an image"),
    (
        "miou",
        "mIoU",
        "mean over the classes (background included) of the intersection over union of the predicted and true masks",
    ),
    ("miou_objects", "mIoU (objects)", "mean IoU over the object classes alone (background left out)"),
    ("pixel_accuracy", "pixel accuracy", "the share of pixels given their true class"),
)
SCORE_NAMES = {key: name for key, name, _ in SCORES}


def scene_config(run: Run) -> dict[str, Any]:
    """config.json's `scene_model` section (task, model, dataset, classes, image_size, settings); {} if absent."""
    section = run.config().get(SCENE_MARK)
    return section if isinstance(section, dict) else {}


def _numbers(section: Any) -> dict[str, float]:
    if not isinstance(section, dict):
        return {}
    return {str(k): float(v) for k, v in section.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def test_scores(summary: dict[str, Any]) -> dict[str, float]:
    """The test split's metrics the run's summary holds (map, map_50, ..., miou, per-class ap/<c>, iou/<c>)."""
    return _numbers(summary.get("test_metrics"))


def val_scores(summary: dict[str, Any]) -> dict[str, float]:
    """The last validation metrics the run's summary holds."""
    return _numbers(summary.get("val_metrics"))


def headline(scores: dict[str, float], key: str | None = None) -> tuple[str, float] | None:
    """(short name, value) of the run's headline score (`key`: the summary's `headline`, map_50 or miou), else of
    the first score of `SCORES` the run has; None when it has none."""
    if key in scores:
        return SCORE_NAMES.get(str(key), str(key)), scores[str(key)]
    return next(((name, scores[k]) for k, name, _ in SCORES if k in scores), None)


def score_text(summary: dict[str, Any]) -> str:
    """'test mAP@50 0.93', 'val mIoU 0.81' (the test score once measured), or 'not measured yet'."""
    for split, scores in (("test", test_scores(summary)), ("val", val_scores(summary))):
        top = headline(scores, summary.get("headline"))
        if top is not None:
            return f"{split} {top[0]} {top[1]:.2f}"
    return "not measured yet"


def planned(section: dict[str, Any], summary: dict[str, Any]) -> int | None:
    settings = section.get("settings") or {}
    epochs = summary.get("epochs") or settings.get("epochs") or section.get("epochs")
    return int(epochs) if epochs else None


def epochs_text(section: dict[str, Any], summary: dict[str, Any]) -> str:
    """'3/10' complete epochs of those planned (with the steps of a stopped epoch when the summary says); an imported
    run says it was not trained here."""
    if section.get("imported") and not section.get("settings"):
        return "none here (imported)"
    return epochs_cell(summary, planned(section, summary))


def task_word(section: dict[str, Any]) -> str:
    """'detector' or 'segmenter' (the task as a person says it)."""
    return {"detect": "detector", "segment": "segmenter"}.get(str(section.get("task")), "scene model")


def model_name(run: Run, section: dict[str, Any]) -> str:
    return str(section.get("model") or run.config().get("model") or "?")


def dataset_name(run: Run, section: dict[str, Any]) -> str:
    return str(section.get("dataset") or run.config().get("dataset") or "?")


def scene_state(run: Run, summary: dict[str, Any]) -> str:
    """running, interrupted, stopped, completed or failed: the store's liveness check (a live writer's lock, a
    'running' summary whose process is gone), with the summary's own `status` word when it has no `state`."""
    state = run_liveness(run, summary).state
    if state == "?":
        return {"finished": "completed"}.get(str(summary.get("status")), str(summary.get("status") or "?"))
    return state


def scene_label(run: Run) -> str:
    """'fasterrcnn_small on scenes · detector · test mAP@50 0.93' (the run picker's and the pages' words)."""
    try:
        section, summary = scene_config(run), run.summary()
        return (
            f"{model_name(run, section)} on {dataset_name(run, section)} · {task_word(section)} · {score_text(summary)}"
        )
    except Exception as e:  # noqa: BLE001 - a damaged run must still be listed (and deletable)
        return f"{run.id} (unreadable: {e})"


def scene_picker_label(run: Run) -> str:
    """The run picker's option: 'fasterrcnn_small · scenes · mAP@50 0.93 · 11-28 12:10' (plus the state when not
    completed)."""
    try:
        c, section, summary = run.config(), scene_config(run), run.summary()
    except Exception:  # noqa: BLE001 - a damaged run is still listed; picking it shows why it cannot be used
        return f"⚠ unreadable · {run.id}"
    when = time.strftime("%m-%d %H:%M", time.localtime(c.get("created", 0)))
    key = summary.get("headline")
    top = headline(test_scores(summary), key) or headline(val_scores(summary), key)
    flag = "⚠ " if quality_label(run, summary).startswith("⚠") else ""
    parts = [
        f"{flag}{model_name(run, section)}",
        dataset_name(run, section),
        f"{top[0]} {top[1]:.2f}" + (" poor" if flag else "") if top else "unmeasured",
    ]
    state = scene_state(run, summary)
    return " · ".join([*parts, when] + ([state] if state != "completed" else []))


def scene_row(run: Run, live: str | None = None) -> dict[str, Any]:
    """One row of the runs table: model, data set, state, epochs, and its test mAP@50 (a detector) or mIoU in the
    scene columns (percentages, as the accuracy columns, so they sort by number). `live`: the state column while this
    server trains it ('running · 45%')."""
    section, summary = scene_config(run), run.summary()
    scores = test_scores(summary)
    return {
        "run": run.id,
        "model": model_name(run, section),
        "data set": dataset_name(run, section),
        "state": live or scene_state(run, summary),
        "epochs": epochs_text(section, summary),
        "mAP@50": 100 * scores["map_50"] if "map_50" in scores else None,
        "mIoU": 100 * scores["miou"] if "miou" in scores else None,
        "quality": quality_label(run, summary),
    }


def scene_settings_rows(run: Run) -> list[tuple[str, str]]:
    """(setting, value) pairs that describe a scene run to a person."""
    section, summary = scene_config(run), run.summary()
    settings = section.get("settings") or {}
    classes = section.get("classes") or []
    size = section.get("image_size")
    rows = [
        ("model", f"{model_name(run, section)} ({task_word(section)})"),
        ("data set", dataset_name(run, section)),
        ("classes", ", ".join(map(str, classes)) or "–"),
        ("image size", f"{size} x {size} px" if size else "as the images come"),
    ]
    recipe = section.get("recipe") or {}
    count = settings.get("train_count")
    rows += [
        ("epochs", str(settings.get("epochs", "–"))),
        ("batch size", str(settings.get("batch_size", "–"))),
        ("learning rate", f"{settings['lr']:g}" if isinstance(settings.get("lr"), (int, float)) else "–"),
        ("optimizer", str(recipe.get("optimizer", "–"))),
        ("training images", f"the first {count:,}" if isinstance(count, int) else "the whole train split"),
        ("seed", str(settings.get("seed", "–"))),
        ("device", str(run.config().get("device", "–"))),
    ]
    rows += [
        ("state", scene_state(run, summary)),
        ("epochs done", epochs_text(section, summary)),
        ("kept", str(summary.get("kept") or "–")),
        (
            "training time",
            duration_text(summary["elapsed_s"]) if isinstance(summary.get("elapsed_s"), (int, float)) else "–",
        ),
    ]
    return rows
