"""The Train page's "Detection and segmentation" tab (AppTest): the form offers the models a scene set can train
(no segmenter on boxes alone) and says a bad path in one line; Start, Stop and Resume a small segmenter from the
page, the run then selected with its scores under Runs; scene runs listed in the runs table but never offered by a
classifier page; `xaidash scenes train` through the command's entry."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from app_pages import assert_ok, make_app, open_page, texts
from inspect_runs import make_run
from PIL import Image
from scene_runs import tiny_scene_run
from streamlit.testing.v1 import AppTest

from xaidash.dashboard.scene_jobs import scene_job
from xaidash.dashboard.state import RUN_KEY, SCENE_KEY
from xaidash.data.formatting import duration_text
from xaidash.models.runs.store import list_runs
from xaidash.models.scenes.zoo import SCENE_MODELS

TAB = "Detection and segmentation"


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def scene_tab(root: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = make_app(timeout=240)
    at.session_state["train_task_tab"] = TAB
    return open_page(at, "views/train.py")


def start_button(at):
    return next(b for b in at.button if b.label.startswith("Start training the"))


def boxes_only_coco(folder: Path) -> Path:
    """A COCO file of one 64 px image with two boxes and no segmentation."""
    Image.new("RGB", (64, 64), (90, 90, 90)).save(folder / "a.png")
    anns = [
        {"id": i + 1, "image_id": 1, "category_id": c, "bbox": [4 + 30 * i, 8, 20, 20], "area": 400, "iscrowd": 0}
        for i, c in enumerate((1, 2))
    ]
    coco = {
        "images": [{"id": 1, "file_name": "a.png", "width": 64, "height": 64}],
        "annotations": anns,
        "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}],
    }
    path = folder / "boxes.json"
    path.write_text(json.dumps(coco))
    return path


def test_the_form_offers_what_the_set_can_train(tmp_path, monkeypatch) -> None:
    at = scene_tab(tmp_path, monkeypatch)
    sets = at.selectbox(key="scene_form_set")
    assert sets.options[:2] == [
        "Scenes (generated shapes) (scenes)",
        "Scenes, hard (clutter and occlusion) (scenes_hard)",
    ]
    models = at.selectbox(key="scene_form_model")
    assert [o.split(" · ")[0] for o in models.options] == ["Faster R-CNN (small, from scratch)", "U-Net (small)"]
    recipe = SCENE_MODELS.get("fasterrcnn_small").recipe
    assert at.number_input(key="scene_form_epochs_fasterrcnn_small").value == recipe.epochs
    assert at.number_input(key="scene_form_batch_fasterrcnn_small").value == recipe.batch_size
    expected = duration_text(recipe.seconds_per_image * 2000 * recipe.epochs)
    assert any(
        f"Expected about **{expected}** (the recipe's pace on a quiet 2-core CPU): {recipe.epochs} epochs of 2,000 "
        "images" in c
        for c in texts(at.caption)
    )
    assert start_button(at).label == "Start training the detector"

    sets.set_value(sets.options[-1]).run()
    at.text_input(key="scene_form_own").set_value(f"coco:{tmp_path / 'nope.json'}").run()
    assert_ok(at)
    assert len(at.error) == 1 and "nope.json" in at.error[0].value and "Traceback" not in at.error[0].value
    assert start_button(at).disabled if any(b.label.startswith("Start training the") for b in at.button) else True

    at.text_input(key="scene_form_own").set_value(f"coco:{boxes_only_coco(tmp_path)}").run()
    assert_ok(at)
    assert not at.error
    models = at.selectbox(key="scene_form_model")
    assert [o.split(" · ")[0] for o in models.options] == ["Faster R-CNN (small, from scratch)"]
    assert any("not offered: U-Net (small) (this data has no masks)" in c for c in texts(at.caption))
    assert list_runs() == [] and not scene_job().snapshot().active


def wait_for_step(seconds: float = 240) -> None:
    deadline = time.time() + seconds
    while (
        scene_job().snapshot().last is None or scene_job().snapshot().last.phase != "step"
    ) and time.time() < deadline:
        time.sleep(0.05)


def test_start_stop_and_resume_from_the_page(tmp_path, monkeypatch) -> None:
    at = scene_tab(tmp_path, monkeypatch)
    at.selectbox(key="scene_form_model").set_value("unet_small").run()
    for key, value in (("epochs", 1), ("count", 64), ("batch", 4)):
        at.number_input(key=f"scene_form_{key}_unet_small").set_value(value).run()
    assert any("1 epochs of 64 images" in c for c in texts(at.caption))
    start_button(at).click().run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    job = scene_job()
    assert job.snapshot().active
    wait_for_step()
    at.run()
    assert_ok(at)
    assert any(m.startswith("**unet_small on scenes**") for m in texts(at.markdown))
    assert next(b for b in at.button if b.label == "Stop").key == "scene_stop"
    at.button(key="scene_stop").click().run()
    snap = job.wait(240)
    assert snap.state == "stopped", snap
    run_id = snap.run_id
    assert 0 < len(snap.steps) < 16

    at.run()
    assert_ok(at)
    assert any(f"Stopped: run `{run_id}` keeps what it trained" in i for i in texts(at.info))
    assert at.session_state[SCENE_KEY] == run_id and RUN_KEY not in at.session_state  # its own slot
    table = at.dataframe[0].value
    row = table[table["run"] == run_id].iloc[0]
    assert row["state"] == "stopped" and row["data set"] == "scenes" and row["epochs"].startswith("0/1")
    at.button(key=f"scene_resume_{run_id}").click().run()
    assert_ok(at)
    snap = job.wait(400)
    assert snap.state == "finished" and snap.run_id == run_id and snap.resumed, snap

    at.run()
    assert_ok(at)
    assert any("unet_small on scenes is trained" in s for s in texts(at.success))
    row = at.dataframe[0].value.set_index("run").loc[run_id]
    summary = json.loads((tmp_path / run_id / "summary.json").read_text())
    assert row["state"] == "completed" and row["mIoU"] == pytest.approx(100 * summary["test_metrics"]["miou"])
    assert "**Test split**" in texts(at.markdown) and "mIoU" in [m.label for m in at.metric]
    # The next run's expected time now comes from this one's measured pace.
    assert any("(earlier runs of this model on this machine): 1 epochs of 64 images" in c for c in texts(at.caption))
    poor = any("is low" in w for w in texts(at.warning))  # models/scenes/quality.py's bar, said beside the scores
    assert row["quality"] == ("⚠ poor" if poor else "✓ good")
    assert len(list_runs()) == 1


def test_scene_runs_are_listed_but_never_offered_to_a_classifier_page(tmp_path, monkeypatch) -> None:
    classifier = make_run(tmp_path, "shapes", "mlp", epochs=1)
    scene = tiny_scene_run("segment", tmp_path)
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path))
    at = open_page(make_app(timeout=240), "views/explain.py")
    picker = at.sidebar.selectbox(key="xai_run_picker")
    assert picker.options and all(scene.id not in o for o in picker.options)
    assert picker.value == classifier.id

    at = make_app(timeout=240)
    at.query_params["run"] = scene.id
    open_page(at, "views/explain.py")
    assert any(f"The link's run `{scene.id}`" in w for w in texts(at.warning))
    assert at.session_state[SCENE_KEY] == scene.id and at.session_state[RUN_KEY] == classifier.id

    at = open_page(make_app(timeout=240), "views/scenes.py")  # the page of scene runs: its picker lists them alone
    picker = at.sidebar.selectbox(key="xai_run_picker")
    assert picker.value == scene.id and len(picker.options) == 1
    assert picker.options[0].startswith("⚠ unet_small · scenes · mIoU")  # a tiny run: flagged as too poor

    at = scene_tab(tmp_path, monkeypatch)
    table = at.dataframe[0].value.set_index("run")
    assert table.loc[scene.id, "data set"] == "scenes" and table.loc[classifier.id, "data set"] == "shapes"
    assert table.loc[scene.id, "mIoU"] > 0 and pd.isna(table.loc[classifier.id, "mIoU"])


def test_xaidash_scenes_train_through_the_command(tmp_path, monkeypatch, capsys) -> None:
    from xaidash.dashboard.cli import main

    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path))
    args = ["scenes", "train", "--data", "scenes", "--model", "unet_small", "--epochs", "1", "--train-count", "8"]
    assert main([*args, "--batch-size", "4", "--eval-count", "4"]) == 0
    out = capsys.readouterr().out
    (run,) = list_runs()
    assert run.kind == "scene_model" and run.id in out and "miou" in out.lower()
    assert main(["scenes", "train", "--data", "scenes", "--model", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: Unknown scene model 'nope'") and len(err.splitlines()) == 1
    assert [r.id for r in list_runs()] == [run.id]
