"""Fault injection for the run store (issue 12, data loss): run ids never reach outside the runs root, a run
being written has one writer, interrupted writes leave nothing behind, a full disk fails the run cleanly.
Each case is built in a temporary root; run alone with `pytest -m faults`."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xaidash.dashboard.cli import main
from xaidash.models.registry import ModelError
from xaidash.models.runs.lock import LOCK, RunLock, RunLocked, is_locked
from xaidash.models.runs.store import WEIGHTS, delete_run, list_runs, resolve_run, runs_root
from xaidash.models.training import engine, finish
from xaidash.models.training.config import TrainConfig, TrainingFailed
from xaidash.models.training.engine import train

pytestmark = pytest.mark.faults
SMALL = {"dataset": "digits", "model": "mlp", "epochs": 1, "max_train_samples": 200, "device": "cpu"}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A precious folder outside the runs root, shaped like a run so only the location protects it."""
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "thesis.txt").write_text("years of work")
    return folder


def trained() -> str:
    return train(TrainConfig(**SMALL)).run.id


@pytest.mark.parametrize("how", ["relative", "absolute", "dot", "dotdot"])
def test_delete_never_leaves_the_runs_root(outside: Path, how: str, capsys) -> None:
    root = runs_root()
    root.mkdir(parents=True, exist_ok=True)
    keep = trained()
    argument = {
        "relative": os.path.relpath(outside, root),
        "absolute": str(outside),
        "dot": ".",
        "dotdot": "..",
    }[how]
    cwd = os.getcwd()
    os.chdir(root)  # a relative path is read from where the user stands
    try:
        assert main(["runs", "--delete", argument]) != 0
    finally:
        os.chdir(cwd)
    assert "runs root" in capsys.readouterr().err
    assert (outside / "thesis.txt").read_text() == "years of work"
    assert [r.id for r in list_runs()] == [keep]


def test_a_link_out_of_the_root_is_not_a_run(outside: Path) -> None:
    root = runs_root()
    root.mkdir(parents=True, exist_ok=True)
    (root / "sneaky").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ModelError, match="leads out of the runs root"):
        delete_run("sneaky")
    with pytest.raises(ModelError, match="leads out"):
        resolve_run("sneaky")
    assert (outside / "thesis.txt").exists()


def test_only_run_folders_are_deleted() -> None:
    root = runs_root()
    (root / "notes").mkdir(parents=True)
    with pytest.raises(ModelError, match="not found"):
        delete_run("notes")
    assert (root / "notes").is_dir()


def test_ids_with_separators_or_nul_are_refused() -> None:
    for bad in ("a/b", "a\\b", "", "x\x00y"):
        with pytest.raises(ModelError):
            resolve_run(bad)


def hold_lock_in_another_process(folder: Path) -> subprocess.Popen[bytes]:
    """A live process that owns the run's lock (what a second `xaidash train --resume` would meet)."""
    code = (
        "import sys, time; from pathlib import Path; from xaidash.models.runs.lock import RunLock; "
        "RunLock.acquire(Path(sys.argv[1])); print('held', flush=True); time.sleep(120)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
    return proc


def test_a_second_writer_is_refused_and_changes_nothing() -> None:
    run = resolve_run(trained())
    before = {p.name: p.read_bytes() for p in run.path.iterdir() if p.is_file() and p.name != LOCK}
    owner = hold_lock_in_another_process(run.path)
    try:
        with pytest.raises(RunLocked, match=f"process {owner.pid}"):
            train(TrainConfig(epochs=2, device="cpu"), resume=run.id)
        with pytest.raises(RunLocked, match="stop it first"):
            delete_run(run.id)
        after = {p.name: p.read_bytes() for p in run.path.iterdir() if p.is_file() and p.name != LOCK}
        assert after == before
    finally:
        owner.kill()
        owner.wait()


def test_a_stale_lock_and_leftover_temporaries_are_cleaned_on_resume() -> None:
    run = resolve_run(trained())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run.path / LOCK).write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename, "started": 0}))
    (run.path / f".{WEIGHTS}.abc123.tmp").write_bytes(b"half a checkpoint")  # SIGKILL during a save
    (run.path / "checkpoints" / ".epoch_002.safetensors.x.tmp").write_bytes(b"half")
    assert not is_locked(run.path)
    result = train(TrainConfig(epochs=2, device="cpu"), resume=run.id)
    assert result.state == "completed" and result.epochs_done == 2
    assert not list(run.path.rglob("*.tmp")) and not (run.path / LOCK).exists()


