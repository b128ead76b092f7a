"""Training scene models into run folders: the files, Stop and resume, the run kind, the one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.support.scene_runs import tiny_scene_run
from xaidash.data.errors import DatasetError
from xaidash.models.registry import ModelError
from xaidash.models.runs.progress import run_progress
from xaidash.models.runs.store import list_runs, load_bundle, resolve_run
from xaidash.models.runs.table import runs_table
from xaidash.models.scenes.loading import load_scene_run
from xaidash.models.scenes.predictions import Detections, Segmentation
from xaidash.models.scenes.train import SceneTrainSettings, train_scene_model


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_a_detector_run_holds_its_files_and_loads(tmp_path: Path) -> None:
    events: list = []
    run = train_scene_model(
        SceneTrainSettings("scenes", "fasterrcnn_small", epochs=1, batch_size=4, train_count=8, eval_count=4),
        root=tmp_path,
        on_event=events.append,
    )
    config, summary = run.config(), run.summary()
    facts = config["scene_model"]
    assert facts["task"] == "detect" and facts["image_size"] == 96 and facts["classes"][0] == "circle"
    assert facts["settings"]["lr"] == 2e-3  # the recipe's, written down
    assert summary["state"] == "completed" and summary["epochs_done"] == 1 and summary["headline"] == "map_50"
    assert {"map", "map_50", "map_75"} <= set(summary["test_metrics"]) and "map" in summary["val_metrics"]
    kinds = [r["kind"] for r in run.metrics()]
    assert kinds.count("epoch") == 1 and kinds[-1] == "test"
    assert run.file("model.safetensors").is_file() and run.checkpoint_path(1).is_file()
    assert run.kind == "scene_model" and run.usable
    assert events[0].phase == "start" and events[-1].phase == "end" and events[-1].state == "completed"
    steps = [e for e in events if e.phase == "step"]
    assert [e.step for e in steps] == [1, 2] and steps[-1].total_steps == 2
    bundle = load_scene_run(run.path, "cpu")
    assert bundle.task == "detect" and bundle.classes == ("circle", "square", "triangle", "cross")
    assert not bundle.model.training and isinstance(bundle.predict([torch.rand(3, 96, 96)])[0], Detections)
    # the rest of the app sees it without error, and the classifier loader refuses it in one line
    assert [r.id for r in list_runs(tmp_path)] == [run.id]
    row = runs_table(tmp_path)[0]
    assert row["model"] == "fasterrcnn_small" and row["state"] == "completed" and "map" in row["test acc"]
    with pytest.raises(ModelError, match="detection/segmentation model: use the Scenes page") as e:
        load_bundle(run)
    assert "\n" not in str(e.value)


def test_stop_leaves_a_resumable_run_and_resume_matches_an_unbroken_run(tmp_path: Path) -> None:
    whole = tiny_scene_run("segment", tmp_path / "a")
    stopped = tiny_scene_run("segment", tmp_path / "b", stop_after=1)
    s = stopped.summary()
    assert s["state"] == "stopped" and s["epochs_done"] == 0 and s["partial_steps"] == 1
    assert "1 of 2 steps" in s["kept"] and stopped.file("train_state.safetensors").is_file()
    assert not stopped.checkpoints()
    progress = run_progress(stopped)
    assert progress.can_resume and progress.command() == f"xaidash scenes train --resume {stopped.id}"
    resumed = train_scene_model(None, resume=stopped)
    assert resumed.summary()["state"] == "completed" and resumed.summary()["epochs_done"] == 1
    a, b = load_file(str(whole.file("model.safetensors"))), load_file(str(resumed.file("model.safetensors")))
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5, msg=key)
    assert isinstance(load_scene_run(resumed.path, "cpu").predict([torch.rand(3, 96, 96)])[0], Segmentation)


def test_resume_with_more_epochs_goes_on(tmp_path: Path) -> None:
    run = tiny_scene_run("detect", tmp_path)
    created = run.config()["created"]
    run = train_scene_model(SceneTrainSettings("", "", epochs=2), resume=run)
    assert run.summary()["epochs_done"] == 2 and [e for e, _ in run.checkpoints()] == [1, 2]
    assert run.config()["created"] == created and run.config()["scene_model"]["settings"]["epochs"] == 2
    epochs = [r["epoch"] for r in run.metrics() if r["kind"] == "epoch"]
    assert epochs == [1, 2]


def _coco_without_masks(folder: Path) -> Path:
    from PIL import Image

    (folder / "images").mkdir(parents=True)
    Image.new("RGB", (32, 32)).save(folder / "images" / "a.png")
    doc = {
        "images": [{"id": 1, "file_name": "a.png", "width": 32, "height": 32}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [2, 2, 10, 10]}],
        "categories": [{"id": 1, "name": "thing"}],
    }
    path = folder / "boxes.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("dataset", "model", "error", "words"),
    [
        ("scenes", "yolo", ModelError, "Unknown scene model 'yolo'"),
        ("nope", "unet_small", DatasetError, "Unknown scene set 'nope'"),
        ("scenes", "unet_small", ModelError, "learning rate"),
        ("COCO", "unet_small", ModelError, "has no masks"),
    ],
)
def test_refusals_are_one_line_and_leave_no_folder(tmp_path: Path, dataset: str, model: str, error, words: str) -> None:
    if dataset == "COCO":
        dataset = f"coco:{_coco_without_masks(tmp_path / 'coco')}"
    lr = -1.0 if words == "learning rate" else None
    root = tmp_path / "runs"
    with pytest.raises(error) as e:
        train_scene_model(SceneTrainSettings(dataset, model, lr=lr, epochs=1, train_count=2), root=root)
    assert words in str(e.value) and "\n" not in str(e.value)
    assert not root.exists() or not any(root.iterdir())


def test_resolve_run_by_id_and_missing_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path))
    run = tiny_scene_run("detect", tmp_path, stop_after=0)
    assert resolve_run(run.id).kind == "scene_model"
    assert load_scene_run(run.id, "cpu").task == "detect"  # a stop before the first step keeps the initial weights
    run.file("model.safetensors").unlink()
    with pytest.raises(ModelError, match="no weights yet"):
        load_scene_run(run.id)
