"""Explaining a whole split: the plan (which samples, in which chunks, what is already done), the per-chunk
computation both engines share, and the local engine.

A job covers samples [start, stop) of one split in chunks of `chunk_size` (start, start + chunk_size, ...).
For each chunk: the model's predictions, labels and loss, then every method's maps over the whole chunk in
batched `explain()` calls (with their per-input metrics, explainers/scoring.py), written to the attribution
store (explainers/dataset/store.py) as one shard per method and the chunk's rows. A chunk whose rows file
exists is done and never recomputed; a method shard that exists is kept even when its chunk is not done.
Memory holds one chunk's maps at a time, whatever the split's size.

Every input's randomness comes from the job's seed alone (the methods draw per input from it), so a map does
not depend on which chunk or worker computed it: the Ray engine (explainers/dataset/ray_engine.py) gives the same maps.
"""

from __future__ import annotations

import itertools
import math
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from xaidash.explainers.dataset.store import (
    MANIFEST,
    AttributionStore,
    MethodShard,
    StoreWriter,
    new_manifest,
    read_manifest,
)
from xaidash.explainers.params import ExplainError
from xaidash.explainers.session import MethodResult, Outcome, Scoring, explain_session
from xaidash.models.bundle import ModelBundle

DEFAULT_CHUNK = 64
ENGINES = ("local", "ray")
# What must match for a store to be resumed: anything else would mix maps of two different questions.
RESUME_KEYS = (
    "split",
    "start",
    "stop",
    "chunk_size",
    "methods",
    "params",
    "seed",
    "steps",
    "with_metrics",
    "background",
)

_RANGE = re.compile(r"^dataset:(?:(all)|(-?\d+):(-?\d+))$")


def parse_dataset_range(spec: str) -> tuple[int | None, int | None] | None:
    """`dataset:all` -> (None, None), `dataset:START:STOP` -> (START, STOP); None for any other input
    (a single sample such as dataset:12 or dataset:train:12, a file, a text)."""
    m = _RANGE.match(str(spec).strip())
    if m is None:
        return None
    if m.group(1):
        return None, None
    return int(m.group(2)), int(m.group(3))


def check_range(start: int | None, stop: int | None, size: int, split: str, dataset: str) -> tuple[int, int]:
    """The [start, stop) a range input means in a split of `size` samples, or a clear ExplainError."""
    if size == 0:
        raise ExplainError(f"The {split} split of {dataset} is empty: nothing to explain.")
    lo = 0 if start is None else start
    hi = size if stop is None else stop
    if lo < 0 or hi < 0:
        raise ExplainError(f"dataset:{lo}:{hi}: START and STOP are sample positions, 0 or more.")
    if lo >= hi:
        raise ExplainError(f"dataset:{lo}:{hi} is empty: STOP must be greater than START (samples START..STOP-1).")
    if hi > size:
        raise ExplainError(
            f"dataset:{lo}:{hi} is out of range: the {split} split of {dataset} has {size} samples "
            f"(use dataset:{lo}:{size} or dataset:all)."
        )
    return lo, hi


def chunks(start: int, stop: int, size: int) -> list[tuple[int, int]]:
    """[start, stop) cut into consecutive chunks of `size` samples (the last one shorter)."""
    return [(a, min(a + size, stop)) for a in range(start, stop, size)]


@dataclass
class DatasetJob:
    """Everything a worker needs to compute any chunk: plain data, so it travels to Ray actors."""

    run_path: str
    split: str
    start: int
    stop: int
    methods: list[str]
    params: dict[str, dict[str, Any]]
    chunk_size: int = DEFAULT_CHUNK
    seed: int = 0
    steps: int = 20
    with_metrics: bool = True
    batch_size: int = 256
    background: int = 50
    device: str = "auto"

    def plan(self) -> list[tuple[int, int]]:
        return chunks(self.start, self.stop, self.chunk_size)


@dataclass
class ChunkResult:
    """One chunk's predictions and the shards of the methods computed for it."""

    start: int
    stop: int
    labels: np.ndarray  # -1 where a sample has no known label
    preds: np.ndarray
    probs: np.ndarray
    losses: np.ndarray
    shards: list[MethodShard] = field(default_factory=list)
    seconds: float = 0.0


