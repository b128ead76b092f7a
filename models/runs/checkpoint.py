"""Safetensors checkpoints: weights and optimizer state without pickle.

safetensors stores flat name -> tensor maps; the optimizer's non-tensor state (param groups,
hyperparameters) travels as JSON in the file's metadata.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from xaidash.data.atomic import atomic_write
from xaidash.models.registry import ModelError


def _atomic_save_tensors(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str]) -> None:
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def _cpu(t: torch.Tensor) -> torch.Tensor:
    # clone: safetensors refuses tensors that share storage (tied weights, views)
    return t.detach().to("cpu").contiguous().clone()


def save_weights(model: nn.Module, path: Path, metadata: dict[str, str] | None = None) -> None:
    _atomic_save_tensors({k: _cpu(v) for k, v in model.state_dict().items()}, path, metadata or {})


def read_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """All tensors and the metadata of a safetensors file; a clear error when it is unreadable."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"Checkpoint {path} does not exist.")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
        return load_file(str(path)), metadata
    except (SafetensorError, OSError, ValueError) as e:
        raise ModelError(f"Checkpoint {path} is not a readable safetensors file ({e}).") from None


def _finite(t: torch.Tensor) -> bool:
    """Every value finite? A NaN or inf makes the sum NaN or inf, so one sum (numpy's, the fastest on CPU) answers
    for almost every tensor; only a non-finite sum (or an overflow of large values) is checked element-wise."""
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is answered by the element-wise check
        total = float(t.numpy().sum()) if t.dtype in (torch.float32, torch.float64) else float(t.float().sum())
    return math.isfinite(total) or bool(torch.isfinite(t).all())


def nonfinite_tensors(path: Path) -> list[str]:
    """Names of the floating-point tensors of a safetensors file that hold NaN or infinite values, read one
    tensor at a time (a large model is never in memory twice). ModelError when the file is unreadable."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"Checkpoint {path} does not exist.")
    bad = []
    try:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                t = f.get_tensor(name)
                if t.is_floating_point() and not _finite(t):
                    bad.append(name)
    except (SafetensorError, OSError, ValueError) as e:
        raise ModelError(f"Checkpoint {path} is not a readable safetensors file ({e}).") from None
    return bad


def check_compatible(model: nn.Module, tensors: dict[str, torch.Tensor], what: str) -> None:
    """Refuse a checkpoint whose names or shapes differ from the model's, saying where."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in tensors.items()}
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    wrong = [f"{k}: checkpoint {got[k]} vs model {expected[k]}" for k in expected if k in got and got[k] != expected[k]]
    if missing or extra or wrong:
        parts = []
        if wrong:
            parts.append("shape mismatch at " + "; ".join(wrong[:3]) + (" ..." if len(wrong) > 3 else ""))
        if missing:
            parts.append(f"{len(missing)} tensors missing (e.g. {missing[0]})")
        if extra:
            parts.append(f"{len(extra)} unexpected tensors (e.g. {extra[0]})")
        raise ModelError(f"{what} does not match the model architecture: {', '.join(parts)}.")


def load_weights(model: nn.Module, path: Path) -> dict[str, str]:
    """Load weights into `model` after checking every name and shape; returns the file's metadata."""
    tensors, metadata = read_tensors(path)
    check_compatible(model, tensors, f"Checkpoint {path}")
    model.load_state_dict(tensors, strict=True)
    return metadata


def save_training_state(path: Path, optimizer: torch.optim.Optimizer, extra: dict[str, Any]) -> None:
    """Optimizer tensors flattened into safetensors; param groups and `extra` as JSON metadata."""
    sd = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, state in sd["state"].items():
        for name, value in state.items():
            if torch.is_tensor(value):
                tensors[f"state.{idx}.{name}"] = _cpu(value)
            else:
                scalars.setdefault(str(idx), {})[name] = value
    rng = torch.get_rng_state()
    tensors["rng.cpu"] = rng.clone()
    meta = {"param_groups": json.dumps(sd["param_groups"]), "scalars": json.dumps(scalars), "extra": json.dumps(extra)}
    _atomic_save_tensors(tensors, path, meta)


def load_training_state(path: Path, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Restore the optimizer (and CPU RNG) saved by `save_training_state`; returns `extra`."""
    tensors, meta = read_tensors(path)
    where = f"{Path(path).parent.name}/{Path(path).name} is damaged"  # as run_schema.check names a run's file
    scalars, groups, extra = (_meta_json(meta, key, where) for key in ("scalars", "param_groups", "extra"))
    if not isinstance(scalars, dict) or not all(isinstance(v, dict) for v in scalars.values()):
        raise ModelError(f"{where}: scalars: not an object of per-parameter objects.")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, dict) for g in groups):
        raise ModelError(f"{where}: param_groups: not a list of parameter groups.")
    if not isinstance(extra, dict):
        raise ModelError(f"{where}: extra: not an object.")
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("state."):
            _, idx, name = [*key.split(".", 2), "", ""][:3]
            if not (idx.isascii() and idx.isdigit()) or not name:
                raise ModelError(f"{where}: tensor {key!r} is not named state.INDEX.NAME.")
            state.setdefault(int(idx), {})[name] = value
    for idx, values in scalars.items():
        if not (idx.isascii() and idx.isdigit()):
            raise ModelError(f"{where}: scalars: {idx!r} is not a parameter index.")
        state.setdefault(int(idx), {}).update(values)
    # How the update runs (fused kernels on a GPU, foreach, capturable) belongs to this device, not the saved one:
    # a run trained on a GPU resumes on a CPU and the other way round.
    own = optimizer.param_groups
    for saved, current in zip(groups, own, strict=False):
        for flag in ("fused", "foreach", "capturable"):
            if flag in current:
                saved[flag] = current[flag]
    try:
        optimizer.load_state_dict({"state": state, "param_groups": groups})
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as e:
        raise ModelError(f"Training state {path} does not match this optimizer ({e}).") from None
    if "rng.cpu" in tensors:
        try:
            torch.set_rng_state(tensors["rng.cpu"])
        except (RuntimeError, TypeError) as e:
            raise ModelError(f"{where}: rng.cpu is not a random-number state ({e}).") from None
    return extra


def _meta_json(meta: dict[str, str], key: str, where: str) -> Any:
    """One JSON value of a training state's metadata ({} when absent; param_groups is required)."""
    if key not in meta:
        if key == "param_groups":
            raise ModelError(f"{where}: param_groups is missing.")
        return {}
    try:
        return json.loads(meta[key])
    except (json.JSONDecodeError, RecursionError) as e:
        raise ModelError(f"{where}: {key} is not JSON ({str(e)[:80]}).") from None
