"""No file of a dead writer survives the next open (issue 29): a training killed with SIGKILL leaves its run's
temporary files and a `running` summary; listing, opening or resuming the run removes the first and marks the
second interrupted (with the time it was found), under the run's lock and never while a live writer holds it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime

import pytest
from train_configs import quick

from xaidash.dashboard.cli import main
from xaidash.models.runs.lock import LOCK, RunLock, RunLocked, read_lock_file
from xaidash.models.runs.progress import run_progress
from xaidash.models.runs.store import SUMMARY, WEIGHTS, Run, list_runs, resolve_run, run_liveness, runs_root
from xaidash.models.runs.tidy import settle_run
from xaidash.models.training.engine import train

pytestmark = pytest.mark.faults

CHECKPOINT_TMP = "checkpoints/.epoch_001.safetensors.k3x9q2.tmp"


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def left_behind(pid: int, *, weights: bool = False) -> Run:
    """What SIGKILL mid-checkpoint leaves: a `running` summary, the lock of process `pid`, the checkpoint's
    temporary file, plus the temporary files of writers that work without the lock (calibration, caches)."""
    run = Run.create("digits", "mlp")
    run.write_config({"model": "mlp", "dataset": "digits", "train": {"epochs": 3}, "created": time.time()})
    run.update_summary(state="running", epochs_done=0, epochs=3, kept="nothing yet")
    if weights:
        run.file(WEIGHTS).write_bytes(b"")
    for name in (CHECKPOINT_TMP, ".summary.json.a1b2.tmp", f"{LOCK}.0123abcd.tmp"):
        (run.path / name).parent.mkdir(parents=True, exist_ok=True)
        (run.path / name).write_bytes(b"half a file")
    for name in (".calibration.json.zz9.tmp", "inspect/activations/.fc-test-n64-mean.safetensors.q7.tmp"):
        (run.path / name).parent.mkdir(parents=True, exist_ok=True)
        (run.path / name).write_bytes(b"another writer's")
    lock = {"pid": pid, "host": socket.gethostname(), "started": time.time(), "heartbeat": time.time()}
    (run.path / LOCK).write_text(json.dumps(lock))
    return run


def writer_temporaries(run: Run) -> list[str]:
    return sorted(
        str(p.relative_to(run.path)) for p in run.path.rglob("*.tmp") if not p.name.startswith((".calibration", ".fc-"))
    )


def recorded(run: Run) -> dict:
    return json.loads((run.path / SUMMARY).read_text())


def assert_settled(run: Run, before: float) -> None:
    assert writer_temporaries(run) == []
    assert (run.path / ".calibration.json.zz9.tmp").exists()  # other writers' files are theirs
    assert (run.path / "inspect/activations/.fc-test-n64-mean.safetensors.q7.tmp").exists()
    s = recorded(run)
    assert s["state"] == "interrupted"
    found = datetime.fromisoformat(s["interrupted_at"])
    assert found.tzinfo is not None and before - 1 <= found.timestamp() <= time.time() + 1
    assert not (run.path / LOCK).exists()  # the dead writer's lock went with the settling


@pytest.mark.parametrize("how", ["listed", "opened", "xaidash runs", "latest"])
def test_a_dead_writers_run_is_settled_when_it_is_listed_or_opened(how, capsys):
    run = left_behind(dead_pid(), weights=how == "latest")
    mtime = run.path.stat().st_mtime_ns
    before = time.time()
    if how == "listed":
        assert [r.id for r in list_runs()] == [run.id]
    elif how == "opened":
        resolve_run(run.id)
    elif how == "latest":
        resolve_run("latest")
    else:
        assert main(["runs"]) == 0
        out = capsys.readouterr().out
        assert " interrupted " in next(line for line in out.splitlines() if line.startswith(run.id))
        assert f"interrupted: {run.id}: " in out  # the advice is still given for a summary that says so itself
    assert_settled(run, before)
    assert run.path.stat().st_mtime_ns == mtime  # settling is no activity of the run: the list's order holds
    assert run_liveness(run).interrupted and run_liveness(run).advice


def test_a_run_killed_before_its_first_checkpoint_without_a_lock_is_marked_interrupted():
    run = Run.create("digits", "mlp")
    run.write_config({"model": "mlp", "dataset": "digits", "train": {"epochs": 3}, "created": time.time()})
    run.update_summary(state="running", epochs_done=0, epochs=3, kept="nothing yet")
    list_runs()
    s = recorded(run)
    assert s["state"] == "interrupted" and "interrupted_at" in s and s["epochs"] == 3  # the rest is kept
    assert s["kept"] == "nothing"  # no longer "nothing yet": nothing more is coming
    again = s["interrupted_at"]
    list_runs()
    assert recorded(run)["interrupted_at"] == again  # found once: the time is not moved by later listings


def test_a_live_writers_files_and_state_are_never_touched():
    run = left_behind(os.getpid())  # this process is alive: its lock is a live writer's
    list_runs()
    resolve_run(run.id)
    assert CHECKPOINT_TMP in writer_temporaries(run) and recorded(run)["state"] == "running"
    assert "interrupted_at" not in recorded(run)
    assert read_lock_file(run.path)["pid"] == os.getpid()  # type: ignore[index]


def test_a_writer_waits_for_a_reader_settling_the_run_and_a_reader_never_takes_a_writers_lock(tmp_path):
    tidy = RunLock.acquire(tmp_path, heartbeat=False, tidy=True)
    threading.Timer(0.3, tidy.release).start()
    started = time.monotonic()
    writer = RunLock.acquire(tmp_path, heartbeat=False)  # this process: it would have taken its "own" lock over
    assert time.monotonic() - started >= 0.25 and read_lock_file(tmp_path)["token"] == writer.token  # type: ignore[index]
    with pytest.raises(RunLocked):
        RunLock.acquire(tmp_path, heartbeat=False, tidy=True)  # the writer is this very process: refused all the same
    writer.release()


def test_resuming_takes_the_run_on_and_drops_interrupted_at():
    first = train(quick(epochs=1))
    first.run.update_summary(state="running")  # as SIGKILL during the final test evaluation leaves it
    (first.run.path / "checkpoints" / ".epoch_002.safetensors.x.tmp").write_bytes(b"")
    list_runs()
    assert recorded(first.run)["state"] == "interrupted" and "interrupted_at" in recorded(first.run)
    resumed = train(quick(epochs=2), resume=first.run.id)
    assert resumed.state == "completed" and "interrupted_at" not in recorded(first.run)
    assert writer_temporaries(first.run) == []


# A real training in a fresh interpreter, killed with SIGKILL in the middle of writing its second epoch's checkpoint:
# the temporary file is on disk, the rename never happens.
KILLED_MID_WRITE = """
import os, signal
from xaidash.models.runs import checkpoint
from xaidash.models.training.engine import train
from train_configs import quick  # tests/support, on PYTHONPATH
real = checkpoint.save_file
def save_file(tensors, filename, metadata=None):
    real(tensors, filename, metadata=metadata)
    if ".epoch_002.safetensors." in filename:
        os.kill(os.getpid(), signal.SIGKILL)  # the bytes are written, the rename is not
