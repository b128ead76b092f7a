"""`xaidash explain --input dataset:...`: the local engine writes a run's attribution store chunk by chunk,
resumes without recomputing finished chunks or shards, and refuses bad ranges and changed settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from train_configs import tiny_run

from xaidash.explainers import explain
from xaidash.explainers.cli import main
from xaidash.explainers.dataset.explain import (
    ChunkComputer,
    DatasetJob,
    check_range,
    chunks,
    disagreement,
    explain_dataset,
    parse_dataset_range,
)
from xaidash.explainers.dataset.store import open_store, open_store_at, store_dir
from xaidash.explainers.params import ExplainError
from xaidash.models.runs.store import load_bundle

# Two gradient methods, IG with few steps: the store's mechanics, not the maps' quality, are under test.
METHODS = ["saliency", "ig"]
PARAMS = {"saliency": {}, "ig": {"baseline": "black", "steps": 4}}
CLI = ["--methods", "saliency,ig", "--param", "ig.steps=4", "--quiet"]


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dataset_runs")


@pytest.fixture(autouse=True)
def _runs_here(_isolated_roots: None, runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(runs_root))


@pytest.fixture(scope="module")
def image_run(runs_root: Path) -> Path:
    return tiny_run(runs_root, "shapes", "resnet_small")


@pytest.fixture(scope="module")
def text_run(runs_root: Path) -> Path:
    return tiny_run(runs_root, "cues", "text_cnn")


def _job(run: Path, start: int, stop: int, chunk: int = 8) -> DatasetJob:
    return DatasetJob(
        run_path=str(run), split="test", start=start, stop=stop, methods=METHODS, params=PARAMS, chunk_size=chunk,
        steps=4, with_metrics=False, device="cpu",
    )  # fmt: skip


def test_ranges_parse_and_are_checked() -> None:
    assert parse_dataset_range("dataset:all") == (None, None)
    assert parse_dataset_range(" dataset:10:20 ") == (10, 20)
    assert parse_dataset_range("dataset:12") is None and parse_dataset_range("dataset:train:3") is None
    assert check_range(None, None, 1000, "test", "shapes") == (0, 1000)
    assert chunks(5, 30, 10) == [(5, 15), (15, 25), (25, 30)]
    with pytest.raises(ExplainError, match="STOP must be greater than START"):
        check_range(5, 2, 1000, "test", "shapes")
    with pytest.raises(ExplainError, match=r"out of range: the test split of shapes has 1000 samples"):
        check_range(0, 99_999_999, 1000, "test", "shapes")
    with pytest.raises(ExplainError, match="0 or more"):
        check_range(-3, 2, 1000, "test", "shapes")
    with pytest.raises(ExplainError, match="empty"):
        check_range(None, None, 0, "train", "mine")


def test_disagreement_is_one_minus_mean_rank_correlation() -> None:
    a = np.arange(16.0).reshape(4, 4)
    assert disagreement([a, a * 2]) == pytest.approx(0.0)
    assert disagreement([a, -a]) == pytest.approx(2.0)
    assert np.isnan(disagreement([a])) and np.isnan(disagreement([a, np.ones((4, 4))]))


def test_ray_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from xaidash.explainers.dataset.ray_engine import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(ExplainError, match=r"pip install 'xaidash\[ray\]'"):
        import_ray()


def test_cli_writes_the_run_store_with_metrics(image_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "explain",
            "--run",
            image_run.name,
            "--input",
            "dataset:0:20",
            *CLI,
            "--metrics",
            "--steps",
            "4",
            "--chunk-size",
            "8",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    path = store_dir(image_run, "test")
    assert f"attribution store: {path}" in out and "20 of 20 test samples explained" in out
    assert "saliency: " in out and "deletion auc" in out
    store = open_store(image_run, "test")
    assert store is not None
    m = store.manifest
    assert m["complete"] and m["n_done"] == m["n_total"] == 20 and m["engine"] == "local" and m["split_size"] == 1000
    assert m["methods"] == METHODS and m["params"]["ig"]["steps"] == 4 and m["samples_per_s"] > 0
    assert {"deletion_auc", "insertion_auc", "pointing_game", "energy_in_mask", "completeness_gap"} <= set(m["metrics"])
    assert sorted(p.name for p in (path / "maps" / "ig").iterdir()) == ["0-8.safetensors", "16-20.safetensors", "8-16.safetensors"]  # fmt: skip
    samples, metrics = store.samples(), store.metrics()
    assert list(samples["index"]) == list(range(20)) and samples["loss"].notna().all()
    assert samples["disagreement"].between(0, 2).all()
    assert len(metrics) == 40 and metrics["deletion_auc"].notna().all()
    assert metrics[metrics["method"] == "saliency"]["completeness_gap"].isna().all()  # saliency declares no sum
    assert len((path / "samples.jsonl").read_text().splitlines()) == 40

    # The stored maps are explain()'s for the same inputs, whichever chunk they were computed in.
    bundle = load_bundle(image_run, device="cpu")
    from xaidash.data.registry import load_split

    split = load_split("shapes", "test")
    x = split.batch(list(range(5, 11))).float()
    preds = samples.set_index("index").loc[list(range(5, 11)), "pred"].tolist()
    want = explain(bundle, x, preds, "ig", steps=4, seed=0).attributions
    np.testing.assert_allclose(np.stack(store.maps("ig", range(5, 11))), want, rtol=1e-4, atol=1e-6)


def test_a_failed_job_resumes_without_recomputing(image_run: Path, tmp_path: Path, monkeypatch) -> None:
    bundle = load_bundle(image_run, device="cpu")
    out = tmp_path / "store"
    job = _job(image_run, 0, 40)

    def fail_after_two(result) -> None:
        if result.stop >= 16:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        explain_dataset(job, out, bundle=bundle, split_size=1000, progress=False, on_chunk=fail_after_two)
    partial = open_store_at(out)
    assert partial is not None and partial.manifest["n_done"] == 16 and not partial.manifest["complete"]
    assert len(partial.samples()) == 16
    done = {p: p.stat().st_mtime_ns for p in out.rglob("*.safetensors")} | {
        p: p.stat().st_mtime_ns for p in (out / "rows").iterdir()
    }
    # A chunk whose shards are written but whose rows are not: its shards are kept, not recomputed.
    (out / "rows" / "8-16.jsonl").unlink()
    asked: list[tuple[int, tuple[str, ...]]] = []
    compute = ChunkComputer.compute

    def spy(self, start, stop, methods=None):
        asked.append((start, tuple(methods or ())))
        return compute(self, start, stop, methods)

    monkeypatch.setattr(ChunkComputer, "compute", spy)
    outcome = explain_dataset(job, out, bundle=bundle, split_size=1000, progress=False)
    assert asked == [(8, ()), (16, tuple(METHODS)), (24, tuple(METHODS)), (32, tuple(METHODS))]
    assert outcome.skipped == 8 and outcome.computed == 32
    assert outcome.store.manifest["complete"] and len(outcome.store.samples()) == 40
    for p, mtime in done.items():
        if p.name != "8-16.jsonl":
            assert p.stat().st_mtime_ns == mtime, p
    assert not list(out.rglob("*.tmp"))


def test_bad_inputs_get_clear_messages(image_run: Path, tmp_path: Path, capsys) -> None:
    run = ["explain", "--run", image_run.name, *CLI]
    assert main([*run, "--input", "dataset:5:2", "--out", str(tmp_path / "a")]) == 2
    assert "STOP must be greater than START" in capsys.readouterr().err
    assert main([*run, "--input", "dataset:0:99999999", "--out", str(tmp_path / "a")]) == 2
    assert "has 1000 samples" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main([*run, "--input", "dataset:all", "--split", "validation"])
    assert exit_.value.code == 2 and "invalid choice: 'validation'" in capsys.readouterr().err
    assert main([*run, "--input", "dataset:3"]) == 2
    assert "--out DIR is required for a single input" in capsys.readouterr().err
    assert main([*run, "--input", "dataset:0:4", "--target", "1", "--out", str(tmp_path / "a")]) == 2
    assert "--target applies to single inputs" in capsys.readouterr().err

    out = ["--out", str(tmp_path / "s"), "--chunk-size", "4"]
    assert main([*run, "--input", "dataset:0:4", *out]) == 0
    capsys.readouterr()
    changed = ["explain", "--run", image_run.name, "--methods", "saliency", "--quiet", "--input", "dataset:0:4", *out]
    assert main(changed) == 2
    err = capsys.readouterr().err
    assert "made with other settings" in err and "methods: ['saliency', 'ig'] there, ['saliency'] now" in err
    assert "--fresh" in err
    assert main([*changed, "--fresh"]) == 0
    store = open_store_at(tmp_path / "s")
    assert store is not None and store.methods() == ["saliency"] and not (tmp_path / "s" / "maps" / "ig").exists()


def test_text_store_keeps_words(text_run: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "text"
    code = main(["explain", "--run", text_run.name, "--input", "dataset:0:12", *CLI, "--chunk-size", "5", "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    store = open_store_at(out)
    assert store is not None and store.manifest["modality"] == "text"
    from xaidash.data.registry import load_split

    texts = load_split("cues", "test").texts
    words = store.tokens("ig", [0, 7])
    maps = store.maps("ig", [0, 7])
    assert words is not None and [len(w) for w in words] == [len(m) for m in maps]
    assert " ".join(words[1]).lower().split()[0] in texts[7].lower()
    bundle = load_bundle(text_run, device="cpu")
    pred = int(store.samples().set_index("index").loc[7, "pred"])
    e = explain(bundle, [texts[7]], [pred], "ig", steps=4)
    np.testing.assert_allclose(maps[1], e.attributions[0], rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_a_killed_process_resumes_where_it_stopped(image_run: Path, tmp_path: Path) -> None:
    """A real `xaidash explain` killed with SIGKILL after two chunks; running it again finishes the rest and
    leaves the finished chunks' files untouched."""
    out = tmp_path / "killed"
    argv = [sys.executable, "-m", "xaidash.dashboard.cli", "explain", "--run", image_run.name]
    argv += ["--input", "dataset:0:96", *CLI, "--chunk-size", "8", "--out", str(out)]
    env = {**os.environ, "XAIDASH_RUNS": str(image_run.parent), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = out / "rows"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if rows.is_dir() and len(list(rows.glob("*.jsonl"))) >= 2:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = {p: p.stat().st_mtime_ns for p in rows.glob("*.jsonl")}
    assert 2 <= len(kept) < 12, "the job ended before it could be killed halfway"
    manifest = json.loads((out / "manifest.json").read_text())
    assert not manifest["complete"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"({len(kept) * 8} already stored)" in done.stdout
    for p, mtime in kept.items():
        assert p.stat().st_mtime_ns == mtime
    store = open_store_at(out)
    assert store is not None and store.manifest["complete"] and list(store.samples()["index"]) == list(range(96))
    assert torch.isfinite(torch.as_tensor(np.stack(store.maps("saliency", range(96))))).all()


def test_a_regression_run_is_refused_with_the_global_view_named(tmp_path: Path) -> None:
    from table_bundles import untrained_bundle

    from xaidash.explainers.dataset.explain import DatasetJob

    bundle = untrained_bundle("diabetes")
    job = DatasetJob(run_path=str(tmp_path), split="test", start=0, stop=10, methods=["ig"], params={})
    with pytest.raises(ExplainError, match=r"predicts a number \(disease progression\).*xaidash global"):
        explain_dataset(job, tmp_path / "store", bundle=bundle, split_size=89)
    assert not (tmp_path / "store").exists()  # nothing written
