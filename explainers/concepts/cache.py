"""The CAV cache: `<run>/concepts/cavs/<layer>/<key>.safetensors`, one file per (layer, concept, random set).

The key hashes the examples' content (not their names or paths), the model's weights, the classifier's
settings and the seed, so a changed folder, a retrained run or other settings never reuse a stale CAV.
captum's own CAV store (`CAV.save`/`CAV.load`) writes torch.save pickles under `save_path`; xaidash never
unpickles, so it keeps its own safetensors cache and hands the loaded vectors to captum's `TCAV` in memory.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from xaidash.data.atomic import atomic_write_bytes
from xaidash.models.bundle import ModelBundle

FOLDER = "concepts"


@dataclass
class StoredCAV:
    """weights (2, F): one row per class of `classes` (the concept's id and the random set's), as captum's
    classifiers return them; accuracy: the linear classifier's held-out accuracy."""

    weights: torch.Tensor
    classes: list[int]
    accuracy: float


def model_fingerprint(bundle: ModelBundle) -> str:
    """A hash of the model's parameters and buffers: a CAV belongs to exactly these weights."""
    h = hashlib.sha256()
    for name, t in sorted(bundle.model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:32]


def cav_key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def cache_folder(run_dir: Path | None) -> Path | None:
    return None if run_dir is None else Path(run_dir) / FOLDER / "cavs"


def cav_path(run_dir: Path | None, layer: str, key: str) -> Path | None:
    folder = cache_folder(run_dir)
    return None if folder is None else folder / layer.replace("/", "_") / f"{key}.safetensors"


def load_cav(path: Path | None) -> StoredCAV | None:
    """The cached CAV, or None when it is missing or unreadable (then it is computed again)."""
    if path is None or not path.is_file():
        return None
    try:
        from safetensors import safe_open

        tensors = load_file(path)
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {}).get("cav", "{}"))
        return StoredCAV(tensors["weights"], [int(c) for c in meta["classes"]], float(meta["accuracy"]))
    except (SafetensorError, OSError, KeyError, ValueError, TypeError):
        return None


def save_cav(path: Path | None, cav: StoredCAV, facts: dict[str, str]) -> bool:
    """Write the CAV atomically; False (and nothing lost) when the run folder is not writable."""
    if path is None:
        return False
    meta = {"cav": json.dumps({"classes": cav.classes, "accuracy": cav.accuracy, **facts})}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, save({"weights": cav.weights.detach().to("cpu").float().contiguous()}, metadata=meta))
    except OSError:
        return False
    return True