class ChunkComputer:
    """The model, the split and the background loaded once (per process or per Ray actor); `compute`
    explains one chunk. The same class runs in both engines, so both give the same maps."""

    def __init__(self, job: DatasetJob, bundle: ModelBundle | None = None) -> None:
        from xaidash.data.registry import load_split
        from xaidash.models.runs.store import Run, load_bundle

        self.job = job
        self.bundle = bundle if bundle is not None else load_bundle(Run(Path(job.run_path)), device=job.device)
        self.split = load_split(self.bundle.info.name, job.split)  # type: ignore[arg-type]
        self.background = _background(self.bundle, job)

    def compute(self, start: int, stop: int, methods: Sequence[str] | None = None) -> ChunkResult:
        from xaidash.explainers.guard import evaluating

        began = time.perf_counter()
        bundle, split, job = self.bundle, self.split, self.job
        idx = list(range(start, stop))
        raw = bundle.adapter.items(split, idx)
        labels = np.asarray(split.labels[start:stop].cpu().numpy(), dtype=np.int64)
        known = (labels >= 0) & (labels < bundle.info.num_classes)
        labels = np.where(known, labels, -1)
        with torch.no_grad(), evaluating(bundle.model):
            logits = bundle.logits(bundle.prepare(raw), job.batch_size).float().cpu()
        probs_all = logits.softmax(1)
        preds = probs_all.argmax(1)
        losses = F.cross_entropy(logits, torch.as_tensor(np.where(known, labels, 0)), reduction="none").numpy()
        result = ChunkResult(
            start=start,
            stop=stop,
            labels=labels,
            preds=preds.numpy().astype(np.int64),
            probs=probs_all.gather(1, preds[:, None])[:, 0].numpy().astype(np.float64),
            losses=np.where(known, losses, np.nan).astype(np.float64),
        )
        chosen = job.methods if methods is None else methods
        scoring = Scoring("explain" if job.with_metrics else None, bundle.adapter.ground_truth(split, idx), job.steps)
        for r in explain_session(
            bundle,
            raw,
            {m: job.params.get(m, {}) for m in chosen},
            target=preds.tolist(),
            scoring=scoring,
            background=self.background,
            batch_size=job.batch_size,
            seed=job.seed,
            done=_stop_at_failure,
        ):
            result.shards.append(_shard(r, idx))
        result.seconds = time.perf_counter() - began
        return result


def _stop_at_failure(outcome: Outcome[Any]) -> None:
    """A method that fails ends its chunk at once with its error (the store keeps no half-explained chunk; the
    next run resumes it)."""
    if outcome.exception is not None:
        raise outcome.exception


def _shard(result: MethodResult, idx: list[int]) -> MethodShard:
    """One method's maps, metrics and per-sample seconds of a chunk, as the store writes them."""
    e = result.explanation
    assert e is not None  # a method that failed ended the chunk (`_stop_at_failure`)
    n = len(idx)
    maps: np.ndarray | list[np.ndarray]
    maps = [np.asarray(a, np.float32) for a in e.attributions] if e.tokens is not None else e.attributions
    return MethodShard(
        method=result.method,
        index=np.asarray(idx, dtype=np.int64),
        maps=maps,
        metrics={k: np.asarray(v, dtype=np.float64) for k, v in result.metrics.items()},
        seconds=np.full(n, e.seconds / max(n, 1)),
        words=e.tokens,
        metric_errors=dict(result.metric_errors) or None,
    )


def _background(bundle: ModelBundle, job: DatasetJob) -> torch.Tensor | None:
    """The background `explain` compares against: its own default set (None) at the default size, else a
    seeded pick of `job.background` training images; the same in every worker."""
    from xaidash.explainers.registry import get_method
    from xaidash.explainers.samples import DEFAULT_BACKGROUND, background_samples

    needed = any(get_method(m, bundle.modality).needs_background(job.params.get(m, {})) for m in job.methods)
    if not needed or job.background == DEFAULT_BACKGROUND:
        return None
    return background_samples(bundle, job.background)


def disagreement(maps: Sequence[np.ndarray]) -> float:
    """1 - mean pairwise Spearman rank correlation of one sample's maps by several methods; NaN with fewer
    than two methods or when no pair can be ranked (constant maps, different lengths)."""
    from xaidash.explainers.map_arrays import nanmean, spearman

    rhos = [
        spearman(a, b) if np.asarray(a).size == np.asarray(b).size else float("nan")
        for a, b in itertools.combinations(maps, 2)
    ]
    return float("nan") if not rhos else 1.0 - nanmean(rhos)


