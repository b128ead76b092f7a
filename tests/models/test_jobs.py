"""The background job manager: one worker at a time, queues trained in order, progress from engine events,
stop (which also cancels what is queued), failures."""

from __future__ import annotations

import threading
import time

import pytest

from xaidash.dashboard.jobs import JobBusy, JobManager, QueueSnapshot
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import list_runs
from xaidash.models.training.config import TrainConfig, TrainEvent


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
    assert snap.state == "failed" and "an unexpected error in training: disk on fire" in snap.error
    assert "RuntimeError" not in snap.error  # no class name in what the page shows (issue 36)
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


def gated_train(calls: list[str], gates: dict[str, threading.Event]):
    """A stand-in engine that records which model it trains and waits for that model's gate (or a stop)."""

    def fn(cfg, callbacks, stop):
        calls.append(cfg.model)
        for cb in callbacks:
            cb(TrainEvent(kind="start", run_id=f"run-{cfg.model}", epochs=2, total_steps=10))
            cb(TrainEvent(kind="step", run_id=f"run-{cfg.model}", epoch=1, epochs=2, step=5, total_steps=10))
        while not (gates[cfg.model].is_set() or stop.is_set()):
            time.sleep(0.01)
        result = FakeResult("stopped" if stop.is_set() else "completed")
        result.run = type("R", (), {"id": f"run-{cfg.model}"})()
        return result

    return fn


def queue_of(*models: str) -> list[TrainConfig]:
    return [TrainConfig(dataset="shapes", model=m) for m in models]


def test_a_queue_trains_its_configs_one_after_another_in_one_worker():
    calls: list[str] = []
    gates = {m: threading.Event() for m in ("mlp", "vit_tiny")}
    manager = JobManager(train_fn=gated_train(calls, gates))
    started = manager.start_queue(queue_of("mlp", "vit_tiny"), name="Quick start")
    assert isinstance(started, QueueSnapshot) and started.size == 2 and started.active
    assert started.jobs[0].active and started.jobs[1].queued
    wait_for(lambda: manager.current() is not None and manager.current().step == 5)
    q = manager.queue()
    assert q.position == 1 and q.current.label == "mlp on shapes" and q.progress == pytest.approx(0.25)
    assert manager.busy() and calls == ["mlp"]  # the second waits for the first
    with pytest.raises(JobBusy, match=r"run 1 of 2 of Quick start: mlp on shapes, 50% done"):
        manager.start(TrainConfig(dataset="digits", model="mlp"))
    gates["mlp"].set()
    wait_for(lambda: manager.queue().position == 2 and manager.current().step == 5)
    assert calls == ["mlp", "vit_tiny"] and manager.current().queue_position == 2
    assert manager.queue().progress == pytest.approx(0.75)
    gates["vit_tiny"].set()
    manager.wait(5)
    done = manager.queue()
    assert done.finished and not manager.busy() and done.progress == 1.0
    assert [(j.state, j.run_id, j.test_acc) for j in done.jobs] == [
        ("completed", "run-mlp", 0.75),
        ("completed", "run-vit_tiny", 0.75),
    ]


def test_stop_ends_the_current_job_and_cancels_the_queued_ones():
    calls: list[str] = []
    gates = {m: threading.Event() for m in ("mlp", "vit_tiny", "resnet_small")}
    manager = JobManager(train_fn=gated_train(calls, gates))
    manager.start_queue(queue_of("mlp", "vit_tiny", "resnet_small"))
    wait_for(lambda: manager.current() is not None and manager.current().state == "running")
    assert manager.stop() is True
    manager.wait(5)
    q = manager.queue()
    assert [j.state for j in q.jobs] == ["stopped", "cancelled", "cancelled"]
    assert calls == ["mlp"] and not manager.busy() and manager.stop() is False
    assert manager.current().label == "mlp on shapes"  # the last job that ran, not a cancelled one


def test_a_failed_job_does_not_stop_the_rest_of_its_queue():
    def fn(cfg, callbacks, stop):
        if cfg.model == "mlp":
            raise ModelError("no luck")
        return FakeResult("completed")

    manager = JobManager(train_fn=fn)
    manager.start_queue(queue_of("mlp", "vit_tiny"))
    manager.wait(5)
    assert [(j.state, j.error) for j in manager.queue().jobs] == [("failed", "no luck"), ("completed", None)]


def test_a_queue_with_one_bad_config_is_refused_whole():
    manager = JobManager(train_fn=stepping_train(threading.Event()))
    with pytest.raises(ModelError, match="is a text model"):
        manager.start_queue(
            [TrainConfig(dataset="digits", model="mlp"), TrainConfig(dataset="digits", model="text_cnn")]
        )
    with pytest.raises(ModelError, match="Nothing to train"):
        manager.start_queue([])
    assert manager.queue() is None and not manager.busy()
