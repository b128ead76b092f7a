"""The attribution store: a whole split's explanations, written chunk by chunk, read back by the report.

Layout under `<run>/attributions/<split>/` (or `xaidash explain --out DIR`):

- `manifest.json`: what was asked (split, range, methods and their resolved params, seed, steps, chunk size)
  and how far it got (n_done, complete, seconds, samples_per_s); rewritten atomically after every chunk;
- `maps/<method>/<start>-<stop>.safetensors`: one shard per chunk of samples and method. Tensors: `index`
  int64 (n,) the samples' positions in their split; images `maps` float32 (n, H, W); text `values` float32 (all
  words' scores end to end) and `offsets` int64 (n + 1), the words in the metadata `words` as JSON; per-input
  metrics as `metric.<name>` float64 (n,) (NaN where one could not be computed) and `seconds` float64 (n,);
- `rows/<start>-<stop>.jsonl`: one row per sample and method of the chunk (index, method, label, pred, prob,
  loss, correct, disagreement, seconds and the metrics). Written last: a chunk is finished when its rows file
  exists, so a killed job redoes at most the chunk it was in (and keeps that chunk's finished shards);
- `samples.jsonl`: every chunk's rows in index order, written once the whole range is done (for other tools;
  the reader uses the per-chunk files, which are always there).

Every file is written to a temporary name and renamed into place (data/atomic.py): a reader never sees half
a file, a killed writer leaves no half-written shard behind.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from safetensors.numpy import load_file, save_file

from xaidash.data.atomic import atomic_write, atomic_write_bytes, atomic_write_json

STORE_VERSION = 1
SPLITS = ("test", "train")
MANIFEST = "manifest.json"
SAMPLE_COLUMNS = ("index", "label", "label_name", "pred", "pred_name", "prob", "loss", "correct", "disagreement")


def store_dir(run_path: Path, split: str) -> Path:
    """Where a run's store for `split` lives: `<run>/attributions/<split>`."""
    return Path(run_path) / "attributions" / split


def chunk_name(start: int, stop: int) -> str:
    return f"{int(start)}-{int(stop)}"


def _parse_chunk(stem: str) -> tuple[int, int] | None:
    a, sep, b = stem.partition("-")
    if not sep or not all(s.isascii() and s.isdigit() and len(s) <= 18 for s in (a, b)):  # '²'.isdigit() is True
        return None
    return int(a), int(b)


def _finite(value: Any) -> Any:
    """JSON-safe number: NaN/inf become None (JSON has no NaN)."""
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


@dataclass
class MethodShard:
    """One method's results for one chunk: maps (images, (n, H, W)) or per-word scores and words (text),
    per-input metrics and seconds."""

    method: str
    index: np.ndarray
    maps: np.ndarray | list[np.ndarray]
    metrics: dict[str, np.ndarray]
    seconds: np.ndarray
    words: list[list[str]] | None = None
    metric_errors: dict[str, str] | None = None

    def map(self, i: int) -> np.ndarray:
        return np.asarray(self.maps[i], dtype=np.float32)


def write_shard(path: Path, shard: MethodShard) -> None:
    """One (chunk, method) shard as safetensors, atomically."""
    tensors: dict[str, np.ndarray] = {
        "index": np.asarray(shard.index, dtype=np.int64),
        "seconds": np.asarray(shard.seconds, dtype=np.float64),
    }
    metadata = {"method": shard.method, "version": str(STORE_VERSION)}
    if shard.words is not None:
        flat = [np.asarray(m, dtype=np.float32).reshape(-1) for m in shard.maps]
        tensors["values"] = np.concatenate(flat) if flat else np.zeros(0, np.float32)
        tensors["offsets"] = np.concatenate([[0], np.cumsum([len(v) for v in flat])]).astype(np.int64)
        metadata["words"] = json.dumps(shard.words)
    else:
        tensors["maps"] = np.ascontiguousarray(np.asarray(shard.maps, dtype=np.float32))
    for name, values in shard.metrics.items():
        tensors[f"metric.{name}"] = np.asarray(values, dtype=np.float64)
    if shard.metric_errors:
        metadata["metric_errors"] = json.dumps(shard.metric_errors)
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def read_shard(path: Path) -> MethodShard:
    from safetensors import safe_open

    tensors = load_file(str(path))
    with safe_open(str(path), framework="numpy") as f:
        metadata = f.metadata() or {}
    maps: np.ndarray | list[np.ndarray]
    words = None
    if "offsets" in tensors:
        off, values = tensors["offsets"], tensors["values"]
        maps = [values[off[i] : off[i + 1]] for i in range(len(off) - 1)]
        words = json.loads(metadata.get("words", "[]"))
    else:
        maps = tensors["maps"]
    metrics = {k.removeprefix("metric."): v for k, v in tensors.items() if k.startswith("metric.")}
    errors = json.loads(metadata["metric_errors"]) if "metric_errors" in metadata else None
    return MethodShard(
        method=metadata.get("method", path.parent.name),
        index=tensors["index"],
        maps=maps,
        metrics=metrics,
        seconds=tensors["seconds"],
        words=words,
        metric_errors=errors,
    )


