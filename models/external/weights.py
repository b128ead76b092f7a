"""Reading an external model's weights without unpickling anything, and loading them with named checks.

Two formats: safetensors, and a state dict written by `torch.save`, read with `weights_only=True`
(torch's restricted unpickler: tensors and plain containers only). A file holding a whole pickled
model is refused, with the two lines that save a state dict instead. Everything is read onto the
CPU, so weights saved on a GPU load on a machine without one.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from xaidash.models.registry import ModelError
from xaidash.models.runs.checkpoint import check_compatible, read_tensors

WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
# Training scripts often save {"state_dict": ..., "epoch": ...}; the weights are under one of these keys.
_NESTED_KEYS = ("state_dict", "model_state_dict", "model", "net", "module", "weights")
SAVE_HOWTO = (
    "Save its weights instead: torch.save(model.state_dict(), 'weights.pt'), or "
    "safetensors.torch.save_file(model.state_dict(), 'model.safetensors')."
)


def read_state_dict(path: Path | str) -> tuple[dict[str, torch.Tensor], list[str]]:
    """(name -> tensor on the CPU, notes on what was unwrapped) from a .safetensors file or a torch.save file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelError(f"Weights file {str(path)!r} does not exist.")
    if path.stat().st_size == 0:
        raise ModelError(f"Weights file {path.name} is empty (0 bytes).")
    if path.suffix == ".safetensors":
        return read_tensors(path)[0], []
    obj = _torch_load(path)
    state, notes = _state_dict_in(obj, path.name)
    return _without_wrapper_prefix(state, notes), notes


def _torch_load(path: Path) -> Any:
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        found = re.search(r"GLOBAL ([\w.]+)", str(e))
        if found is None:  # not even a pickle of plain containers: some other file
            raise ModelError(
                f"{path.name} is neither a safetensors file nor a file written by torch.save. " + SAVE_HOWTO
            ) from None
        what = f" (it names {found.group(1)})"
        raise ModelError(
            f"{path.name} is not a plain state dict: it holds a pickled Python object{what}, most likely a whole "
            f"model saved with torch.save(model), and xaidash never unpickles objects (that can run any code). "
            + SAVE_HOWTO
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as e:
        raise ModelError(
            f"{path.name} is neither a safetensors file nor a file written by torch.save ({e}). " + SAVE_HOWTO
        ) from None


def _is_state(obj: Any) -> bool:
    return isinstance(obj, dict) and bool(obj) and all(isinstance(v, torch.Tensor) for v in obj.values())


def _state_dict_in(obj: Any, name: str) -> tuple[dict[str, torch.Tensor], list[str]]:
    if _is_state(obj):
        return {str(k): v for k, v in obj.items()}, []
    if isinstance(obj, dict):
        for key in _NESTED_KEYS:
            if _is_state(obj.get(key)):
                return {str(k): v for k, v in obj[key].items()}, [f"weights read from the {key!r} entry of {name}"]
        keys = ", ".join(map(str, list(obj)[:8]))
        raise ModelError(
            f"{name} holds a dict ({keys}) but no state dict of tensors, nor one under "
            f"{', '.join(repr(k) for k in _NESTED_KEYS)}. " + SAVE_HOWTO
        )
    raise ModelError(f"{name} holds a {type(obj).__name__}, not a state dict. " + SAVE_HOWTO)


def _without_wrapper_prefix(state: dict[str, torch.Tensor], notes: list[str]) -> dict[str, torch.Tensor]:
    """nn.DataParallel and DistributedDataParallel save every name with a 'module.' prefix: drop it."""
    if state and all(k.startswith("module.") for k in state):
        notes.append("the 'module.' prefix of (Distributed)DataParallel was dropped from every name")
        return {k[len("module.") :]: v for k, v in state.items()}
    return state


def load_state(model: nn.Module, state: dict[str, torch.Tensor], what: str) -> None:
    """Load `state` into `model` after checking every name and shape (missing, unexpected and mismatched
    tensors are refused, naming them)."""
    check_compatible(model, state, what)
    model.load_state_dict(state, strict=True)


def output_count(state: dict[str, torch.Tensor], classifier: str | None = None) -> int | None:
    """The class count a state dict was trained for: rows of `classifier`.weight when the library names its
    classifier, else of the last 2-D weight (the classification head is the last layer of almost every net)."""
    if classifier and f"{classifier}.weight" in state:
        return int(state[f"{classifier}.weight"].shape[0])
    weights = [v for k, v in state.items() if k.endswith("weight") and v.dim() == 2]
    return int(weights[-1].shape[0]) if weights else None


def class_count(state: dict[str, torch.Tensor], classes: tuple[str, ...], classifier: str | None, what: str) -> int:
    """How many classes to build the model for: the names given, checked against the weights' classifier rows."""
    found = output_count(state, classifier)
    if classes and found is not None and found != len(classes):
        raise ModelError(
            f"{what} was trained for {found} classes, but {len(classes)} class names were given "
            f"({', '.join(classes[:6])}{' ...' if len(classes) > 6 else ''}): give exactly {found}."
        )
    if found is None and not classes:
        raise ModelError(f"Cannot tell how many classes {what} has: give --classes or --classes-file.")
    return len(classes) or int(found or 0)