def chunk_rows(result: ChunkResult, shards: Sequence[MethodShard], classes: Sequence[str]) -> list[dict[str, Any]]:
    """One row per sample and method: the sample's prediction, label and loss, the maps' disagreement, and
    the method's seconds and metrics."""
    rows: list[dict[str, Any]] = []
    for i, index in enumerate(range(result.start, result.stop)):
        label, pred = int(result.labels[i]), int(result.preds[i])
        sample = {
            "index": index,
            "label": label if label >= 0 else None,
            "label_name": classes[label] if label >= 0 else None,
            "pred": pred,
            "pred_name": classes[pred],
            "prob": float(result.probs[i]),
            "loss": float(result.losses[i]),
            "correct": bool(label == pred),
            "disagreement": disagreement([s.map(i) for s in shards]),
        }
        rows.extend(
            {
                **sample,
                "method": s.method,
                "seconds": float(s.seconds[i]),
                **{k: float(v[i]) for k, v in s.metrics.items()},
            }
            for s in shards
        )
    return rows


def job_manifest(job: DatasetJob, bundle: ModelBundle, split_size: int, engine: str) -> dict[str, Any]:
    return new_manifest(
        split=job.split,
        methods=list(job.methods),
        params=job.params,
        n_total=job.stop - job.start,
        engine=engine,
        modality=bundle.modality,
        chunk_size=job.chunk_size,
        start=job.start,
        stop=job.stop,
        split_size=split_size,
        seed=job.seed,
        steps=job.steps,
        with_metrics=job.with_metrics,
        background=job.background,
        run=Path(job.run_path).name,
        dataset=bundle.info.name,
        model=bundle.spec.name,
    )


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    import json

    def norm(v: Any) -> str:
        return json.dumps(v, sort_keys=True, default=str)

    return [f"{k}: {old.get(k)!r} there, {new.get(k)!r} now" for k in RESUME_KEYS if norm(old.get(k)) != norm(new[k])]


def _clear(path: Path) -> None:
    """--fresh: remove the store's own files only (an --out folder may hold others)."""
    for name in ("maps", "rows"):
        shutil.rmtree(path / name, ignore_errors=True)
    for name in (MANIFEST, "samples.jsonl"):
        (path / name).unlink(missing_ok=True)


def open_writer(path: Path, manifest: dict[str, Any], fresh: bool) -> StoreWriter:
    """The writer for a new store, or for the one already at `path` when it asked the same question
    (resume); a different question is refused with what differs and how to start over."""
    if fresh:
        _clear(path)
    old = read_manifest(path)
    if old is None and (path / MANIFEST).exists():
        raise ExplainError(f"{path / MANIFEST} cannot be read; start over with --fresh or write elsewhere with --out.")
    if old is not None:
        diffs = _differences(old, manifest)
        if diffs:
            raise ExplainError(
                f"The attribution store at {path} was made with other settings ({'; '.join(diffs)}). "
                "Run the same command to resume it, add --fresh to replace it, or --out DIR to write another store."
            )
        manifest = {**manifest, "created": old.get("created", manifest["created"]), "seconds": old.get("seconds", 0.0)}
    writer = StoreWriter(path, manifest)
    writer.write_manifest()
    return writer


@dataclass
class DatasetOutcome:
    path: Path
    computed: int  # samples explained by this call
    skipped: int  # samples already in the store
    seconds: float
    samples_per_s: float
    store: AttributionStore


class ChunkRecorder:
    """The driver's side of both engines: writes each finished chunk, counts, updates the manifest and progress."""

    def __init__(self, writer: StoreWriter, classes: Sequence[str], n_done: int, progress: bool) -> None:
        from tqdm.auto import tqdm

        self.writer, self.classes = writer, list(classes)
        self.n_done, self.computed = n_done, 0
        self.began = time.perf_counter()
        self.base_seconds = float(writer.manifest.get("seconds") or 0.0)
        self.metrics: set[str] = set(writer.manifest.get("metrics") or [])
        self.warned: set[tuple[str, str]] = set()
        self.bar = tqdm(
            total=int(writer.manifest["n_total"]),
            initial=n_done,
            unit="sample",
            file=sys.stderr,
            disable=not progress,
            dynamic_ncols=True,
            smoothing=0.1,
        )

    def record(self, result: ChunkResult) -> None:
        w = self.writer
        for shard in result.shards:
            w.write_shard(result.start, result.stop, shard)
            for name, err in (shard.metric_errors or {}).items():
                if (shard.method, name) not in self.warned:
                    self.warned.add((shard.method, name))
                    print(f"warning: {shard.method}: {name} could not be computed: {err}", file=sys.stderr)
        done = {s.method: s for s in result.shards}
        shards = [done.get(m) or w.read_shard(m, result.start, result.stop) for m in w.manifest["methods"]]
        for s in shards:
            self.metrics.update(s.metrics)
        w.write_rows(result.start, result.stop, chunk_rows(result, shards, self.classes))
        n = result.stop - result.start
        self.n_done += n
        self.computed += n
        elapsed = time.perf_counter() - self.began
        from xaidash.explainers.scoring import METRICS

        w.write_manifest(
            n_done=self.n_done,
            metrics=[m for m in METRICS if m in self.metrics] + sorted(self.metrics - set(METRICS)),
            seconds=self.base_seconds + elapsed,
            samples_per_s=self.computed / elapsed if elapsed > 0 else None,
        )
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