class StoreWriter:
    """The writing side, used by the engines (explainers/dataset/explain.py): shards, rows, manifest."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = Path(path)
        self.manifest = dict(manifest)

    def shard_path(self, method: str, start: int, stop: int) -> Path:
        return self.path / "maps" / method / f"{chunk_name(start, stop)}.safetensors"

    def rows_path(self, start: int, stop: int) -> Path:
        return self.path / "rows" / f"{chunk_name(start, stop)}.jsonl"

    def has_shard(self, method: str, start: int, stop: int) -> bool:
        return self.shard_path(method, start, stop).is_file()

    def chunk_done(self, start: int, stop: int) -> bool:
        return self.rows_path(start, stop).is_file()

    def write_shard(self, start: int, stop: int, shard: MethodShard) -> None:
        write_shard(self.shard_path(shard.method, start, stop), shard)

    def read_shard(self, method: str, start: int, stop: int) -> MethodShard:
        return read_shard(self.shard_path(method, start, stop))

    def write_rows(self, start: int, stop: int, rows: Iterable[Mapping[str, Any]]) -> None:
        """The chunk's rows, atomically: from here on the chunk counts as finished."""
        text = "".join(json.dumps({k: _finite(v) for k, v in row.items()}) + "\n" for row in rows)
        atomic_write_bytes(self.rows_path(start, stop), text.encode())

    def write_manifest(self, **updates: Any) -> None:
        self.manifest.update(updates)
        atomic_write_json(self.path / MANIFEST, {k: _finite(v) for k, v in self.manifest.items()})

    def consolidate(self) -> Path:
        """All chunks' rows in one `samples.jsonl` (index order), atomically."""
        files = sorted(_row_files(self.path), key=lambda p: p[0])
        out = self.path / "samples.jsonl"

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as f:
                for _, p in files:
                    f.write(p.read_bytes())

        atomic_write(out, write)
        return out


def _row_files(path: Path) -> list[tuple[tuple[int, int], Path]]:
    rows = Path(path) / "rows"
    found = []
    for p in rows.glob("*.jsonl") if rows.is_dir() else []:
        span = _parse_chunk(p.stem)
        if span is not None:
            found.append((span, p))
    return found


