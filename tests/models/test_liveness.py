"""A run's state is a fact (issue 15): the lock's heartbeat, `run_liveness`, `latest`, NaN weights, and real
trainings killed with SIGKILL or stopped with SIGINT, before and after their first checkpoint."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
from torch import nn

from xaidash.dashboard.cli import main
from xaidash.models.registry import ModelError
from xaidash.models.runs import lock as runlock
from xaidash.models.runs.checkpoint import nonfinite_tensors, save_weights
from xaidash.models.runs.lock import LOCK, RunLock, owner_alive, read_lock, read_lock_file
from xaidash.models.runs.store import (
    WEIGHTS,
    Run,
    delete_run,
    has_usable_weights,
    list_runs,
    resolve_run,
    run_liveness,
    runs_root,
    weights_problem,
)
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train


# ---- the lock's heartbeat ------------------------------------------------------------------------------------------
def test_the_heartbeat_advances_while_held_and_the_lock_goes_with_release(tmp_path, monkeypatch):
    monkeypatch.setattr(runlock, "HEARTBEAT_S", 0.05)
    lock = RunLock.acquire(tmp_path)
    first = read_lock_file(tmp_path)
    assert first is not None and first["pid"] == os.getpid() and first["token"] == lock.token
    deadline = time.monotonic() + 5
    while read_lock_file(tmp_path)["heartbeat"] == first["heartbeat"]:  # type: ignore[index]
        assert time.monotonic() < deadline, "the heartbeat never moved"
        time.sleep(0.02)
    assert not list(tmp_path.glob(".lock.*.tmp"))  # each beat is an atomic rename
    lock.release()
    assert not (tmp_path / LOCK).exists() and lock._thread is not None and not lock._thread.is_alive()


def test_a_lock_taken_over_is_neither_refreshed_nor_removed_by_its_old_owner(tmp_path):
    old = RunLock.acquire(tmp_path, heartbeat=False)
    new = RunLock.acquire(tmp_path, heartbeat=False)  # this process may take its own lock again
    assert not old.beat()
    old.release()
    assert read_lock_file(tmp_path)["token"] == new.token  # type: ignore[index]
    new.release()


def test_another_hosts_owner_is_judged_by_its_heartbeat():
    now = time.time()
    other = {"pid": 1, "host": "another-machine", "started": now - 3600}
    assert owner_alive({**other, "heartbeat": now - 5}, now)
    assert not owner_alive({**other, "heartbeat": now - runlock.STALE_S - 1}, now)
    assert owner_alive(other, now)  # a lock from before heartbeats: nothing to judge by, trusted as before


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ---- run_liveness, latest, delete on fabricated runs ------------------------------------------------------------
def fake_run(state: str, *, weights: str | None = None, lock: dict | None = None, epochs_done: int = 0) -> Run:
    """A run folder as the engine leaves it: config, summary, maybe weights (finite or 'nan') and a lock."""
    run = Run.create("digits", "mlp")
    run.write_config({"model": "mlp", "dataset": "digits", "train": {"epochs": 3}, "created": time.time()})
    kept = f"weights after epoch {epochs_done} of 3" if epochs_done else "nothing yet"
    run.update_summary(state=state, epochs_done=epochs_done, epochs=3, kept=kept)
    if weights is not None:
        model = nn.Linear(4, 2)
        if weights == "nan":
            with torch.no_grad():
                model.weight[0, 0] = float("nan")
        save_weights(model, run.file(WEIGHTS))
        save_weights(model, run.checkpoint_path(max(epochs_done, 1)))
    if lock is not None:
        (run.path / LOCK).write_text(json.dumps(lock))
    time.sleep(0.01)  # distinct folder times: list_runs is newest first
    os.utime(run.path)
    return run


def test_a_running_run_whose_writer_is_gone_is_interrupted_everywhere(capsys):
    here = socket.gethostname()
    alive = fake_run("running", lock={"pid": os.getpid(), "host": here, "started": 0})
    killed = fake_run("running", weights="ok", epochs_done=2, lock={"pid": dead_pid(), "host": here, "started": 0})
    far = {"pid": 1, "host": "another-machine", "started": 0, "heartbeat": time.time() - 3600}
    stale_elsewhere = fake_run("running", weights="ok", epochs_done=1, lock=far)
    unlocked = fake_run("running")  # killed between its folder and its first checkpoint, lock gone too
    assert run_liveness(alive).state == "running" and run_liveness(alive).owner["pid"] == os.getpid()  # type: ignore[index]
    for run in (killed, stale_elsewhere, unlocked):
        assert run_liveness(run).state == "interrupted"
    live = run_liveness(killed)
    assert live.resumable and live.checkpoint_epoch == 2
    assert f"xaidash train --resume {killed.id}" in live.advice and "epoch 2 of 3" in live.advice
    assert not run_liveness(unlocked).resumable and "nothing to resume" in run_liveness(unlocked).advice
    assert json.loads((killed.path / "summary.json").read_text())["state"] == "running"  # readers never write

    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    table = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0].startswith("20")}
    assert " running " in table[alive.id] and " interrupted " in table[killed.id]
    assert f"interrupted: {killed.id}: " in out and f"xaidash train --resume {killed.id}" in out
    assert f"interrupted: {unlocked.id}: " in out and f"xaidash runs --delete {unlocked.id}" in out

    # A stale lock does not protect the folder; a live one does.
    delete_run(stale_elsewhere.id)
    delete_run(unlocked.id)
    with pytest.raises(ModelError, match="stop it first"):
        delete_run(alive.id)


def test_latest_is_the_newest_run_with_usable_weights():
    older = fake_run("completed", weights="ok", epochs_done=3)
    fake_run("failed", weights="ok")
    nan = fake_run("completed", weights="nan", epochs_done=3)
    fake_run("running", lock={"pid": os.getpid(), "host": socket.gethostname(), "started": 0}, weights="ok")
    fake_run("running")  # interrupted before its first checkpoint
    fake_run("stopped")  # stopped before its first step: no weights
    assert list_runs()[-1].id == older.id
    assert resolve_run("latest").id == older.id
    assert not has_usable_weights(nan) and "NaN or infinite" in (weights_problem(nan) or "")
    interrupted = fake_run("running", weights="ok", epochs_done=1)  # its last checkpoint is usable
    assert resolve_run("latest").id == interrupted.id


def test_latest_says_why_when_no_run_has_usable_weights():
    fake_run("failed", weights="ok")
    with pytest.raises(ModelError, match="has usable weights"):
        resolve_run("latest")


# ---- real trainings, killed or interrupted ----------------------------------------------------------------------
# `xaidash train` in a fresh interpreter, its step events slowed (0.1 s each, about 20 per epoch) so the test can
# act before or after the first checkpoint; the CLI's code path is otherwise unchanged.
SLOW_CLI = """
import sys, time
from xaidash.models import cli
shown = cli.ProgressPrinter.__call__
def slowly(self, event):
    if event.kind == "step":
        time.sleep(0.1)
    shown(self, event)
