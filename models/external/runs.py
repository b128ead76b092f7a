"""`import_model`: an external model becomes a run folder every page, the CLI and the Python API treat like a
trained run.

    <runs root>/<run id>/
        config.json        source (kind, what was given, library versions, what rebuilds it), model, modality,
                           classes, dataset (linked or null), dataset_info, layers, normalisation, notes, created
        summary.json       state "imported"
        model.safetensors  the weights, whatever format they came in
        hf/                Hugging Face config and processor or tokenizer files (hf: sources)
        vocab.json         word vocabulary (zoo text models)

The folder is written under `<runs root>/.importing/`, reloaded from there exactly as a page would load it
(its logits must match the imported model's), and only then moved into place: a model that cannot be
imported leaves nothing behind.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from xaidash.data.modalities import modality_of
from xaidash.data.registry import DatasetInfo
from xaidash.models.external.layers import (
    Layers,
    attention_grid,
    check_layer,
    detect_image_layers,
    detect_text_layers,
    feature_layout,
    gap_classifier_for,
)
from xaidash.models.external.linking import (
    check_normalisation,
    image_probe,
    linked_info,
    output_width,
    run_info,
    settle_classes,
    settle_shape,
    shape_text,
    text_probe,
)
from xaidash.models.external.loading import IMPORTED, load_imported
from xaidash.models.external.options import ImportOptions
from xaidash.models.external.registry import Loaded, parse_source
from xaidash.models.language.convert import import_language_model, is_language_source
from xaidash.models.language.loading import MARK as LANGUAGE_MARK
from xaidash.models.registry import ModelError, ModelSpec
from xaidash.models.runs.checkpoint import save_weights
from xaidash.models.runs.staging import move_into_place, package_versions, staging_folder
from xaidash.models.runs.store import WEIGHTS, Run, info_to_json

_VERSIONED = ("torch", "torchvision", "transformers", "timm", "safetensors")


@dataclass
class Imported:
    """A finished import: the run and what the user should know about it."""

    run: Run
    notes: list[str] = field(default_factory=list)


def _zoo_layers(spec: ModelSpec) -> Layers:
    return Layers(
        conv_layers=list(spec.conv_layers),
        last_conv=spec.last_conv,
        layouts=dict(spec.feature_layouts),
        gap_classifier=spec.gap_classifier,
        embedding=spec.embedding,
        attention=list(spec.attention),
    )


def _apply_overrides(
    layers: Layers, model: nn.Module, probe: torch.Tensor, wanted: dict[str, str], modality: str
) -> None:
    """--layer gradcam=PATH / embedding=PATH / attention=P1,P2: checked against the model, then used."""
    if "gradcam" in wanted:
        path = wanted["gradcam"]
        if not modality_of(modality).spatial:
            raise ModelError("--layer gradcam= applies to image models (CAM methods explain images).")
        check_layer(model, path, "--layer gradcam")
        layout = feature_layout(model, probe, path)
        if path not in layers.conv_layers:
            layers.conv_layers.append(path)
        if layout.kind != "nchw":
            layers.layouts[path] = layout
        layers.last_conv = path
        layers.gap_classifier = gap_classifier_for(model, probe, path, layout)
    if "embedding" in wanted:
        path = wanted["embedding"]
        check_layer(model, path, "--layer embedding")
        if not isinstance(model.get_submodule(path), nn.Embedding):
            raise ModelError(
                f"--layer embedding={path}: that is a {type(model.get_submodule(path)).__name__}, not nn.Embedding."
            )
        layers.embedding = path
    if "attention" in wanted:
        paths = [p.strip() for p in wanted["attention"].split(",") if p.strip()]
        for p in paths:
            check_layer(model, p, "--layer attention")
        layers.attention = paths


def _layers(loaded: Loaded, model: nn.Module, probe: torch.Tensor, options: ImportOptions) -> Layers:
    if loaded.spec is not None:
        layers = _zoo_layers(loaded.spec)
    elif modality_of(loaded.modality).spatial:
        layers = detect_image_layers(model, probe)
    elif modality_of(loaded.modality).tokenized:
        layers = detect_text_layers(model, probe)
    else:  # a table model reads a plain vector: no CAM layer, no token embedding to find
        layers = Layers()
    _apply_overrides(layers, model, probe, options.layers, loaded.modality)
    return layers


def _config(
    source: str,
    options: ImportOptions,
    loaded: Loaded,
    classes: tuple[str, ...],
    layers: Layers,
    info: Any,
    linked: bool,
) -> dict[str, Any]:
    prefix = source.partition(":")[0]
    return {
        "model": loaded.name,
        "modality": loaded.modality,
        "classes": list(classes),
        "dataset": info.name if linked else None,
        "dataset_info": info_to_json(info),
        "source": {
            "kind": prefix,
            "given": source,
            "weights": str(Path(options.weights).expanduser().resolve()) if options.weights else None,
            "options": options.model_options,
            "versions": package_versions(_VERSIONED),
            "record": loaded.record,
        },
        "layers": {**layers.to_json(), "overrides": dict(options.layers)},
        "deeplift_ok": bool(loaded.spec.deeplift_ok) if loaded.spec is not None else False,
        "input_mean": list(loaded.mean),
        "input_std": list(loaded.std),
        "description": loaded.description,
        "notes": loaded.notes,
        "created": time.time(),
    }


def _write(staging: Path, loaded: Loaded, config: dict[str, Any]) -> None:
    for write in loaded.files:
        write(staging)
    save_weights(loaded.model, staging / WEIGHTS, {"source": config["source"]["given"]})
    run = Run(staging)
    run.write_config(config)
    run.update_summary(state=IMPORTED)


@torch.no_grad()
def _verify(staging: Path, model: nn.Module, probe: torch.Tensor) -> None:
    """The run folder alone must give back the imported model: same logits on the probe inputs."""
    bundle = load_imported(Run(staging), device="cpu")
    expected = model.eval()(probe).float()
    got = bundle.logits(probe.to(bundle.device)).cpu()
    if got.shape != expected.shape or not torch.allclose(
        got, expected, rtol=1e-4, atol=1e-4 * (1 + expected.abs().max().item())
    ):
        gap = (got - expected).abs().max().item() if got.shape == expected.shape else float("nan")
        raise ModelError(
            "The model rebuilt from its run folder does not give the imported model's outputs "
            f"(largest difference {gap:.3g}). Is its forward pass random in eval mode, or does it keep state "
            "outside its state dict?"
        )


# The options of a classifier's import, by their command-line flag: a language model takes none of them.
_CLASSIFIER_OPTIONS = {
    "--weights": "weights",
    "--input-shape": "input_shape",
    "--mean": "mean",
    "--std": "std",
    "--classes": "classes",
    "--dataset": "dataset",
    "--layer": "layers",
    "--option": "model_options",
    "--vocab": "vocab",
}


def _import_language(source: str, options: ImportOptions, root: Path | None) -> Imported:
    """`smollm2`, `gguf:FILE` and `hf:` causal LMs: converted by models/language/convert.py; only --name applies."""
    given = [flag for flag, attr in _CLASSIFIER_OPTIONS.items() if getattr(options, attr)]
    if given:
        raise ModelError(
            f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to a generative language model "
            f"({source}): it has no classes, data set or input shape; import it with only --name."
        )
    return Imported(import_language_model(source, name=options.name, root=root))


def _probe(
    loaded: Loaded, options: ImportOptions, linked: DatasetInfo | None
) -> tuple[tuple[int, ...], torch.Tensor, str, list[str]]:
    """(input shape, probe inputs, what they are in words, notes): the source's own probe (a table's prepared rows),
    token ids from the model's tokenizer, or seeded images of the shape settled with the linked data set
    (normalisation checked against its channels)."""
    adapter = modality_of(loaded.modality)
    if loaded.probe is not None:
        return tuple(loaded.input_shape), loaded.probe, f"{adapter.describe(loaded.input_shape)}, prepared", []
    if adapter.tokenized:
        return (), text_probe(loaded.tokenizer), "token ids from its tokenizer", []
    shape, notes = settle_shape(loaded, options, linked)
    check_normalisation(loaded.mean, loaded.std, shape[0])
    return shape, image_probe(shape), f"{shape_text(shape)} images", notes


def import_model(source: str, options: ImportOptions, root: Path | None = None) -> Imported:
    """Import an external model as a run (see the module docstring); ModelError (or DatasetError) saying why not.
    A causal language model (`is_language_source`) becomes a language-model run instead."""
    if is_language_source(source):
        return _import_language(source, options, root)
    kind, argument = parse_source(source)
    options.check()  # the values no model takes, then those this source does not (a zoo model's option ranges)
    kind.check(argument, options)
    if kind.needs_weights and options.weights is None:
        raise ModelError(f"{kind.prefix}: needs --weights FILE ({kind.help}).")
    if options.weights is not None and not Path(options.weights).expanduser().is_file():
        raise ModelError(f"Weights file {str(options.weights)!r} does not exist.")
    linked = linked_info(options)
    options = replace(options, linked=linked)
    loaded = kind.load(argument, options)
    if linked is not None and linked.modality != loaded.modality:
        raise ModelError(f"Data set {linked.name} holds {linked.modality}s; the model reads {loaded.modality}.")
    model = loaded.model.float().eval()
    shape, probe, what, shape_notes = _probe(loaded, options, linked)
    notes = list(loaded.notes) + shape_notes
    width = output_width(model, probe, what)
    if loaded.num_classes and loaded.num_classes != width:
        raise ModelError(f"The model was declared with {loaded.num_classes} classes but returns {width} logits.")
    classes = settle_classes(width, loaded, options, linked)
    inputs = run_info(replace(loaded, input_shape=shape), classes, shape, linked)
    layers = _layers(loaded, model, probe, options)
    attention = callable(getattr(model, "forward_with_attention", None))
    loaded.record.update(input_shape=list(shape), attention=attention)
    if attention and modality_of(loaded.modality).spatial:  # the Attention page lays the patches out on this grid
        grid = attention_grid(model, probe)
        loaded.record["grid"] = list(grid) if grid else None
    config = _config(source, options, replace(loaded, notes=notes), classes, layers, inputs.info, inputs.has_dataset)

    with staging_folder(root) as staging:
        _write(staging, loaded, config)
        _verify(staging, model, probe)
        run = move_into_place(staging, root, loaded.name)
    return Imported(run, notes)


CAM_ROW = "CAM (GAP + linear)"  # describe's row for the classifier after global average pooling
CAM_NOTE_ROW = "CAM note"  # right after it, when CAM was not found: why, and how to name the layer (--layer gradcam=)


def describe(run: Run) -> list[tuple[str, str]]:
    """(label, value) lines summing up an imported run, for the CLI and the Import page (which shows the rows
    labelled "note" and CAM_NOTE_ROW under its table)."""
    c = run.config()
    if run.kind == "language_model":
        return _describe_language(run, c)
    layers = Layers.from_json(c.get("layers") or {})
    info = c["dataset_info"]
    shape = info.get("input_shape") or []
    classes = c.get("classes") or []
    rows = [
        ("run", run.id),
        ("model", c["model"]),
        ("source", c["source"]["given"]),
        ("input", modality_of(c["modality"]).describe(shape) if shape else "text"),
        ("normalisation", _normalisation(c)),
        _predicts(info, classes),
        ("data set", c.get("dataset") or "none linked (uploads and typed text only; link one with --dataset)"),
    ]
    if modality_of(c["modality"]).spatial:
        rows.append(("Grad-CAM layer", _cam_line(layers)))
        if layers.cam_note:  # which layer CAM is missing and how to name it, found by the import's probe
            rows += [(CAM_ROW, "not found: see below"), (CAM_NOTE_ROW, layers.cam_note)]
        else:
            rows.append((CAM_ROW, layers.gap_classifier or "does not apply"))
    elif modality_of(c["modality"]).tokenized:
        rows.append(("embedding", layers.embedding or "none found (IG and saliency do not apply)"))
    rows.append(("attention", f"{len(layers.attention)} layers" if layers.attention else "none readable"))
    rows += [("note", n) for n in c.get("notes") or []]
    return rows


def _predicts(info: dict[str, Any], classes: list[str]) -> tuple[str, str]:
    """The row of what the run predicts: its classes, or the number (the linked table's regression target)."""
    target = info.get("regression")
    if target:
        unit = f" in {target['unit']}" if target.get("unit") else ""
        return ("predicts", f"a number: {target['name']}{unit} (one output, the value)")
    return ("classes", f"{len(classes)}: {', '.join(classes[:12])}{' ...' if len(classes) > 12 else ''}")


def _describe_language(run: Run, c: dict[str, Any]) -> list[tuple[str, str]]:
    lm = c[LANGUAGE_MARK]
    return [
        ("run", run.id),
        ("model", c["model"]),
        ("source", f"{lm.get('given', '?')} ({lm.get('kind', '?')})"),
        ("architecture", str(lm.get("architecture", "?"))),
        ("layers", str(lm.get("layers", "?"))),
        ("heads", str(lm.get("heads", "?"))),
        ("parameters", _count(lm.get("parameters"))),
        ("context", f"{lm['context']:,} tokens" if lm.get("context") else "?"),
        ("chat template", "yes" if lm.get("chat_template") else "no (prompts are read as raw text)"),
        ("converted in", f"{lm['convert_seconds']:.1f} s" if lm.get("convert_seconds") is not None else "?"),
    ]


def _count(n: int | None) -> str:
    """134515008 -> '134,515,008 (134.5M)'."""
    if not n:
        return "?"
    return f"{n:,}" + (f" ({n / 1e6:.1f}M)" if n >= 1e6 else "")


def _normalisation(c: dict[str, Any]) -> str:
    mean, std = c.get("input_mean") or [], c.get("input_std") or []
    if mean:
        return f"mean {', '.join(f'{v:g}' for v in mean)}; std {', '.join(f'{v:g}' for v in std)}"
    if modality_of(c["modality"]).tokenized:  # token ids are not normalised
        return "-"
    return "the data set's" if c.get("dataset") else "none"


def _cam_line(layers: Layers) -> str:
    from xaidash.models.external.layers import layout_summary

    if not layers.last_conv:
        return "none found (CAM methods do not apply)"
    layout = layers.layouts.get(layers.last_conv)
    return f"{layers.last_conv} ({layout_summary(layout)}; {len(layers.conv_layers)} to choose from)"
