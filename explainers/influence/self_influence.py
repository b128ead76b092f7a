"""Self-influence over the whole training set: how much each training sample's own loss gradient pushed the model
(Σ_checkpoints lr · |gradient|²), the samples the model found hardest or most surprising first: possible label
errors. A streamed, resumable job (like the attribution store, explainers/dataset/store.py):

- `<run>/influence/<method>/self/<start>-<stop>.safetensors`: one file per chunk of training positions (index into the
  train split, labels, the final model's prediction and probability, score), written atomically when the chunk is done;
- `<run>/influence/<method>/self/manifest.json`: total, done, seconds, complete; rewritten after every chunk.

A stopped or killed job continues where it stopped (chunks on disk are skipped); the features it reads are the
cache's (cache.py), which a query may have filled already. Memory stays about one chunk."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
from safetensors.torch import load_file, save_file

from xaidash.data.atomic import atomic_write, atomic_write_json
from xaidash.explainers.influence.cache import FeatureCache, method_dir
from xaidash.explainers.influence.registry import get_influence_method
from xaidash.explainers.influence.training_set import training_data
from xaidash.explainers.params import ExplainError
from xaidash.models.runs.store import Run

COLUMNS = ("rank", "index", "label", "dataset_label", "predicted", "probability", "score")


@dataclass
class SelfInfluenceStatus:
    method: str
    done: int
    total: int
    complete: bool
    seconds: float
    eta_s: float | None


def self_dir(run: Run, method: str) -> Path:
    return method_dir(run, method) / "self"


def self_influence_status(run: Run, method: str = "tracin_fast") -> SelfInfluenceStatus | None:
    """How far the whole-set job got (None: never started, or its cache was started afresh since)."""
    path = self_dir(run, method) / "manifest.json"
    try:
        obj = json.loads(path.read_text())
        return SelfInfluenceStatus(**{k: obj[k] for k in SelfInfluenceStatus.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _chunk_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*-*.safetensors"), key=lambda p: int(p.stem.split("-")[0]))


def run_self_influence(
    run: Run,
    method: str = "tracin_fast",
    progress: Callable[[SelfInfluenceStatus], None] | None = None,
    stop: threading.Event | None = None,
    device: str = "auto",
) -> SelfInfluenceStatus:
    """Compute (or continue) the self-influence of every training sample, chunk by chunk; returns where it ended
    (complete, or stopped by `stop`). ExplainError when the method has no self-influence or does not apply."""
    spec = get_influence_method(method)
    if not spec.self_influence:
        raise ExplainError(f"{spec.label} has no self-influence; use one of the TracIn methods.")
    if why := spec.applies(run):
        raise ExplainError(why)
    data = training_data(run)
    cache = FeatureCache(run, spec, data, device)
    folder = self_dir(run, method)
    before = self_influence_status(run, method)
    spent = before.seconds if before is not None and not cache.fresh else 0.0
    chunks = cache.chunks()
    have = {p.name for p in _chunk_files(folder)}
    done = sum(b - a for a, b in chunks if f"{a}-{b}.safetensors" in have)
    started, done_here = time.perf_counter(), 0
    status = SelfInfluenceStatus(method, done, len(data), done == len(data), spent, None)
    _write_status(folder, status)
    for start, stop_at in chunks:
        if stop is not None and stop.is_set():
            break
        if f"{start}-{stop_at}.safetensors" in have:
            continue
        _self_chunk(cache, folder, start, stop_at)
        done += stop_at - start
        done_here += stop_at - start
        elapsed = time.perf_counter() - started
        eta = elapsed / done_here * (len(data) - done) if done_here else None
        status = SelfInfluenceStatus(method, done, len(data), done == len(data), spent + elapsed, eta)
        _write_status(folder, status)
        if progress is not None:
            progress(status)
    return status


def _write_status(folder: Path, status: SelfInfluenceStatus) -> None:
    try:
        atomic_write_json(folder / "manifest.json", asdict(status))
    except OSError as e:
        raise ExplainError(f"Cannot write the self-influence job under {folder}: {e.strerror or e}.") from None


def _self_chunk(cache: FeatureCache, folder: Path, start: int, stop: int) -> None:
    scores = cache.self_scores(start, stop)
    assert scores is not None
    probs = cache.final_probabilities(start, stop)
    s = cache.data.samples
    tensors = {
        "index": s.indices[start:stop].long().clone(),
        "label": s.labels[start:stop].long().clone(),
        "dataset_label": s.dataset_labels[start:stop].long().clone(),
        "predicted": probs.argmax(1).long(),
        "probability": probs.max(1).values.float(),
        "score": scores.double(),
    }
    atomic_write(folder / f"{start}-{stop}.safetensors", lambda tmp: save_file(tensors, str(tmp)))


def self_influence_table(run: Run, method: str = "tracin_fast") -> pd.DataFrame | None:
    """The ranked table (highest self-influence first; columns COLUMNS), of the rows done so far when the job is
    partial; None when it never started."""
    folder = self_dir(run, method)
    if self_influence_status(run, method) is None:
        return None
    parts = []
    for path in _chunk_files(folder):
        try:
            parts.append({k: v.numpy() for k, v in load_file(str(path)).items()})
        except Exception:  # noqa: BLE001 - a chunk being replaced or damaged: left out, the job redoes it
            continue
    if not parts:
        return pd.DataFrame(
            {c: pd.Series(dtype="float64" if c in ("probability", "score") else "int64") for c in COLUMNS}
        )
    frame = pd.concat([pd.DataFrame(p) for p in parts], ignore_index=True)
    frame = frame.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)
    frame.insert(0, "rank", range(1, len(frame) + 1))
    return frame[list(COLUMNS)]
