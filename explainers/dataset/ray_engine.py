"""`--engine ray`: the chunks of a data-set job spread over a pool of Ray actors with Ray Data.

The pending chunks become a Ray Data dataset (one row per chunk); `map_batches` runs them through a fixed
pool of actors (`ActorPoolStrategy(size=workers)`), each of which loads the model once, on its own GPU
(`num_gpus=gpus_per_worker`) or on the CPU, and computes chunks with the same `ChunkComputer` as the local
engine. The driver receives each finished chunk as it streams out and writes it to the store, so the store
stays on the machine that ran the command (a remote cluster needs no shared file system) and resuming works
as with the local engine. Ray itself is an optional extra: pip install 'xaidash[ray]'.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import numpy as np

from xaidash.explainers.dataset.explain import ChunkComputer, ChunkRecorder, ChunkResult, DatasetJob
from xaidash.explainers.dataset.store import MethodShard
from xaidash.explainers.params import ExplainError

# Environment the actors need to find the runs, the data and offline mode as the driver does.
_FORWARDED_ENV = ("XAIDASH_RUNS", "XAIDASH_DATA", "XAIDASH_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def import_ray() -> Any:
    try:
        import ray
        import ray.data  # the Data library: the part of the extra this engine needs
    except ImportError:
        raise ExplainError(
            "--engine ray needs Ray Data, which is not installed: pip install 'xaidash[ray]' (or use --engine local)."
        ) from None
    return ray


class ChunkActor:
    """One Ray actor: the model and the split loaded once; each call explains the chunks of its batch."""

    def __init__(self, job: dict[str, Any]) -> None:
        import torch

        self.computer = ChunkComputer(DatasetJob(**job))
        self.threads = torch.get_num_threads()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = []
        for start, stop, methods in zip(batch["start"], batch["stop"], batch["methods"], strict=True):
            todo = [m for m in str(methods).split(",") if m]
            out.append(encode_chunk(self.computer.compute(int(start), int(stop), todo)))
        return {"result": np.array(out, dtype=object)}


# A chunk travels from an actor to the driver as safetensors bytes: arrays as tensors, the rest as JSON metadata.
# Never pickle (the project's rule: a pickle runs code when loaded, and a cluster's driver should not trust that).
_ARRAYS = ("labels", "preds", "probs", "losses")


def encode_chunk(result: ChunkResult) -> bytes:
    """One ChunkResult as safetensors bytes (see decode_chunk)."""
    from safetensors.numpy import save

    tensors = {name: np.ascontiguousarray(getattr(result, name)) for name in _ARRAYS}
    shards = []
    for i, shard in enumerate(result.shards):
        tensors[f"{i}.index"] = np.ascontiguousarray(shard.index, dtype=np.int64)
        tensors[f"{i}.seconds"] = np.ascontiguousarray(shard.seconds, dtype=np.float64)
        if shard.words is not None:  # text: one vector of word scores per sample, of varying lengths
            flat = [np.asarray(m, dtype=np.float32).reshape(-1) for m in shard.maps]
            tensors[f"{i}.values"] = np.concatenate(flat) if flat else np.zeros(0, np.float32)
            tensors[f"{i}.offsets"] = np.concatenate([[0], np.cumsum([len(v) for v in flat])]).astype(np.int64)
        else:
            tensors[f"{i}.maps"] = np.ascontiguousarray(np.asarray(shard.maps, dtype=np.float32))
        for name, values in shard.metrics.items():
            tensors[f"{i}.metric.{name}"] = np.ascontiguousarray(values, dtype=np.float64)
        shards.append(
            {
                "method": shard.method,
                "metrics": list(shard.metrics),
                "words": shard.words,
                "metric_errors": shard.metric_errors,
            }
        )
    meta = {"start": result.start, "stop": result.stop, "seconds": result.seconds, "shards": shards}
    return save(tensors, metadata={"chunk": json.dumps(meta)})


def decode_chunk(data: bytes) -> ChunkResult:
    """The ChunkResult encode_chunk wrote."""
    from safetensors.numpy import load

    tensors = load(data)
    meta = _chunk_metadata(data)
    shards = []
    for i, info in enumerate(meta["shards"]):
        maps: np.ndarray | list[np.ndarray]
        if f"{i}.offsets" in tensors:
            off, values = tensors[f"{i}.offsets"], tensors[f"{i}.values"]
            maps = [values[off[k] : off[k + 1]] for k in range(len(off) - 1)]
        else:
            maps = tensors[f"{i}.maps"]
        shards.append(
            MethodShard(
                method=info["method"],
                index=tensors[f"{i}.index"],
                maps=maps,
                metrics={name: tensors[f"{i}.metric.{name}"] for name in info["metrics"]},
                seconds=tensors[f"{i}.seconds"],
                words=info["words"],
                metric_errors=info["metric_errors"],
            )
        )
    arrays = {name: tensors[name] for name in _ARRAYS}
    return ChunkResult(start=meta["start"], stop=meta["stop"], shards=shards, seconds=meta["seconds"], **arrays)


def _chunk_metadata(data: bytes) -> dict[str, Any]:
    """The JSON metadata of safetensors bytes: an 8-byte little-endian header length, then the header."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    return json.loads(header["__metadata__"]["chunk"])


