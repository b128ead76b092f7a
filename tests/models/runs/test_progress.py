"""`run_progress(run)`: where a run stands and whether it can be resumed or trained on, read from its folder alone,
and agreeing with what `train(resume=...)` then does (issue 29: Resume and "train N more epochs" for stopped and
finished runs)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

from torch import nn
from train_configs import quick

from xaidash.models.runs.checkpoint import save_training_state, save_weights
from xaidash.models.runs.lock import LOCK
from xaidash.models.runs.progress import RunProgress, run_progress
from xaidash.models.runs.store import STATE, WEIGHTS, Run, resolve_run
from xaidash.models.training.config import TrainEvent
from xaidash.models.training.engine import train


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def made_run(state: str, *, done: int = 0, partial: int = 0, weights: bool = True, lock_pid: int | None = None) -> Run:
    """A run folder as the engine leaves it after `done` epochs (+ `partial` steps) of 3, in `state`."""
    run = Run.create("digits", "mlp")
    run.write_config({"model": "mlp", "dataset": "digits", "train": {"epochs": 3}, "created": time.time()})
    run.update_summary(state=state, epochs_done=done, partial_steps=partial, steps_per_epoch=20, epochs=3)
    if weights:
        model = nn.Linear(4, 2)
        save_weights(model, run.file(WEIGHTS))
        optimizer = __import__("torch").optim.SGD(model.parameters(), lr=0.1)
        save_training_state(
            run.file(STATE), optimizer, {"epoch": done, "step": 20 * done + partial, "partial_steps": partial}
        )
    if lock_pid is not None:
        lock = {"pid": lock_pid, "host": socket.gethostname(), "started": time.time(), "heartbeat": time.time()}
        (run.path / LOCK).write_text(json.dumps(lock))
    return run


def test_a_completed_run_can_be_trained_on_to_more_epochs_and_the_engine_agrees():
    first = train(quick(epochs=1, max_train_samples=300))
    p = run_progress(first.run)
    assert isinstance(p, RunProgress) and p.run_id == first.run.id
    assert (p.state, p.epochs_done, p.partial_steps, p.epochs_planned) == ("completed", 1, 0, 1)
    assert not p.can_resume and p.can_extend and p.min_epochs == 2 and p.total_after(2) == 3
    assert "All 1 planned epochs are done" in p.why_not and f"--resume {first.run.id} --epochs 2" in p.why_not
    assert p.command(3) == f"xaidash train --resume {first.run.id} --epochs 3"
    more = train(quick(epochs=p.total_after(2)), resume=first.run.id)
    assert more.state == "completed" and more.epochs_done == 3
    after = run_progress(resolve_run(first.run.id))
    assert (after.state, after.epochs_done, after.epochs_planned, after.can_resume) == ("completed", 3, 3, False)


def test_a_run_stopped_inside_an_epoch_resumes_the_rest_of_it_to_its_planned_epochs():
    stop = threading.Event()

    def stop_at_first_record(e: TrainEvent) -> None:
        if e.kind == "step":
            stop.set()

    first = train(quick(epochs=2, batch_size=16), callbacks=[stop_at_first_record], stop=stop)
    p = run_progress(first.run)
    assert p.state == "stopped" and p.epochs_done == 0 and p.partial_steps > 0 and p.epochs_planned == 2
    assert p.can_resume and p.can_extend and p.why_not == "" and p.steps_per_epoch
    assert p.command() == f"xaidash train --resume {first.run.id}"
    resumed = train(quick(), resume=first.run.id)  # no epochs given: the run's own plan
    assert resumed.state == "completed" and resumed.epochs_done == 2


def test_a_run_trained_by_a_live_process_is_running_elsewhere_whatever_its_summary_says():
    for recorded in ("running", "stopped", "completed"):  # a resume starting: its summary still says stopped
        p = run_progress(made_run(recorded, done=1, lock_pid=os.getpid()))
        assert p.state == "running" and p.running_elsewhere and p.owner_pid == os.getpid()
        assert p.owner_host == socket.gethostname()
        assert not p.can_resume and not p.can_extend and f"process {os.getpid()}" in p.why_not


def test_an_interrupted_run_resumes_from_its_checkpoint_and_one_without_weights_cannot():
    killed = run_progress(made_run("running", done=2, lock_pid=dead_pid()))
    assert killed.state == "interrupted" and killed.epochs_done == 2 and killed.can_resume and killed.can_extend
    early = run_progress(made_run("running", weights=False, lock_pid=dead_pid()))
    assert early.state == "interrupted" and not early.can_resume and not early.can_extend
    assert "before its first checkpoint" in early.why_not and "xaidash runs --delete" in early.why_not


def test_epochs_done_come_from_the_training_state_the_engine_resumes_from():
    run = made_run("stopped", done=2)
    run.update_summary(epochs_done=1)  # a writer killed between the training state and the summary
    assert run_progress(run).epochs_done == 2


def test_failed_and_imported_runs_are_not_trained_on():
    failed = made_run("failed", done=1)
    failed.update_summary(error="Loss became NaN")
    p = run_progress(failed)
    assert p.state == "failed" and not p.can_resume and not p.can_extend and "Loss became NaN" in p.why_not
    imported = Run.create("digits", "mlp")
    imported.write_config(
        {"model": "mlp", "dataset": "digits", "modality": "image", "source": {"kind": "zoo", "record": {}}}
    )
    imported.update_summary(state="imported")
    p = run_progress(imported)
    assert p.state == "imported" and not p.can_extend and "not trained here" in p.why_not