def test_the_lock_is_released_however_training_ends(monkeypatch) -> None:
    def fail(*_args, **_kwargs):
        raise TrainingFailed("loss became NaN")

    def interrupt(event) -> None:
        if event.kind == "start":
            raise KeyboardInterrupt  # a second Ctrl-C in the CLI

    with pytest.raises(KeyboardInterrupt):
        train(TrainConfig(**SMALL), callbacks=[interrupt])
    monkeypatch.setattr(engine, "run_epoch", fail)  # where train() finds it
    result = train(TrainConfig(**SMALL))
    assert result.state == "failed"
    for run in list_runs():
        assert not (run.path / LOCK).exists(), run.id
        RunLock.acquire(run.path).release()  # free again


def test_a_full_disk_fails_the_run_and_keeps_the_last_checkpoint(monkeypatch) -> None:
    real_save = finish.save_weights
    calls = {"n": 0}

    def save_until_full(model, path, meta=None) -> None:
        calls["n"] += 1
        if calls["n"] > 2:  # epoch 1's two files are written, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_save(model, path, meta)

    monkeypatch.setattr(finish, "save_weights", save_until_full)  # where write_checkpoint and finish_run find it
    result = train(TrainConfig(**{**SMALL, "epochs": 3}))
    assert result.state == "failed" and "disk is full" in (result.error or "")
    summary = result.run.summary()
    assert summary["state"] == "failed" and "disk is full" in summary["error"]
    assert summary["epochs_done"] == 1 and (result.run.path / WEIGHTS).is_file()
    assert not list(result.run.path.rglob("*.tmp")) and not (result.run.path / LOCK).exists()


def test_bad_settings_leave_no_run_folder() -> None:
    for bad in ({"workers": -1}, {"seed": -3}, {"momentum": 1.5}, {"max_train_samples": -5}):
        with pytest.raises(ModelError, match="Invalid training settings"):
            train(TrainConfig(**{**SMALL, **bad}))
    assert not runs_root().exists() or not any(runs_root().iterdir())


def test_a_named_pipe_in_an_image_folder_is_skipped_not_waited_on(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    from xaidash.data.registry import get_source, load_split

    for name in ("cat", "dog"):
        (tmp_path / "pets" / name).mkdir(parents=True)
        for i in range(5):
            Image.fromarray(np.full((16, 16, 3), 40 * i, np.uint8)).save(tmp_path / "pets" / name / f"{i}.png")
    os.mkfifo(tmp_path / "pets" / "cat" / "stuck.png")  # reading it would block forever
    source = get_source(f"imagefolder:{tmp_path / 'pets'}?size=16")
    assert source.info.classes == ("cat", "dog")
    assert len(load_split(f"imagefolder:{tmp_path / 'pets'}?size=16", "train")) == 8


def test_a_data_set_too_small_to_split_says_how_many_samples_it_needs(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    from xaidash.data.errors import DatasetError
    from xaidash.data.registry import get_source

    for name in ("cat", "dog"):
        (tmp_path / "tiny" / name).mkdir(parents=True)
        for i in range(2):
            Image.fromarray(np.full((16, 16, 3), 60 * i, np.uint8)).save(tmp_path / "tiny" / name / f"{i}.png")
    with pytest.raises(DatasetError, match=r"too few to split 80/20.*at least 10 samples"):
        get_source(f"imagefolder:{tmp_path / 'tiny'}?size=16")
