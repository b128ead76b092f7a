"""The background job manager: one job at a time, progress from engine events, stop, failures."""

from __future__ import annotations

import threading
import time

import pytest

from xaidash.models.engine import TrainConfig, TrainEvent
from xaidash.models.jobs import JobBusy, JobManager
from xaidash.models.registry import ModelError
from xaidash.models.runstore import list_runs


class FakeRun:
    id = "fake-run"


class FakeResult:
    def __init__(self, state: str, error: str | None = None):
        self.run, self.state, self.error, self.test_acc, self.test_loss = FakeRun(), state, error, 0.75, 0.5


def stepping_train(release: threading.Event):
    """A stand-in engine: emits start and one step, then waits for `release` or a stop request."""

    def fn(cfg, callbacks, stop):
        for cb in callbacks:
            cb(TrainEvent(kind="start", run_id="fake-run", epochs=cfg.epochs, total_steps=4))
            cb(
                TrainEvent(
                    kind="step",
                    run_id="fake-run",
                    epoch=1,
                    epochs=cfg.epochs,
                    step=1,
                    total_steps=4,
                    train_loss=1.5,
                    train_acc=0.25,
                    samples_per_s=100.0,
                    eta_s=3.0,
                )
            )
        while not (release.is_set() or stop.is_set()):
            time.sleep(0.01)
        return FakeResult("stopped" if stop.is_set() else "completed")

    return fn


def wait_for(predicate, timeout: float = 5.0) -> None:
    end = time.time() + timeout
    while not predicate():
        if time.time() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def test_progress_then_completion_and_busy_refusal():
    release = threading.Event()
    manager = JobManager(train_fn=stepping_train(release))
    first = manager.start(TrainConfig(dataset="digits", model="mlp", epochs=2))
    assert first.active
    wait_for(lambda: manager.current().step == 1)
    snap = manager.current()
    assert snap.state == "running" and snap.run_id == "fake-run"
    assert snap.progress == pytest.approx(0.25) and snap.eta_s == 3.0
    assert snap.history[0]["train_loss"] == 1.5
    with pytest.raises(JobBusy, match=r"already running.*mlp on digits.*25%"):
        manager.start(TrainConfig(dataset="digits", model="mlp"))
    release.set()
    done = manager.wait(5)
    assert done.state == "completed" and done.test_acc == 0.75 and not done.active and done.finished
    assert not manager.busy()
    manager.start(TrainConfig(dataset="digits", model="mlp"))  # free again
    manager.wait(5)
    assert [j.id for j in manager.jobs()] == [1, 2]


def test_stop_request_ends_the_job_as_stopped():
    manager = JobManager(train_fn=stepping_train(threading.Event()))
    assert manager.stop() is False  # nothing runs
    manager.start(TrainConfig(dataset="digits", model="mlp"))
    wait_for(lambda: manager.current().state == "running")
    assert manager.stop() is True
    snap = manager.wait(5)
    assert snap.state == "stopped" and snap.stop_requested


def test_bad_settings_are_refused_before_any_thread_starts():
    manager = JobManager(train_fn=stepping_train(threading.Event()))
    with pytest.raises(ModelError, match="is a text model"):
        manager.start(TrainConfig(dataset="digits", model="text_cnn"))
    with pytest.raises(ModelError, match="epochs must be at least 1"):
        manager.start(TrainConfig(dataset="digits", model="mlp", epochs=0))
    assert manager.current() is None


def test_a_crash_becomes_a_failed_job_with_the_reason():
    def crashing(cfg, callbacks, stop):
        raise RuntimeError("disk on fire")

    manager = JobManager(train_fn=crashing)
    manager.start(TrainConfig(dataset="digits", model="mlp"))
    snap = manager.wait(5)
    assert snap.state == "failed" and "RuntimeError: disk on fire" in snap.error
    assert not manager.busy()


def test_real_training_in_the_background():
    manager = JobManager()
    manager.start(TrainConfig(dataset="digits", model="mlp", epochs=1, batch_size=64, max_train_samples=300))
    snap = manager.wait(120)
    assert snap.state == "completed", snap.error
    assert snap.test_acc is not None and 0.0 <= snap.test_acc <= 1.0
    assert any(r["kind"] == "epoch" and "val_acc" in r for r in snap.history)
    runs = list_runs()
    assert [r.id for r in runs] == [snap.run_id]
    assert runs[0].summary()["state"] == "completed"
