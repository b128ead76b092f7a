"""`import_scene_checkpoint`: a torchvision detector's or segmenter's weights trained elsewhere, as a scene run.

The weights must be a safetensors state dict of the architecture (never a pickle: a `.pt`/`.pth` file is refused
with how to convert it). The run is written out of sight under the runs root's staging area
(models/runs/staging.py), opened once with `load_scene_run` as a check, and only then moved into place: a refused
import leaves no folder behind. The run has run_files.py's layout: config.json with its `scene_model` facts (no
settings: it was not trained here), summary.json in state `completed`, model.safetensors.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from xaidash.data.scenes.registry import scene_set
from xaidash.models.external.module_source import user_module_record
from xaidash.models.registry import ModelError
from xaidash.models.runs.checkpoint import read_tensors, save_weights
from xaidash.models.runs.files import WEIGHTS
from xaidash.models.runs.staging import move_into_place, package_versions, staging_folder
from xaidash.models.runs.store import Run
from xaidash.models.scenes import run_files
from xaidash.models.scenes.evaluate import HEADLINE
from xaidash.models.scenes.loading import load_scene_run
from xaidash.models.scenes.own_module import OUTPUT_FORMATS, OwnSceneModel, check_layer, check_output, own_spec
from xaidash.models.scenes.zoo import SCENE_MODELS, SceneModelSpec, TorchvisionSegmenter

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".tar")
DEFAULT_IMAGE_SIZE = 320  # recorded when --image-size is not given: the side torchvision's mobile models work at


def importable() -> list[SceneModelSpec]:
    """The architectures `xaidash scenes import` takes: the scene models that are not trained here."""
    return [s for s in SCENE_MODELS if not s.trainable]


def import_scene_checkpoint(
    arch: str,
    weights: str | Path,
    classes: list[str] | tuple[str, ...],
    *,
    image_size: int | None = None,
    name: str | None = None,
    dataset: str | None = None,
    root: Path | None = None,
) -> Run:
    """A new completed scene run holding `weights` (a safetensors state dict of torchvision's `arch` built for
    `classes`, the background not counted). `dataset`, when given, is the scene set evaluate and explain read (checked
    to exist). Every refusal is one line (ModelError or DatasetError) and leaves no run folder."""
    spec = _arch(arch)
    names = checked_classes(classes, dataset)
    size = DEFAULT_IMAGE_SIZE if image_size is None else int(image_size)
    model = spec.make(len(names), size)
    _load_state_dict(model, spec, Path(weights), len(names))
    return _written(model, spec, _facts(spec, names, size, dataset, weights), root, name or spec.id)


def import_scene_module(
    target: str,
    weights: str | Path,
    classes: list[str] | tuple[str, ...],
    *,
    output: str,
    cam_layer: str,
    options: dict[str, Any] | None = None,
    image_size: int | None = None,
    name: str | None = None,
    dataset: str | None = None,
    root: Path | None = None,
) -> Run:
    """A new completed scene run of the user's own detector or segmenter: `target` is FILE.py:FACTORY or
    package.module:FACTORY (called with `options`), `output` the format its output is declared in
    (`own_module.OUTPUT_FORMATS`), `cam_layer` the module path in it the CAMs weight, `weights` a safetensors state
    dict of it. Checked before anything is written: the classes, the code (its errors in one line), the layer, every
    key and shape of the weights, and one probe pass giving what `output` promises."""
    if output not in OUTPUT_FORMATS:
        known = ", ".join(f"{f.id} ({f.task})" for f in OUTPUT_FORMATS.values())
        raise ModelError(f"Unknown --output {output!r}: declare one of {known}.")
    names = checked_classes(classes, dataset)
    size = DEFAULT_IMAGE_SIZE if image_size is None else int(image_size)
    record = user_module_record(target, dict(options or {})) | {"output": output, "cam_layer": cam_layer}
    if "file" in record and not Path(record["file"]).is_file():  # ("gone" is for a run whose file moved later)
        raise ModelError(f"Model file {record['file']} does not exist.")
    spec = own_spec(record)
    model = spec.make(len(names), size)
    assert isinstance(model, OwnSceneModel)
    check_layer(model.net, cam_layer)
    _load_state_dict(model, spec, Path(weights), len(names))
    check_output(model, size, len(names))
    facts = _facts(spec, names, size, dataset, weights) | {"module": record}
    return _written(model, spec, facts, root, name or str(record["factory"]))


def checked_classes(classes: list[str] | tuple[str, ...], dataset: str | None) -> list[str]:
    """The class names, stripped; one line when there are none, one repeats, or `dataset` has other classes."""
    names = [str(c).strip() for c in classes if str(c).strip()]
    if not names:
        raise ModelError("No classes given: name the checkpoint's object classes in order, e.g. --classes cat,dog.")
    if len(set(names)) != len(names):
        raise ModelError(f"The classes {', '.join(names)} name one class twice.")
    if dataset is not None:  # evaluate and explain compare its labels with the set's truth: the same classes
        known = list(scene_set(dataset).classes)  # a DatasetError naming the known sets
        if known != names:
            raise ModelError(
                f"{dataset}'s classes are {', '.join(known)}, not {', '.join(names)}: import it without --data, "
                "or with a set of its classes (in label order)."
            )
    return names


def _facts(
    spec: SceneModelSpec, names: list[str], size: int, dataset: str | None, weights: str | Path
) -> dict[str, Any]:
    return {
        "task": spec.task, "model": spec.id, "dataset": dataset, "classes": names, "image_size": size,
        # where it came from (no `settings`: it was not trained here, so it cannot be resumed)
        "imported": {"weights": str(weights), "versions": package_versions(("torch", "torchvision", "safetensors"))},
    }  # fmt: skip


def _written(model: nn.Module, spec: SceneModelSpec, facts: dict[str, Any], root: Path | None, name: str) -> Run:
    """The run, written out of sight, opened once as a check, then moved into place (nothing left when refused)."""
    with staging_folder(root) as staging:
        run = Run(staging)
        run_files.write_config(run, facts, "cpu")
        save_weights(model, run.file(WEIGHTS))
        run.update_summary(state="completed", imported=time.time(), headline=HEADLINE[spec.task], epochs_done=0)
        load_scene_run(staging, device="cpu")  # the run opens as every scene run does, or the import is refused
        return move_into_place(staging, root, name)


def _arch(arch: str) -> SceneModelSpec:
    known = importable()
    for spec in known:
        if spec.id == arch:
            return spec
    raise ModelError(f"Unknown architecture {arch!r}: choose one of {', '.join(s.id for s in known)}.")


def _load_state_dict(model: nn.Module, spec: SceneModelSpec, path: Path, num_classes: int) -> None:
    """The file's state dict into `model` (the torchvision network inside a segmenter's wrapper), after checking every
    key and shape; one line for a pickle, a missing file, or a state dict of another architecture or class count."""
    if path.suffix.lower() in PICKLE_SUFFIXES:
        raise ModelError(
            f"{path.name} is a pickled PyTorch file, which is never loaded here: convert its state dict with "
            "safetensors.torch.save_file(model.state_dict(), 'weights.safetensors') and import that."
        )
    if not path.is_file():
        raise ModelError(f"No weights file at {path}.")
    tensors, _ = read_tensors(path)
    target = model.net if isinstance(model, (TorchvisionSegmenter, OwnSceneModel)) else model
    expected = target.state_dict()
    for key, value in expected.items():  # frozen batch norms (torchvision's pretrained models) keep no step count
        if key.endswith("num_batches_tracked") and key not in tensors:
            tensors[key] = value.clone()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    wrong = [k for k in expected if k in tensors and tuple(tensors[k].shape) != tuple(expected[k].shape)]
    if missing or unexpected or wrong:
        parts = [f"{len(missing)} keys missing", f"{len(unexpected)} unexpected", f"{len(wrong)} of another shape"]
        first = (missing or unexpected or wrong)[0]
        raise ModelError(
            f"{path.name} does not fit {spec.id} with {num_classes} classes (+ background): {', '.join(parts)} "
            f"(first: {first})."
        )
    target.load_state_dict({k: v.to(expected[k].dtype) for k, v in tensors.items()}, strict=True)
    if not all(bool(torch.isfinite(v).all()) for v in tensors.values() if v.is_floating_point()):
        raise ModelError(f"{path.name} holds NaN or infinite weights.")
