"""The server's scene training job with a stand-in training: one at a time, progress, the run's id and the
validation scores reach the snapshot, Stop ends it resumable, the loss curve is thinned past its limit, a failure
is one line (never a class name); and the pure facts the pages say about a scene run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from xaidash.dashboard import scene_jobs
from xaidash.dashboard.components import scene_facts
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run
from xaidash.models.scenes.train import SceneEvent, SceneTrainSettings

SETTINGS = SceneTrainSettings(dataset="scenes", model="fasterrcnn_small", epochs=2)


def fake_training(steps: int, tmp: Path, per_epoch: int = 10):
    """A stand-in for train_scene_model: `steps` steps with an epoch's validation every `per_epoch`."""

    def train(settings, *, root=None, on_event=None, should_stop=None, resume=None):
        run = Run(tmp / "run-1")
        run.path.mkdir(exist_ok=True)
        epochs = -(-steps // per_epoch)
        for step in range(1, steps + 1):
            if should_stop():
                (run.path / "summary.json").write_text(json.dumps({"state": "stopped"}))
                return run
            epoch = (step - 1) // per_epoch + 1
            on_event(SceneEvent("step", run.id, epoch, epochs, step, steps, loss=1.0 / step, elapsed=0.01 * step))
            if step % per_epoch == 0:
                scores = {"map": 0.1 * epoch, "map_50": 0.2 * epoch}
                on_event(
                    SceneEvent(
                        "epoch", run.id, epoch, epochs, step, steps, loss=0.5, metrics=scores, elapsed=0.01 * step
                    )
                )
            # (the real training stamps every event with its elapsed time, epoch events too)
            time.sleep(0.001)
        (run.path / "summary.json").write_text(json.dumps({"state": "completed"}))
        return run

    return train


def wait_for(condition, seconds: float = 10) -> None:
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline
        time.sleep(0.01)


def test_one_job_progress_stop_and_end(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(scene_jobs, "train_scene_model", fake_training(100_000, tmp_path))
    job = scene_jobs.BackgroundScene()
    assert job.start(SETTINGS) and not job.start(SETTINGS), "one job at a time"
    wait_for(lambda: job.snapshot().evals)
    snap = job.snapshot()
    assert snap.active and snap.state == "running" and snap.run_id == "run-1"
    assert snap.label == "fasterrcnn_small on scenes" and 0 < snap.progress < 1
    assert snap.evals[0] == {"step": 10.0, "epoch": 1.0, "map": 0.1, "map_50": 0.2}
    assert job.stop() and job.snapshot().state == "stopping"
    snap = job.wait(10)
    assert snap.state == "stopped" and not snap.active and snap.finished is not None
    assert 0 < len(snap.steps) <= scene_jobs.MAX_CURVE_POINTS
    assert snap.steps[-1]["step"] == snap.last.step or snap.last.phase == "epoch"
    assert snap.eta_s is not None and snap.eta_s > 0
    assert [p["step"] for p in snap.steps] == sorted(p["step"] for p in snap.steps)
    assert not job.stop(), "nothing to stop"

    monkeypatch.setattr(scene_jobs, "train_scene_model", fake_training(20, tmp_path))
    assert job.start(SETTINGS, resume=Run(tmp_path / "run-1"))
    assert job.snapshot().resumed and job.snapshot().run_id == "run-1"
    snap = job.wait(10)
    assert snap.state == "finished" and [p["step"] for p in snap.steps] == list(range(1, 21))
    assert [e["epoch"] for e in snap.evals] == [1, 2] and snap.progress == 1.0


def test_a_failure_is_one_line(monkeypatch) -> None:
    def refused(*args, **kwargs):
        raise ModelError("unet_small segments: scene set 'boxes' has no masks.")

    def crashed(*args, **kwargs):
        raise RuntimeError("CUDA error: out of memory")

    job = scene_jobs.BackgroundScene()
    monkeypatch.setattr(scene_jobs, "train_scene_model", refused)
    assert job.start(SETTINGS)
    snap = job.wait(10)
    assert snap.state == "failed" and snap.error == "unet_small segments: scene set 'boxes' has no masks."
    monkeypatch.setattr(scene_jobs, "train_scene_model", crashed)
    assert job.start(SETTINGS)
    snap = job.wait(10)
    assert snap.state == "failed" and "out of memory" in snap.error and "RuntimeError" not in snap.error


@pytest.mark.parametrize(
    ("summary", "text"),
    [
        ({"test_metrics": {"map": 0.61, "map_50": 0.934}}, "test mAP@50 0.93"),
        ({"val_metrics": {"miou": 0.812}}, "val mIoU 0.81"),
        ({}, "not measured yet"),
    ],
)
def test_a_scene_runs_headline(summary, text) -> None:
    assert scene_facts.score_text(summary) == text
