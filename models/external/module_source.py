"""`module:FILE.py:FACTORY` or `module:package.module:FACTORY`: the user's own nn.Module class or factory.

The user's code runs because they asked for it: the file (or module) is imported and `FACTORY(**options)`
called (`--option KEY=VALUE`), then `--weights FILE` is loaded into what it returns. The run records
the file's absolute path (or the module's name) and the factory, and imports them again whenever the
run is loaded; a file that moved is reported with where it was. Image models read normalised images of
`--input-shape` (or the linked data set's shape); models of a table linked with `--dataset` read its rows as the table
adapter prepares them (numeric columns standardised, categorical one-hot: `prepared_width` numbers per row), and a
first layer of another width is refused before the model runs. Both return logits.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from xaidash.data.errors import plain_message
from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo
from xaidash.models.external.options import ImportOptions
from xaidash.models.external.registry import ImportSource, Loaded, Rebuilt, register
from xaidash.models.external.weights import load_state, read_state_dict
from xaidash.models.registry import ModelError


def split_target(argument: str) -> tuple[str, str]:
    """'net.py:build' -> ('net.py', 'build'); 'pkg.models:Net' -> ('pkg.models', 'Net')."""
    target, sep, factory = argument.rpartition(":")
    if not sep or not target or not factory.isidentifier():
        raise ModelError(
            f"module:{argument}: write module:FILE.py:FACTORY or module:package.module:FACTORY, FACTORY being an "
            "nn.Module class or a function returning one."
        )
    return target, factory


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise ModelError(f"Model file {path} does not exist.")
    name = "xaidash_user_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"{path} cannot be imported as Python.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling-free type lookups need it registered
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's code: any error is theirs to see
        sys.modules.pop(name, None)
        raise ModelError(f"Running {path.name} failed: {plain_message(e)}") from None
    return module


def _import_from_working_folder(top: str) -> None:
    """Make the top-level package `top` importable from the working folder, as `python -m` would, without
    adding that folder to the search path for everything else: `xaidash` is a script, so the folder is not searched."""
    if top in sys.modules or importlib.util.find_spec(top) is not None:
        return
    spec = importlib.machinery.PathFinder.find_spec(top, [os.getcwd()])
    if spec is None or spec.loader is None:
        return  # import_module then says it cannot be found
    module = importlib.util.module_from_spec(spec)
    sys.modules[top] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(top, None)
        raise


def _import_module(name: str) -> ModuleType:
    try:
        _import_from_working_folder(name.partition(".")[0])
        return importlib.import_module(name)
    except ImportError as e:
        raise ModelError(f"Python module {name} cannot be imported ({e}): run from its folder or install it.") from None
    except Exception as e:  # noqa: BLE001 - the user's code
        raise ModelError(f"Importing {name} failed: {plain_message(e)}") from None


def _call_factory(module: ModuleType, factory: str, kwargs: dict[str, Any], where: str) -> nn.Module:
    fn = getattr(module, factory, None)
    if fn is None:
        found = sorted(n for n, v in vars(module).items() if isinstance(v, type) and issubclass(v, nn.Module))
        hint = f" nn.Module classes there: {', '.join(found)}." if found else ""
        raise ModelError(f"{where} has no {factory!r}.{hint}")
    if not callable(fn):
        raise ModelError(f"{where}:{factory} is a {type(fn).__name__}, not a class or function.")
    try:
        model = fn(**kwargs)
    except Exception as e:  # noqa: BLE001 - the user's factory: any error is theirs to see
        raise ModelError(f"{where}:{factory}({_args(kwargs)}) failed: {plain_message(e)}") from None
    if not isinstance(model, nn.Module):
        raise ModelError(f"{where}:{factory}({_args(kwargs)}) returned a {type(model).__name__}, not an nn.Module.")
    return model.float().eval()


def _args(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def build_user_module(record: dict[str, Any]) -> nn.Module:
    """The user's model from an import record (`file` or `module`, `factory`, `options`): the file imported again (one line
    when it moved), the factory called; in eval mode, float32."""
    if "file" in record:
        path = Path(record["file"])
        if not path.is_file():
            raise ModelError(
                f"The model file {path} is gone (moved or deleted since the import): put it back there, or import "
                "the model again from its new place."
            )
        module, where = _import_file(path), path.name
    else:
        module, where = _import_module(record["module"]), record["module"]
    return _call_factory(module, record["factory"], dict(record.get("options") or {}), where)


def user_module_record(argument: str, model_options: dict[str, Any]) -> dict[str, Any]:
    """What a run records to rebuild the user's model: the file's absolute path (or the module's name), the factory
    and its keyword options."""
    target, factory = split_target(argument)
    if target.endswith(".py"):
        return {"file": str(Path(target).expanduser().resolve()), "factory": factory, "options": model_options}
    return {"module": target, "factory": factory, "options": model_options}


def load(argument: str, options: ImportOptions) -> Loaded:
    record = user_module_record(argument, options.model_options)
    factory = record["factory"]
    if options.weights is None:
        raise ModelError(f"module:{argument} needs --weights FILE: the state dict your model was trained to.")
    state, notes = read_state_dict(options.weights)  # before running the user's code: a bad file fails fast
    model = build_user_module(record)
    load_state(model, state, f"Weights file {Path(options.weights).name} for {factory}")
    linked = options.linked
    if linked is not None and not modality_of(linked.modality).spatial and not modality_of(linked.modality).tokenized:
        return _vector_model(argument, options, linked, model, record, notes)
    shape = options.shape_or_linked()
    if not shape:
        raise ModelError(
            f"module:{argument}: give --input-shape (an image model, e.g. 3x224x224) or --dataset (the data set it "
            "reads; a table model needs it: its columns set the model's inputs)."
        )
    if not options.mean and options.linked is None:
        notes.append("no --mean/--std given: images reach the model in [0, 1], unnormalised")
    return Loaded(
        model=model,
        modality="image",
        name=options.name or f"module:{factory}",
        num_classes=0,  # read from its output on a probe input
        record=record,
        input_shape=shape,
        mean=options.mean,
        std=options.std,
        notes=notes,
        description=f"Your model {factory} from {record.get('file') or record.get('module')}.",
    )


def first_linear(model: nn.Module) -> tuple[str, nn.Module, int] | None:
    """(path, module, inputs) of the model's first module with a fixed input width (nn.Linear, nn.Bilinear...), in
    the order the model declares them; None when another kind of layer comes first (then only a call can tell)."""
    for path, module in model.named_modules():
        width = getattr(module, "in_features", None) or getattr(module, "in1_features", None)
        if isinstance(width, int) and width > 0:
            return path or "(the model itself)", module, width
        if isinstance(module, nn.modules.conv._ConvNd | nn.Embedding | nn.RNNBase):
            return None
    return None


def prepared_text(info: DatasetInfo, width: int) -> str:
    """How a data set's rows become `width` numbers, in words: '15 numbers per row (7 numeric columns, one each;
    colour one-hot in 4, size in 4)'."""
    if not info.columns:
        return f"{width} numbers per input"
    numeric = sum(not c.categorical for c in info.columns)
    onehot = [f"{c.name} {c.width}" for c in info.columns if c.categorical]
    shown = ", ".join(onehot[:6]) + (", ..." if len(onehot) > 6 else "")
    return f"{width} numbers per row ({numeric} numeric columns, one each" + (
        f"; categorical one-hot: {shown})" if onehot else ")"
    )


def _vector_model(
    argument: str, options: ImportOptions, info: DatasetInfo, model: nn.Module, record: dict[str, Any], notes: list[str]
) -> Loaded:
    """A model of a linked data set whose adapter prepares plain vectors (a table): its probe is the adapter's
    prepared example rows, and a first layer of another width is refused in one line before the model runs."""
    given = [
        f for f, v in (("--input-shape", options.input_shape), ("--mean", options.mean), ("--std", options.std)) if v
    ]
    if given:
        raise ModelError(
            f"{', '.join(given)} describe images; module:{argument} reads {info.name}'s rows as the data set prepares "
            "them: leave them out."
        )
    adapter = modality_of(info.modality)
    probe = adapter.prepare(adapter.example(info, None, 2), info, None, torch.device("cpu"))
    width = int(probe.shape[-1])
    first = first_linear(model)
    if first is not None and first[2] != width:
        path, module, reads = first
        raise ModelError(
            f"module:{argument}: its first layer {path} ({type(module).__name__}) reads {reads} numbers, but data set "
            f"{info.name} gives {prepared_text(info, width)}: build the model with {width} inputs, or link the data "
            "set it was trained on."
        )
    factory = record["factory"]
    return Loaded(
        model=model,
        modality=info.modality,
        name=options.name or f"module:{factory}",
        num_classes=0,  # read from its output on the probe
        record=record,
        input_shape=tuple(info.input_shape),
        notes=notes,
        probe=probe,
        description=f"Your model {factory} from {record.get('file') or record.get('module')}, reading "
        f"{prepared_text(info, width)}.",
    )


def rebuild(record: dict[str, Any], run_dir: Path) -> Rebuilt:
    return Rebuilt(build_user_module(record))


register(
    ImportSource(
        prefix="module",
        label="your own nn.Module",
        argument="FILE.py:FACTORY",
        help="your nn.Module class or factory function in a .py file (or package.module:FACTORY), with --weights FILE "
        "and --input-shape (images) or --dataset (a table: it reads the data set's prepared rows); --option KEY=VALUE "
        "are its arguments",
        load=load,
        rebuild=rebuild,
        needs_weights=True,
    )
)
