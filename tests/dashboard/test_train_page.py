"""The Train page and Home's quick start through AppTest: the form filled from the recipe (and the user's
edits kept), the runs table selecting by row, what a stop kept, comparing runs, the demo queue, and the
poor-accuracy warning on every page that shows a model."""

from __future__ import annotations

import functools
import json
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from app_pages import assert_ok, open_page, texts
from app_pages import make_app as _make_app
from streamlit.testing.v1 import AppTest

from xaidash.dashboard.components import quickstart
from xaidash.dashboard.services import job_manager
from xaidash.data.registry import get_info
from xaidash.models.registry import get_spec, models_for, recommended_model
from xaidash.models.runs.lock import RunLock
from xaidash.models.runs.quality import run_warning
from xaidash.models.runs.store import WEIGHTS, Run, resolve_run
from xaidash.models.training.config import TrainConfig, TrainEvent

TIMEOUT = 120
make_app = functools.partial(_make_app, timeout=TIMEOUT)
FORM_KEYS = {
    "epochs": "train_epochs",
    "batch_size": "train_batch",
    "lr": "train_lr",
    "optimizer": "train_opt",
    "schedule": "train_sched",
    "augment": "train_aug",
    "weight_decay": "train_wd",
}


def button(at: AppTest, label: str):
    found = [b for b in at.button if b.label == label]
    assert found, f"no button {label!r}; have {[b.label for b in at.button]}"
    return found[0]


def quick_start_button(at: AppTest):
    """'Train the demo models', or '... again' right after a quick start ran in this server (the job manager
    outlives sessions, and tests)."""
    found = [b for b in at.button if b.label.startswith("Train the demo models")]
    assert found, [b.label for b in at.button]
    return found[0]


def table(at: AppTest, key: str):
    found = [d for d in at.dataframe if d.key == key]
    assert found, f"no table {key!r}"
    return found[0].value


def click_row(at: AppTest, key: str, run_id: str) -> None:
    """What a click on a row does in the browser: the table's selection state names that row."""
    rows = list(table(at, key)["run"])
    at.session_state[key] = {"selection": {"rows": [rows.index(run_id)], "columns": [], "cells": []}}
    at.run()
    assert_ok(at)


def form_values(at: AppTest) -> dict:
    return {field: at.session_state[key] for field, key in FORM_KEYS.items()}


def recipe_values(model: str, dataset: str) -> dict:
    settings = get_spec(model).recipe(get_info(dataset))[1].settings()
    return {field: settings[field] for field in FORM_KEYS}


@pytest.fixture(autouse=True)
def _no_job_left_running():
    yield
    manager = job_manager()
    manager.stop()
    manager.wait(60)


def test_the_form_follows_the_recipe_and_keeps_the_users_edits():
    at = open_page(make_app(), "views/train.py")
    shapes = get_info("shapes")
    # The data set's recommended model is preselected, and every field holds its recipe.
    assert at.selectbox(key="train_model").value == recommended_model(shapes).name
    assert form_values(at) == recipe_values(recommended_model(shapes).name, "shapes")
    note = " ".join(texts(at.markdown))
    assert "tested:" in note or "untested" in note or "not measured" in note
    # Another model: every field is re-filled from that model's recipe.
    other = next(s.name for s in models_for(shapes) if s.name != recommended_model(shapes).name)
    at.selectbox(key="train_model").set_value(other).run()
    assert_ok(at)
    assert form_values(at) == recipe_values(other, "shapes")
    # The user's edits survive reruns and a visit to another page.
    at.number_input(key="train_epochs").set_value(7)
    at.number_input(key="train_lr").set_value(0.0123).run()
    at.run()
    assert at.session_state["train_epochs"] == 7 and at.session_state["train_lr"] == pytest.approx(0.0123)
    at.switch_page("views/home.py").run()
    at.switch_page("views/train.py").run()
    assert_ok(at)
    assert at.selectbox(key="train_model").value == other
    assert at.number_input(key="train_epochs").value == 7
    # ... until the data set changes: its recommended model and that model's recipe.
    at.selectbox(key="train_dataset").set_value("cues").run()
    assert_ok(at)
    cues_model = recommended_model(get_info("cues")).name
    assert at.selectbox(key="train_model").value == cues_model
    assert form_values(at) == recipe_values(cues_model, "cues")
    # Reset to recipe undoes an edit.
    at.number_input(key="train_epochs").set_value(99).run()
    button(at, "Reset to recipe").click().run()
    assert form_values(at) == recipe_values(cues_model, "cues")