def read_manifest(path: Path) -> dict[str, Any] | None:
    """A store folder's manifest, or None when there is none or it cannot be read."""
    try:
        data = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class AttributionStore:
    """The reading side: a run's stored explanations of one split (see the module docstring for the files)."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self.split = str(manifest.get("split", self.path.name))
        self._rows: pd.DataFrame | None = None
        self._shard_index: dict[str, dict[int, tuple[int, int]]] = {}

    def methods(self) -> list[str]:
        return [str(m) for m in self.manifest.get("methods") or []]

    def _all_rows(self) -> pd.DataFrame:
        if self._rows is None:
            frames = []
            for _, p in sorted(_row_files(self.path), key=lambda t: t[0]):
                try:
                    frames.append(pd.read_json(p, lines=True, dtype=False))
                except ValueError:
                    continue  # an empty file (a chunk of 0 rows cannot happen; a foreign file is skipped)
            self._rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        return self._rows

    def samples(self) -> pd.DataFrame:
        """One row per finished sample: index, label, label_name, pred, pred_name, prob, loss, correct, disagreement."""
        rows = self._all_rows()
        if rows.empty:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in SAMPLE_COLUMNS})
        out = rows.drop_duplicates("index")[[c for c in SAMPLE_COLUMNS if c in rows.columns]].copy()
        out["disagreement"] = pd.to_numeric(out.get("disagreement"), errors="coerce")
        out["correct"] = out["correct"].astype(bool)
        return out.sort_values("index").reset_index(drop=True)

    def metrics(self) -> pd.DataFrame:
        """Long format: one row per (index, method): index, method, seconds and one column per metric."""
        rows = self._all_rows()
        names = [str(m) for m in self.manifest.get("metrics") or []]
        columns = ["index", "method", "seconds", *names]
        if rows.empty:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in columns})
        out = rows.reindex(columns=columns).copy()
        for c in ["seconds", *names]:
            out[c] = pd.to_numeric(out[c], errors="coerce")
        return out.sort_values(["index", "method"]).reset_index(drop=True)

    def _locate(self, method: str) -> dict[int, tuple[int, int]]:
        """index -> the (start, stop) of the shard that holds it, from the shard file names."""
        if method not in self._shard_index:
            where: dict[int, tuple[int, int]] = {}
            folder = self.path / "maps" / method
            for p in folder.glob("*.safetensors") if folder.is_dir() else []:
                span = _parse_chunk(p.stem)
                if span is not None:
                    for i in range(*span):
                        where[i] = span
            self._shard_index[method] = where
        return self._shard_index[method]

    def has(self, method: str, index: int) -> bool:
        return int(index) in self._locate(method)

    def _shards_for(self, method: str, indices: Sequence[int]) -> tuple[dict[tuple[int, int], MethodShard], list[int]]:
        where = self._locate(method)
        missing = [int(i) for i in indices if int(i) not in where]
        if missing:
            raise KeyError(f"{method}: samples {missing[:10]} are not in the {self.split} store")
        shards: dict[tuple[int, int], MethodShard] = {}
        for i in indices:
            span = where[int(i)]
            if span not in shards:
                shards[span] = read_shard(self.path / "maps" / method / f"{chunk_name(*span)}.safetensors")
        return shards, [int(i) for i in indices]

    def maps(self, method: str, indices: Sequence[int]) -> list[np.ndarray]:
        """The stored attribution of each index: (H, W) for images, one score per word for text."""
        shards, idx = self._shards_for(method, indices)
        where = self._locate(method)
        out = []
        for i in idx:
            span = where[i]
            out.append(shards[span].map(i - span[0]))
        return out

    def tokens(self, method: str, indices: Sequence[int]) -> list[list[str]] | None:
        """The words each stored map scores, where the maps score named features (texts); None where they do not
        (a picture's pixels: its shards hold no words)."""
        shards, idx = self._shards_for(method, indices)
        where = self._locate(method)
        out: list[list[str]] = []
        for i in idx:
            words = shards[where[i]].words
            if words is None:
                return None
            out.append(list(words[i - where[i][0]]))
        return out


def open_store(run_path: Path, split: str = "test") -> AttributionStore | None:
    """The run's store for `split`, or None when there is none."""
    path = store_dir(Path(run_path), split)
    manifest = read_manifest(path)
    return AttributionStore(path, manifest) if manifest is not None else None


def open_store_at(path: Path) -> AttributionStore | None:
    """A store in any folder (`xaidash explain --out DIR`), or None."""
    manifest = read_manifest(Path(path))
    return AttributionStore(Path(path), manifest) if manifest is not None else None


def store_splits(run_path: Path) -> list[str]:
    """The splits that have a store under this run, e.g. ["test"]."""
    return [s for s in SPLITS if read_manifest(store_dir(Path(run_path), s)) is not None]


def new_manifest(**fields: Any) -> dict[str, Any]:
    """A manifest with the contract's keys filled in; `fields` set or add others."""
    base: dict[str, Any] = {
        "version": STORE_VERSION,
        "split": "test",
        "methods": [],
        "params": {},
        "metrics": [],
        "n_total": 0,
        "n_done": 0,
        "complete": False,
        "engine": "local",
        "created": time.time(),
        "seconds": 0.0,
        "samples_per_s": None,
        "modality": "image",
        "chunk_size": 0,
        "start": 0,
        "stop": 0,
    }
    base.update(fields)
    return base