def run_local(
    job: DatasetJob, pending: Iterable[tuple[int, tuple[str, ...]]], recorder: ChunkRecorder, bundle: ModelBundle
) -> None:
    """The local engine: one process, the chunks in order, on the bundle's device."""
    computer = ChunkComputer(job, bundle)
    for start, methods in pending:
        stop = min(start + job.chunk_size, job.stop)
        recorder.record(computer.compute(start, stop, methods))


def explain_dataset(
    job: DatasetJob,
    out: Path,
    *,
    bundle: ModelBundle,
    split_size: int,
    engine: str = "local",
    fresh: bool = False,
    progress: bool = True,
    workers: int = 2,
    gpus_per_worker: float = 0.0,
    address: str | None = None,
    on_chunk: Callable[[ChunkResult], None] | None = None,
) -> DatasetOutcome:
    """Explain samples [job.start, job.stop) of a split into the store at `out`, resuming what is there."""
    if bundle.regression is not None:  # its store and report are by class: accuracy, losses, a confusion
        raise ExplainError(
            f"Explaining a whole split reports accuracy, losses and maps by class; this run predicts a number "
            f"({bundle.regression.name}), so it does not apply. For the whole data set's picture use the Global "
            "view (xaidash global --run RUN); explain rows one by one with --input row:N."
        )
    if engine not in ENGINES:
        raise ExplainError(f"--engine {engine!r}: use one of {', '.join(ENGINES)}.")
    writer = open_writer(out, job_manifest(job, bundle, split_size, engine), fresh)
    plan = job.plan()
    pending: list[tuple[int, tuple[str, ...]]] = []
    n_done = 0
    for start, stop in plan:
        if writer.chunk_done(start, stop):
            n_done += stop - start
            continue
        todo = tuple(m for m in job.methods if not writer.has_shard(m, start, stop))
        pending.append((start, todo))
    recorder = ChunkRecorder(writer, bundle.info.classes, n_done, progress)
    if on_chunk is not None:  # tests inject failures here
        inner = recorder.record

        def record(result: ChunkResult) -> None:
            inner(result)
            on_chunk(result)

        recorder.record = record  # type: ignore[method-assign]
    began = time.perf_counter()
    try:
        if engine == "ray":
            from xaidash.explainers.dataset.ray_engine import run_ray

            run_ray(job, pending, recorder, workers=workers, gpus_per_worker=gpus_per_worker, address=address)
        else:
            run_local(job, pending, recorder, bundle)
    finally:
        recorder.close()
    seconds = time.perf_counter() - began
    writer.write_manifest(complete=recorder.n_done >= job.stop - job.start, n_done=recorder.n_done)
    if writer.manifest["complete"]:
        writer.consolidate()
    store = AttributionStore(out, dict(writer.manifest))
    rate = recorder.computed / seconds if seconds > 0 and recorder.computed else 0.0
    return DatasetOutcome(out, recorder.computed, n_done, seconds, rate, store)


def summary(outcome: DatasetOutcome) -> str:
    """One paragraph: how many samples, how fast, accuracy, and each method's mean metrics."""
    from xaidash.explainers.scoring import METRICS

    store, m = outcome.store, outcome.store.manifest
    samples, metrics = store.samples(), store.metrics()
    parts = [
        f"{m['n_done']} of {m['n_total']} {m['split']} samples explained"
        + (f" ({outcome.skipped} already stored)" if outcome.skipped else "")
        + f"; {outcome.computed} in {outcome.seconds:.1f} s ({outcome.samples_per_s:.1f} samples/s, {m['engine']} engine)."
    ]
    if len(samples):
        parts.append(f"Accuracy {samples['correct'].mean():.1%}, mean loss {samples['loss'].mean():.3f}.")
        dis = samples["disagreement"].mean()
        if isinstance(dis, float) and math.isfinite(dis):
            parts.append(f"Mean disagreement between methods {dis:.3f}.")
    for method in store.methods():
        rows = metrics[metrics["method"] == method]
        shown = [
            f"{METRICS.get(c, (c, ''))[0].lower()} {rows[c].mean():.3f}"
            for c in rows.columns
            if c not in ("index", "method") and rows[c].notna().any()
        ]
        if shown:
            parts.append(f"{method}: " + ", ".join(shown) + ".")
    return " ".join(parts)