def test_a_new_batch_size_scales_the_recipes_learning_rate_until_the_user_types_one(monkeypatch):
    at = open_page(make_app(), "views/train.py")
    at.selectbox(key="train_dataset").set_value("mnist").run()
    at.selectbox(key="train_model").set_value("simple_cnn").run()
    assert_ok(at)
    assert (at.session_state["train_batch"], at.session_state["train_lr"]) == (64, 0.01)
    at.number_input(key="train_batch").set_value(256).run()
    assert at.session_state["train_lr"] == pytest.approx(0.02)  # Adam: the square root of 4x
    assert any("scaled to batch 256 (by the square root, for adam)" in c for c in texts(at.caption))
    at.number_input(key="train_batch").set_value(32).run()
    assert at.session_state["train_lr"] == pytest.approx(0.01)  # below the recipe's batch: the recipe's rate
    at.number_input(key="train_batch").set_value(256).run()
    at.number_input(key="train_lr").set_value(0.003).run()
    at.number_input(key="train_batch").set_value(512).run()
    assert at.session_state["train_lr"] == pytest.approx(0.003)  # typed: kept
    assert not any("scaled to batch" in c for c in texts(at.caption))
    at.selectbox(key="train_compile").set_value("graphs").run()
    at.checkbox(key="train_channels_last").check().run()
    assert_ok(at)
    started: list[TrainConfig] = []
    monkeypatch.setattr(job_manager(), "start", lambda cfg, **kw: started.append(cfg) or job_manager().current())
    button(at, "Start training").click().run()
    (cfg,) = started
    assert (cfg.batch_size, cfg.lr, cfg.compile, cfg.channels_last) == (512, 0.003, "graphs", True)


def test_a_click_on_a_row_selects_the_run_for_every_page(runs):
    at = open_page(make_app(runs["text"]), "views/train.py")
    shown = table(at, "train_runs_table")
    assert set(shown["run"]) == {runs["image"], runs["text"]}
    assert {"state", "epochs", "val acc", "test acc", "quality"} <= set(shown.columns)
    click_row(at, "train_runs_table", runs["image"])
    assert at.session_state["xai_selected_run"] == runs["image"]
    assert "**mlp** on **shapes**" in texts(at.sidebar.markdown)
    # The selected run's settings as a two-column table (a static one: its cells wrap).
    settings = next(d.value for d in at.table if list(d.value.columns) == ["setting", "value"])
    rows = dict(zip(settings["setting"], settings["value"], strict=True))
    assert rows["model"] == "mlp" and rows["data set"] == "shapes" and rows["state"] == "completed"
    # Home's table selects the same way, and shows the session's run as selected.
    at.switch_page("views/home.py").run()
    click_row(at, "home_runs_table", runs["text"])
    assert at.session_state["xai_selected_run"] == runs["text"]
    assert "**text_cnn** on **cues**" in texts(at.sidebar.markdown)


def test_deleting_the_selected_row_needs_a_confirmation(runs, tmp_path, monkeypatch):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(runs["root"], root)
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = open_page(make_app(runs["image"]), "views/train.py")
    assert button(at, "Delete run").disabled
    at.checkbox(key="train_confirm_delete").check().run()
    button(at, "Delete run").click().run()
    assert_ok(at)
    assert any(f"Deleted run {runs['image']}" in v for v in texts(at.success))
    assert list(table(at, "train_runs_table")["run"]) == [runs["text"]]


def stand_in_engine(root: Path, gate: threading.Event):
    """Trains nothing: writes a run folder as the engine does, logs 3 steps of a 47-step epoch, waits for a
    stop, then writes the summary the engine writes for a stop inside the first epoch."""

    def fn(cfg, callbacks, stop):
        run = Run.create(cfg.dataset, cfg.model, root)
        # Locked before anything is written, as the engine locks it (models/training/session.py): a page listing the
        # runs meanwhile tidies an unlocked folder, and would take this writer's temporary file for a dead one's.
        lock = RunLock.acquire(run.path, run.id)
        resolved = asdict(cfg) | {"epochs": 5, "batch_size": 16}
        run.write_config(
            {"model": cfg.model, "dataset": cfg.dataset, "classes": list(get_info(cfg.dataset).classes)}
            | {"train": resolved, "device": "cpu", "created": time.time(), "lr": 0.01}
        )
        run.update_summary(state="running", epochs_done=0, epochs=5)
        for cb in callbacks:
            cb(TrainEvent(kind="start", run_id=run.id, epochs=5, total_steps=235))
        for step in (1, 2, 3):
            for cb in callbacks:
                cb(
                    TrainEvent(
                        kind="step",
                        run_id=run.id,
                        epoch=1,
                        epochs=5,
                        step=step,
                        total_steps=235,
                        train_loss=2.0 - 0.1 * step,
                        train_acc=0.2 + 0.05 * step,
                    )
                )
        gate.set()
        while not stop.is_set():
            time.sleep(0.01)
        run.file(WEIGHTS).write_bytes(b"")  # weights exist (the page never loads them here)
        kept = "weights after 3 of 47 steps of epoch 1; no epoch completed"
        run.update_summary(state="stopped", epochs_done=0, partial_steps=3, steps_per_epoch=47, kept=kept, test_acc=0.3)
        lock.release()
        result = type("R", (), {})()
        result.run, result.state, result.error, result.test_acc, result.test_loss = run, "stopped", None, 0.3, 1.7
        return result

    return fn


