"""`torchvision:NAME`: a torchvision classification architecture with the user's weights (`--weights FILE`), or
torchvision's pretrained weights when they are in torch's cache or downloadable.

The input size and normalisation come from the architecture's default pretrained weights (their
`transforms()`: crop size, mean, std), whichever weights are loaded; `--option KEY=VALUE` passes keyword
arguments to `torchvision.models.get_model` (e.g. `aux_logits=false`).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from xaidash.data.paths import offline
from xaidash.models.external.options import ImportOptions
from xaidash.models.external.registry import ImportSource, Loaded, Rebuilt, register
from xaidash.models.external.weights import class_count, load_state, read_state_dict
from xaidash.models.registry import ModelError


def _classification_models() -> list[str]:
    import torchvision.models as tvm

    return tvm.list_models(module=tvm)  # image classifiers only (no detection, video or segmentation)


def _check_name(name: str) -> None:
    known = _classification_models()
    if name not in known:
        near = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        raise ModelError(f"torchvision has no image classifier {name!r}.{hint}")


def _default_weights(name: str) -> Any:
    from torchvision.models import get_model_weights

    try:
        return get_model_weights(name).DEFAULT
    except (ValueError, AttributeError):
        return None


def _build(name: str, num_classes: int, options: dict[str, Any]) -> nn.Module:
    from torchvision.models import get_model

    try:
        return get_model(name, weights=None, num_classes=num_classes, **options).eval()
    except (TypeError, ValueError) as e:
        raise ModelError(f"torchvision.models.get_model({name!r}) refused the options {options}: {e}") from None


def _cached_file(weights: Any) -> Path:
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(weights.url)


def _pretrained_state(name: str, weights: Any) -> dict[str, torch.Tensor]:
    if weights is None:
        raise ModelError(f"torchvision has no pretrained weights for {name}: give --weights FILE.")
    if offline() and not _cached_file(weights).is_file():
        raise ModelError(
            f"torchvision:{name} without --weights needs torchvision's pretrained weights ({weights.url}), which are "
            f"not in torch's cache ({_cached_file(weights).parent}) while downloads are off (XAIDASH_OFFLINE). "
            "Give --weights FILE (your trained state dict), or download that file into the cache."
        )
    try:
        return weights.get_state_dict(progress=False, check_hash=True)
    except (OSError, RuntimeError, ValueError) as e:
        raise ModelError(f"torchvision's pretrained weights for {name} could not be had: {e}") from None


def _input(weights: Any, options: ImportOptions) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]:
    shape: tuple[int, ...] = ()
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    if weights is not None:
        t = weights.transforms()
        crop = getattr(t, "crop_size", None)
        if crop:
            shape = (3, int(crop[0]), int(crop[-1]))
        mean = tuple(float(v) for v in getattr(t, "mean", ()) or ())
        std = tuple(float(v) for v in getattr(t, "std", ()) or ())
    shape = options.input_shape or shape
    if not shape:
        raise ModelError("torchvision declares no input size for this model: give --input-shape, e.g. 3x224x224.")
    return shape, options.mean or mean, options.std or std


def load(argument: str, options: ImportOptions) -> Loaded:
    name = argument
    _check_name(name)
    weights = _default_weights(name)
    notes: list[str] = []
    if options.weights is not None:
        state, notes = read_state_dict(options.weights)
        what = f"Weights file {Path(options.weights).name} for torchvision {name}"
        pretrained = False
    else:
        state = _pretrained_state(name, weights)
        what = f"torchvision's pretrained {name}"
        pretrained = True
    num_classes = class_count(state, () if pretrained else options.classes, None, what)
    model = _build(name, num_classes, options.model_options)
    load_state(model, state, what)
    categories = tuple(weights.meta.get("categories") or ()) if pretrained and weights is not None else ()
    if pretrained and options.classes and len(options.classes) != num_classes:
        raise ModelError(
            f"torchvision's pretrained {name} has {num_classes} classes, but --classes names {len(options.classes)}: "
            "give --weights with your fine-tuned state dict."
        )
    shape, mean, std = _input(weights, options)
    return Loaded(
        model=model,
        modality="image",
        name=options.name or f"torchvision:{name}",
        num_classes=num_classes,
        record={"name": name, "options": options.model_options, "num_classes": num_classes},
        classes=categories if len(categories) == num_classes else None,
        input_shape=shape,
        mean=mean,
        std=std,
        notes=notes + ([f"torchvision's pretrained weights ({weights.url})"] if pretrained else []),
        description=f"torchvision {name}" + (", pretrained weights." if pretrained else ", with imported weights."),
    )


def rebuild(record: dict[str, Any], run_dir: Path) -> Rebuilt:
    return Rebuilt(_build(record["name"], int(record["num_classes"]), dict(record.get("options") or {})))


register(
    ImportSource(
        prefix="torchvision",
        label="torchvision architecture",
        argument="NAME",
        help="a torchvision classifier name (resnet50, efficientnet_b0, vit_b_16, convnext_tiny, ...) with --weights FILE "
        "(a state dict), or torchvision's pretrained weights when cached or downloadable",
        load=load,
        rebuild=rebuild,
    )
)