checkpoint.save_file = save_file
train(quick(epochs=3, max_train_samples=300))
"""


@pytest.mark.slow  # a fresh interpreter trains (about 10 s on 2 cores)
def test_sigkill_in_the_middle_of_a_checkpoint_write_leaves_nothing_after_the_next_listing(capsys):
    support = os.path.join(os.path.dirname(__file__), "..", "..", "support")
    path = os.pathsep.join(p for p in (support, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "XAIDASH_RUNS": str(runs_root()), "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    proc = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    run = Run(next(p for p in runs_root().iterdir() if p.is_dir()))
    assert [p.name for p in (run.path / "checkpoints").glob(".epoch_002.safetensors.*.tmp")]  # the fault happened
    assert recorded(run)["state"] == "running" and (run.path / LOCK).exists()
    before = time.time()
    assert main(["runs"]) == 0
    assert f"xaidash train --resume {run.id}" in capsys.readouterr().out
    assert writer_temporaries(run) == [] and not (run.path / LOCK).exists()
    s = recorded(run)
    assert s["state"] == "interrupted" and before - 1 <= datetime.fromisoformat(s["interrupted_at"]).timestamp()
    assert s["epochs_done"] == 1 and run_progress(run).can_resume
    assert settle_run(run.path).interrupted_at is None  # nothing left to settle


def test_a_run_found_clean_is_looked_at_again_once_its_folder_changes():
    run = Run.create("digits", "mlp")
    run.write_config({"model": "mlp", "dataset": "digits", "train": {"epochs": 3}, "created": time.time()})
    run.update_summary(state="completed", epochs_done=3, epochs=3)
    (run.path / "checkpoints").mkdir()
    old = time.time() - 60
    for folder in (run.path, run.path / "checkpoints"):
        os.utime(folder, (old, old))
    list_runs()  # clean: remembered by the folders' times
    (run.path / CHECKPOINT_TMP).write_bytes(b"half")  # SIGKILL while a resume (since dead) wrote a checkpoint
    list_runs()
    assert writer_temporaries(run) == [] and recorded(run)["state"] == "completed"