def test_a_stop_in_the_first_epoch_says_what_was_kept(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    gate = threading.Event()
    monkeypatch.setattr(job_manager(), "train_fn", stand_in_engine(root, gate))
    at = open_page(make_app(), "views/train.py")
    at.selectbox(key="train_dataset").set_value("digits").run()
    at.selectbox(key="train_model").set_value("mlp").run()
    button(at, "Start training").click().run()
    assert_ok(at)
    assert gate.wait(10)
    at.run()
    # While it trains, the run is listed as running with its progress.
    job = job_manager().current()
    row = table(at, "train_runs_table").set_index("run").loc[job.run_id]
    assert row["state"].startswith("running · 1%"), row["state"]
    assert at.progress and "Epoch 1/5 · step 3/235" in at.progress[0].text
    # Clicking it before it has weights keeps the selection pending, and says so.
    click_row(at, "train_runs_table", job.run_id)
    assert at.session_state.get("xai_selected_run") != job.run_id
    assert any("has no weights yet" in c for c in texts(at.caption))
    button(at, "Stop").click().run()
    job_manager().wait(10)
    at.run()
    at.run()  # the page reruns once when it sees the job end
    assert_ok(at)
    warnings = " ".join(texts(at.warning))
    assert "Kept: weights after 3 of 47 steps of epoch 1; no epoch completed." in warnings, warnings
    row = table(at, "train_runs_table").set_index("run").loc[job.run_id]
    assert row["state"] == "stopped" and row["epochs"] == "0/5 (+3/47 steps)"
    assert "1/5" not in [m.value for m in at.metric]
    # Now it has weights: the pending click made it the selected run.
    assert at.session_state["xai_selected_run"] == job.run_id


def test_compare_runs_overlays_curves_and_lines_up_settings(runs):
    at = open_page(make_app(), "views/train.py")
    # By default never a text run beside an image run: the selected run alone, with what to do.
    picked = at.multiselect(key="compare_runs_pick").value
    assert len(picked) == 1 and picked[0] in {runs["image"], runs["text"]}
    assert any("No other run of the same data set" in c for c in texts(at.caption))
    at.multiselect(key="compare_runs_pick").set_value([runs["image"], runs["text"]]).run()
    metrics = next(d.value for d in at.dataframe if "test acc" in d.value.columns and "samples/s" in d.value.columns)
    assert len(metrics) == 2 and set(metrics["test acc"]) == {50.0}
    settings = next(d.value for d in at.dataframe if d.value.index.name is None and "model" in d.value.index)
    assert sorted(settings.loc["model"]) == ["mlp", "text_cnn"]
    assert any("that differ" in v for v in texts(at.markdown))
    at.multiselect(key="compare_runs_pick").set_value([runs["image"]]).run()
    assert any("at least two runs" in c for c in texts(at.caption))


def tiny_demo() -> list[TrainConfig]:
    return [
        TrainConfig(dataset="digits", model="mlp", epochs=1, batch_size=64, max_train_samples=200),
        TrainConfig(dataset="digits", model="mlp", epochs=1, batch_size=64, max_train_samples=200, seed=1),
    ]


@pytest.mark.slow  # trains two tiny models through the job manager
def test_quick_start_queues_the_demo_runs_and_links_them(monkeypatch):
    monkeypatch.setattr(quickstart, "demo_configs", tiny_demo)
    at = make_app()
    at.run()
    assert_ok(at)
    assert any("mlp" in v and "digits" in v for v in texts(at.markdown))  # what it trains
    quick_start_button(at).click().run()
    assert_ok(at)
    queue = job_manager().queue()
    assert queue is not None and queue.name == quickstart.NAME and queue.size == 2
    job_manager().wait(120)
    at.run()
    at.run()
    assert_ok(at)
    done = job_manager().queue()
    assert [j.state for j in done.jobs] == ["completed", "completed"]
    assert any("demo models are trained" in v for v in texts(at.success))
    links = [(link.value, link.proto.query_string) for link in at.page_link]
    for job in done.jobs:
        assert ("Explain", f"run={job.run_id}") in links
    # The session that pressed the button works with the first demo run.
    assert at.session_state["xai_selected_run"] == done.jobs[0].run_id


def test_the_quick_start_stop_cancels_the_queue(monkeypatch):
    release = threading.Event()

    def waiting(cfg, callbacks, stop):
        for cb in callbacks:
            cb(TrainEvent(kind="start", run_id="x", epochs=1, total_steps=10))
        while not (release.is_set() or stop.is_set()):
            time.sleep(0.01)
        raise RuntimeError("stopped")

    monkeypatch.setattr(quickstart, "demo_configs", tiny_demo)
    monkeypatch.setattr(job_manager(), "train_fn", waiting)
    at = make_app()
    at.run()
    quick_start_button(at).click().run()
    assert any("Run 1 of 2" in p.text for p in at.progress), [p.text for p in at.progress]
    sidebar = " ".join(texts(at.sidebar.caption))
    assert "Quick start, run 1 of 2" in sidebar, sidebar
    # A second start while the demo trains is refused with a message.
    at.switch_page("views/train.py").run()
    button(at, "Start training").click().run()
    assert any("already running (run 1 of 2 of Quick start" in v for v in texts(at.error)), texts(at.error)
    at.switch_page("views/home.py").run()
    button(at, "Stop the quick start").click().run()
    job_manager().wait(10)
    assert [j.state for j in job_manager().queue().jobs] == ["failed", "cancelled"]


def test_a_poor_model_is_flagged_on_every_page_that_shows_it(runs, monkeypatch):
    poor = resolve_run(runs["text"])  # text_cnn on cues, two classes, test accuracy 50%: chance
    message = run_warning(poor)
    assert message, "the fixture's text run should count as poor"
    assert run_warning(resolve_run(runs["image"])) is None
    at = make_app(runs["text"])
    at.run()
    assert message in texts(at.sidebar.warning)
    for page in ("explain", "compare", "attention", "embeddings", "model", "receptive_fields"):
        at.switch_page(f"views/{page}.py").run()
        assert_ok(at)
        assert message in texts(at.main.warning), (page, texts(at.main.warning))
    good = make_app(runs["image"])
    good.run()
    good.switch_page("views/explain.py").run()
    assert not any("untrained" in w or "far below" in w for w in texts(good.warning))


def test_the_job_panel_draws_the_run_from_its_folder_when_another_process_resumes_it(tmp_path, monkeypatch):
    """The issue: after Stop, `xaidash train --resume` went on with the run while the page still said "Stopped",
    then "Stopped" after it had finished. The panel reads the folder: running elsewhere, then finished."""
    import socket
    import subprocess

    from xaidash.models.runs.lock import LOCK

    root = tmp_path / "runs"
    gate = threading.Event()
    monkeypatch.setattr(job_manager(), "train_fn", stand_in_engine(root, gate))
    at = open_page(make_app(), "views/train.py")
    at.selectbox(key="train_dataset").set_value("digits").run()
    at.selectbox(key="train_model").set_value("mlp").run()
    button(at, "Start training").click().run()
    assert gate.wait(10)
    at.run()
    button(at, "Stop").click().run()
    job_manager().wait(10)
    at.run()
    at.run()
    run = resolve_run(job_manager().current().run_id)
    labels = [b.label for b in at.button]
    assert "Resume" in labels and "Train 2 more epochs" in labels  # stopped: both ways on
    # Another process (a terminal's `xaidash train --resume`) takes the run and trains it.
    other = subprocess.Popen(["sleep", "120"])
    try:
        (run.path / LOCK).write_text(
            json.dumps({"pid": other.pid, "host": socket.gethostname(), "started": time.time(), "token": "cli"})
        )
        run.update_summary(state="running", epochs_done=2, partial_steps=0, epochs=5)
        at.run()
        at.run()  # the panel starts following it
        assert_ok(at)
        assert any(f"Running elsewhere (process {other.pid}): 2 of 5 epochs done" in v for v in texts(at.info))
        assert "Resume" not in [b.label for b in at.button]
        assert not any(v.startswith("Stopped") for v in texts(at.warning))
    finally:
        other.kill()
        other.wait()
    (run.path / LOCK).unlink()
    run.update_summary(state="completed", epochs_done=5, partial_steps=0, test_acc=0.9, train_seconds=12.0, kept="")
    at.run()
    at.run()
    assert_ok(at)
    assert any(
        "Finished in 12s (its last training session): test accuracy 90.0% (5 of 5 epochs done)" in v
        for v in texts(at.success)
    )
    labels = [b.label for b in at.button]
    assert "Resume" not in labels and "Train 2 more epochs" in labels


def start_stand_in_job(at: AppTest, root: Path, monkeypatch) -> str:
    """Start the stand-in engine's job from the form; the run it trains (alive, locked, no weights yet)."""
    gate = threading.Event()
    monkeypatch.setattr(job_manager(), "train_fn", stand_in_engine(root, gate))
    at.selectbox(key="train_dataset").set_value("digits").run()
    at.selectbox(key="train_model").set_value("mlp").run()
    button(at, "Start training").click().run()
    assert gate.wait(10)
    at.run()
    return job_manager().current().run_id


def test_deleting_the_run_a_job_trains_is_refused_at_once_with_a_stop_button(tmp_path, monkeypatch):
    """The issue: "Delete run" on the run being trained said nothing until the job had ended (the page drew its
    notices only when no job ran). The refusal shows in the same page run, under the button, with a way on."""
    root = tmp_path / "runs"
    at = open_page(make_app(), "views/train.py")
    run_id = start_stand_in_job(at, root, monkeypatch)
    # A click on its row: no weights yet, so pending; its details (and Delete run) show all the same.
    click_row(at, "train_runs_table", run_id)
    assert any(f"Settings of `{run_id}`" in v for v in texts(at.markdown))
    at.checkbox(key="train_confirm_delete").check().run()
    button(at, "Delete run").click().run()
    assert_ok(at)
    assert job_manager().busy()  # refused: the job trains on, the run is kept
    assert (root / run_id / "config.json").exists()
    refusal = f"Run {run_id} is being trained right now: stop the job first, then delete it"
    assert any(refusal in v for v in texts(at.error)), texts(at.error)
    # The way on, beside the message: stop the job, then delete.
    button(at, "Stop the job").click().run()
    job_manager().wait(10)
    assert job_manager().current().state == "stopped"
    at.run()
    at.run()  # the page reruns once when it sees the job end
    assert not any(refusal in v for v in texts(at.error))  # said once, not after the job's end
    at.checkbox(key="train_confirm_delete").check().run()
    button(at, "Delete run").click().run()
    assert_ok(at)
    assert any(f"Deleted run {run_id}." in v for v in texts(at.success)), texts(at.success)
    assert not (root / run_id).exists()


def test_deleting_another_run_while_a_job_trains_says_so_at_once(runs, tmp_path, monkeypatch):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(runs["root"], root)
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = open_page(make_app(runs["image"]), "views/train.py")
    start_stand_in_job(at, root, monkeypatch)
    at.checkbox(key="train_confirm_delete").check().run()
    button(at, "Delete run").click().run()
    assert_ok(at)
    assert job_manager().busy()
    assert any(f"Deleted run {runs['image']}." in v for v in texts(at.success)), texts(at.success)
    assert not (root / runs["image"]).exists()


def test_resume_refused_because_a_job_started_meanwhile_says_so_at_once(tmp_path, monkeypatch):
    """Resume drawn while nothing trained, pressed after another session started a job: the refusal shows in
    the job panel at once (it used to wait for the other job's end)."""
    root = tmp_path / "runs"
    at = open_page(make_app(), "views/train.py")
    start_stand_in_job(at, root, monkeypatch)
    button(at, "Stop").click().run()
    job_manager().wait(10)
    at.run()
    at.run()
    resume = button(at, "Resume")
    assert not resume.disabled
    other = threading.Event()  # another session's job
    monkeypatch.setattr(job_manager(), "train_fn", stand_in_engine(tmp_path / "other", other))
    job_manager().start(TrainConfig(dataset="digits", model="mlp"))
    assert other.wait(10)
    resume.click().run()
    assert_ok(at)
    errors = " ".join(texts(at.error))
    assert "Could not resume" in errors and "already running" in errors, errors
    assert any(b.label == "Stop the job" for b in at.button)  # the way on: stop it (or wait for it)