cli.ProgressPrinter.__call__ = slowly
from xaidash.dashboard.cli import main
sys.exit(main(sys.argv[1:]))
"""
ARGS = ["train", "--dataset", "digits", "--model", "mlp", "--epochs", "3", "--max-train-samples", "400"]
ARGS += ["--batch-size", "16", "--device", "cpu", "--quiet"]


def start_training() -> subprocess.Popen[str]:
    env = {**os.environ, "XAIDASH_RUNS": str(runs_root())}
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_CLI, *ARGS], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(proc: subprocess.Popen[str], checkpoint: bool, timeout: float = 60) -> Run:
    """The run once it is training (before its first checkpoint), or once its first epoch is saved."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        runs = list_runs()
        if runs:
            s = runs[0].summary()
            if s.get("state") == "running" and (s.get("epochs_done", 0) >= 1) == checkpoint:
                return runs[0]
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the training never got there")


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def state_listed(run: Run, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["runs"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(run.id))
    return line.split()[3]


@pytest.mark.slow  # two interpreters train (each ~10 s on 2 cores)
def test_sigkill_leaves_an_interrupted_run_that_resumes_or_is_deleted(capsys):
    early = start_training()
    run = wait_for(early, checkpoint=False)
    early.send_signal(signal.SIGKILL)
    assert finish(early)[0] == -signal.SIGKILL
    assert state_listed(run, capsys) == "interrupted" and not run_liveness(run).resumable
    with pytest.raises(ModelError, match=r"has usable weights"):
        resolve_run("latest")
    with pytest.raises(ModelError, match="no checkpoint to resume from"):
        train(TrainConfig(device="cpu"), resume=run.id)
    # The listing settled the folder (issue 29); the refused resume wrote nothing over it.
    assert run.summary()["state"] == "interrupted" and "interrupted_at" in run.summary()
    delete_run(run.id)

    late = start_training()
    run = wait_for(late, checkpoint=True)
    late.send_signal(signal.SIGKILL)
    finish(late)
    assert read_lock(run.path) is None and (run.path / LOCK).exists()  # the dead owner's lock is still there
    assert state_listed(run, capsys) == "interrupted" and run_liveness(run).resumable
    assert resolve_run("latest").id == run.id  # its last checkpoint is usable
    result = train(TrainConfig(device="cpu"), resume=run.id)  # takes over the stale lock
    assert result.state == "completed" and result.epochs_done == 3
    assert state_listed(run, capsys) == "completed" and not (run.path / LOCK).exists()


@pytest.mark.slow  # two interpreters train (each ~10 s on 2 cores)
def test_ctrl_c_stops_like_the_stop_button_before_and_after_the_first_checkpoint(capsys):
    for checkpoint in (False, True):
        proc = start_training()
        run = wait_for(proc, checkpoint=checkpoint)
        time.sleep(0.3)  # a few steps into the epoch
        proc.send_signal(signal.SIGINT)
        code, out, err = finish(proc)
        assert code == 0, err
        assert f"stopped: run {run.id}" in out and "kept: weights after" in out
        s = run.summary()
        assert s["state"] == "stopped" and s["partial_steps"] > 0 and s["epochs_done"] == int(checkpoint)
        assert state_listed(run, capsys) == "stopped" and run.file(WEIGHTS).exists()
        assert resolve_run("latest").id == run.id
    result = train(TrainConfig(device="cpu"), resume=run.id)  # the rest of the cut epoch, then the others
    assert result.state == "completed" and result.epochs_done == 3 and result.partial_steps == 0


def test_nonfinite_tensors_finds_nan_and_inf_in_any_float_type_without_false_alarms(tmp_path):
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    with torch.no_grad():
        model[1].weight[0, 0] = 3e38
        model[1].weight[0, 1] = 3e38  # the sum overflows; every value is finite
    save_weights(model, tmp_path / "big.safetensors")
    assert nonfinite_tensors(tmp_path / "big.safetensors") == []
    with torch.no_grad():
        model[0].bias[1] = float("-inf")
    half = nn.Linear(2, 2).to(torch.bfloat16)
    with torch.no_grad():
        half.weight[0, 0] = float("nan")
    save_weights(model, tmp_path / "inf.safetensors")
    save_weights(half, tmp_path / "bf16.safetensors")
    assert nonfinite_tensors(tmp_path / "inf.safetensors") == ["0.bias"]
    assert nonfinite_tensors(tmp_path / "bf16.safetensors") == ["weight"]