def init_ray(address: str | None, workers: int, gpus_per_worker: float) -> Any:
    """Connect to the cluster at `address`, or start a small local Ray (no dashboard, quiet logs)."""
    ray = import_ray()
    for name in ("ray", "ray.data"):  # our own bar reports progress; Ray's notices would bury it
        logging.getLogger(name).setLevel(logging.ERROR)
    if ray.is_initialized():
        return ray
    env = {k: os.environ[k] for k in _FORWARDED_ENV if k in os.environ}
    common: dict[str, Any] = {
        "logging_level": logging.ERROR,
        "log_to_driver": False,
        "runtime_env": {"env_vars": env},
    }
    try:
        if address:
            ray.init(address=address, **common)
        else:
            # One CPU per actor plus one for Ray Data's own tasks; GPUs as torch sees them.
            import torch

            gpus = torch.cuda.device_count() if gpus_per_worker > 0 else 0
            ray.init(num_cpus=workers + 1, num_gpus=gpus, include_dashboard=False, **common)
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise ExplainError(f"Could not start or reach {where}: {e}") from None
    return ray


def run_ray(
    job: DatasetJob,
    pending: Iterable[tuple[int, tuple[str, ...]]],
    recorder: ChunkRecorder,
    *,
    workers: int = 2,
    gpus_per_worker: float = 0.0,
    address: str | None = None,
) -> None:
    """Compute the pending chunks on `workers` Ray actors; the driver records each as it arrives."""
    items = [
        {"start": start, "stop": min(start + job.chunk_size, job.stop), "methods": ",".join(methods)}
        for start, methods in pending
    ]
    if not items:
        return
    if workers < 1:
        raise ExplainError(f"--workers {workers}: give at least 1.")
    if gpus_per_worker < 0:
        raise ExplainError(f"--gpus-per-worker {gpus_per_worker}: give 0 (CPU) or more.")
    ray = init_ray(address, workers, gpus_per_worker)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # the recorder draws one bar in samples
    ctx.print_on_execution_start = False
    actor_job = asdict(job)
    actor_job["device"] = "cuda" if gpus_per_worker > 0 else "cpu"
    ds = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        ChunkActor,
        batch_size=1,
        batch_format="numpy",
        fn_constructor_kwargs={"job": actor_job},
        compute=ray.data.ActorPoolStrategy(size=min(workers, len(items))),
        num_cpus=1,
        num_gpus=gpus_per_worker,
    )
    for row in ds.iter_rows():
        recorder.record(decode_chunk(row["result"]))
