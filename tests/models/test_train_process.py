"""Training in a child process (what the dashboard's job manager uses): events reach the caller's callbacks,
a stop is passed on, refusals keep their type and words, and a child killed mid-run is reported, not waited on."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading

import pytest
import torch

from xaidash.dashboard.jobs import JobManager
from xaidash.data.errors import DatasetError
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import list_runs, run_liveness
from xaidash.models.training.config import TrainConfig, TrainEvent
from xaidash.models.training.process import train_in_process

SMALL = {"dataset": "digits", "model": "mlp", "epochs": 2, "max_train_samples": 400, "device": "cpu"}


def test_events_and_result_come_back_from_the_child() -> None:
    events: list[TrainEvent] = []
    result = train_in_process(TrainConfig(**SMALL), callbacks=[events.append])
    assert result.state == "completed" and result.epochs_done == 2 and result.kept == "weights after epoch 2 of 2"
    assert events[0].kind == "start" and events[-1].kind == "end"
    assert sum(e.kind == "epoch" for e in events) == 2
    (run,) = list_runs()
    assert run.id == result.run.id == events[0].run_id
    summary = run.summary()
    assert summary["state"] == "completed" and summary["test_acc"] == pytest.approx(result.test_acc)


def test_a_stop_request_reaches_the_child_which_keeps_its_weights() -> None:
    stop = threading.Event()
    result = train_in_process(
        TrainConfig(**{**SMALL, "epochs": 50}),
        callbacks=[lambda e: stop.set() if e.kind == "step" else None],
        stop=stop,
    )
    assert result.state == "stopped" and result.epochs_done < 50
    assert result.run.summary()["state"] == "stopped" and result.kept.startswith("weights after")


def test_refusals_keep_their_type_and_message() -> None:
    with pytest.raises(ModelError, match="no-such-model"):
        train_in_process(TrainConfig(dataset="digits", model="no-such-model", device="cpu"))
    with pytest.raises(DatasetError, match="no-such-data"):
        train_in_process(TrainConfig(dataset="no-such-data", model="mlp", device="cpu"))


def kill_the_child_on_first_step(event: TrainEvent) -> None:
    if event.kind == "step":
        for child in multiprocessing.active_children():
            if child.name.startswith("xaidash-train-"):
                os.kill(child.pid, signal.SIGKILL)


def test_a_killed_child_is_reported_with_how_it_died() -> None:
    with pytest.raises(ModelError, match="killed by SIGKILL"):
        train_in_process(TrainConfig(**{**SMALL, "epochs": 50}), callbacks=[kill_the_child_on_first_step])


def test_a_run_whose_process_died_reads_interrupted_and_its_job_failed() -> None:
    manager = JobManager(train_fn=train_in_process)
    queue = manager.start_queue([TrainConfig(**{**SMALL, "epochs": 50})])
    job = queue.jobs[0]
    deadline = threading.Event()
    while not manager.current() or manager.current().step == 0:  # wait for the first step, then kill
        deadline.wait(0.1)
    kill_the_child_on_first_step(TrainEvent(kind="step", run_id=""))
    while manager.busy():
        deadline.wait(0.1)
    snap = manager.find_queue(queue.id).jobs[0]
    assert snap.id == job.id and snap.state == "failed" and "SIGKILL" in (snap.error or "")
    (run,) = list_runs()
    # The run itself is fine up to its last checkpoint: listed once its process is gone, its folder says interrupted.
    assert run.summary()["state"] == "interrupted" and "interrupted_at" in run.summary()
    assert run_liveness(run).state == "interrupted"


def test_a_cpu_trainer_leaves_one_core_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from xaidash.models.training import process as train_process

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        torch.set_num_threads(8)
        monkeypatch.setattr(train_process.os, "cpu_count", lambda: 4)
        train_process._leave_a_core_for_the_server()
        assert torch.get_num_threads() == 3
        monkeypatch.setattr(train_process.os, "cpu_count", lambda: 1)
        train_process._leave_a_core_for_the_server()
        assert torch.get_num_threads() == 1  # never zero
        torch.set_num_threads(2)
        monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's choice stands
        train_process._leave_a_core_for_the_server()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
