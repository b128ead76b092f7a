"""The whole-set self-influence job: streamed in chunks written under the run, stopped by an Event and continued
where it stopped (finished chunks are not recomputed), a partial table while it runs, progress with an ETA, the
cache started afresh when a checkpoint changes (flags kept), and `xaidash influence --self --export`."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from inspect_runs import make_run

from xaidash.dashboard.cli import main
from xaidash.explainers.influence import (
    SelfInfluenceStatus,
    get_influence_method,
    run_self_influence,
    self_influence_status,
    self_influence_table,
)
from xaidash.explainers.influence.self_influence import self_dir
from xaidash.models.runs.store import Run
from xaidash.models.training.data import training_samples

CHUNK = 1024


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setattr(get_influence_method("tracin_fast").scorer, "chunk_size", CHUNK)
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    return make_run(tmp_path / "runs", "shapes", "mlp", epochs=2)


def test_stop_resume_and_table(run: Run) -> None:
    assert self_influence_status(run) is None and self_influence_table(run) is None
    total = len(training_samples(run))
    stop, seen = threading.Event(), []

    def progress(status: SelfInfluenceStatus) -> None:
        seen.append(status)
        if len(seen) == 2:
            stop.set()

    first = run_self_influence(run, progress=progress, stop=stop, device="cpu")
    assert not first.complete and first.done == 2 * CHUNK and first.total == total
    assert seen[-1].eta_s is not None and seen[-1].eta_s > 0
    assert self_influence_status(run) == first
    partial = self_influence_table(run)
    assert partial is not None and len(partial) == 2 * CHUNK
    folder = self_dir(run, "tracin_fast")
    kept = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.safetensors")}
    assert len(kept) == 2

    done = run_self_influence(run, device="cpu")
    assert done.complete and done.done == total and done.seconds >= first.seconds
    assert all(folder.joinpath(name).stat().st_mtime_ns == t for name, t in kept.items()), "finished chunks reused"
    table = self_influence_table(run)
    assert table is not None and len(table) == total
    assert list(table.columns) == ["rank", "index", "label", "dataset_label", "predicted", "probability", "score"]
    assert table["score"].is_monotonic_decreasing and (table["score"] >= 0).all()
    assert sorted(table["index"]) == sorted(training_samples(run).indices.tolist())
    assert table["probability"].between(0, 1).all()


def test_changed_checkpoint_starts_afresh_and_keeps_flags(run: Run) -> None:
    run_self_influence(run, device="cpu")
    flags = run.path / "influence" / "flags.json"
    flags.write_text(json.dumps({"version": 1, "flags": {"3": ""}}))
    _, path = run.checkpoints()[-1]
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # the run was trained further
    stop = threading.Event()
    stop.set()
    status = run_self_influence(run, stop=stop, device="cpu")
    assert status.done == 0 and not status.complete
    assert self_influence_table(run) is not None and len(self_influence_table(run)) == 0
    assert flags.exists()


def test_cli_self_export(run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "exports" / "self.json"
    assert main(["influence", "--run", run.id, "--self", "-k", "3", "--export", str(out), "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert "ETA" in captured.err and f"{len(training_samples(run)):,}/" in captured.err
    assert "rank" in captured.out and f"wrote {out}" in captured.out
    rows = json.loads(out.read_text())
    assert len(rows) == len(training_samples(run)) and rows[0]["rank"] == 1
    assert {"label_name", "dataset_label_name", "flipped"} <= set(rows[0])
