"""The server's SAE job with a stand-in training: one at a time, progress and the SAE's id reach the snapshot, Stop
ends it resumable, the curve is thinned past its limit, a failure is one line (never a class name)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

from xaidash.dashboard import sae_jobs
from xaidash.models.language.sae.config import SaeConfig
from xaidash.models.language.sae.train import SaeEvent
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run

CONFIG = SaeConfig(layer=1, tokens=4096, batch_tokens=4)


def fake_training(steps: int):
    def train(run, config, on_event, stop: threading.Event, resume=None, device="auto", on_folder=None):
        on_folder("sae-1")
        for step in range(1, steps + 1):
            if stop.is_set():
                return SimpleNamespace(id="sae-1", status="stopped", config=config)
            on_event(SaeEvent("train", step, steps, step * 4, steps * 4, 0.01 * step, mse=1.0 / step))
            time.sleep(0.002)
        return SimpleNamespace(id="sae-1", status="finished", config=config)

    return train


def test_one_job_progress_stop_and_end(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sae_jobs, "train_sae", fake_training(100_000))
    job = sae_jobs.BackgroundSae()
    run = Run(tmp_path / "r")
    assert job.start(run, CONFIG) and not job.start(run, CONFIG), "one job at a time"
    deadline = time.time() + 10
    while job.snapshot().last is None:
        assert time.time() < deadline
        time.sleep(0.01)
    snap = job.snapshot()
    assert snap.active and snap.state == "running" and snap.sae_id == "sae-1" and snap.run_id == run.id
    assert job.stop() and job.snapshot().state == "stopping"
    snap = job.wait(10)
    assert snap.state == "stopped" and not snap.active and snap.finished is not None
    assert 0 < len(snap.steps) <= sae_jobs.MAX_CURVE_POINTS
    assert snap.steps[-1].step == snap.last.step  # the newest step is always kept
    assert [e.step for e in snap.steps] == sorted(e.step for e in snap.steps)
    assert not job.stop(), "nothing to stop"

    monkeypatch.setattr(sae_jobs, "train_sae", fake_training(5))
    assert job.start(run, CONFIG)
    snap = job.wait(10)
    assert snap.state == "finished" and [e.step for e in snap.steps] == [1, 2, 3, 4, 5]


def test_a_failure_is_one_line(monkeypatch, tmp_path: Path) -> None:
    def refused(*args, **kwargs):
        raise ModelError("Width 0: an SAE needs between 1 and 131,072 features.")

    def crashed(*args, **kwargs):
        raise RuntimeError("CUDA error: out of memory")

    job = sae_jobs.BackgroundSae()
    monkeypatch.setattr(sae_jobs, "train_sae", refused)
    assert job.start(Run(tmp_path / "r"), CONFIG)
    snap = job.wait(10)
    assert snap.state == "failed" and snap.error == "Width 0: an SAE needs between 1 and 131,072 features."
    monkeypatch.setattr(sae_jobs, "train_sae", crashed)
    assert job.start(Run(tmp_path / "r"), CONFIG)
    snap = job.wait(10)
    assert snap.state == "failed" and "out of memory" in snap.error and "RuntimeError" not in snap.error
