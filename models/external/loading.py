"""An imported run folder back to a ModelBundle: the source rebuilds the architecture from the record in
config.json, `model.safetensors` fills in the weights (names and shapes checked), and the spec is made
from the layers the import found, under the run's own name (never registered in the zoo).

The run store's `load_bundle` reaches this through the loader registered at the end (runs of kind "imported": their
config.json has a "source"); `xaidash.models` imports this module, so the loader is there wherever the store is."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xaidash.data.modalities import modality_of
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import pick_device
from xaidash.models.external.layers import Layers
from xaidash.models.external.registry import SOURCES, Rebuilt, get_source
from xaidash.models.registry import ModelError, ModelSpec
from xaidash.models.runs.checkpoint import load_weights
from xaidash.models.runs.store import WEIGHTS, Run, RunLoader, register_loader

IMPORTED = "imported"  # summary state of an imported run: usable like a completed one


def _rebuilt_only(*_: Any, **__: Any) -> nn.Module:
    raise ModelError("An imported model is rebuilt from its run folder (xaidash.models.runs.store.load_bundle).")


def imported_spec(config: dict[str, Any]) -> ModelSpec:
    """The spec of an imported run, from what its config.json recorded."""
    layers = Layers.from_json(config.get("layers") or {})
    shape = config["dataset_info"].get("input_shape") or []
    return ModelSpec(
        name=config["model"],
        modality=config["modality"],
        build=_rebuilt_only,
        description=config.get("description", ""),
        input_note=modality_of(config["modality"]).describe(shape) if shape else "text, with its own tokenizer",
        last_conv=layers.last_conv,
        conv_layers=tuple(layers.conv_layers),
        embedding=layers.embedding,
        attention=tuple(layers.attention),
        gap_classifier=layers.gap_classifier,
        pretrained=True,
        deeplift_ok=bool(config.get("deeplift_ok", False)),
        no_gradients=_no_gradients(config),
        input_mean=tuple(config.get("input_mean") or ()),
        input_std=tuple(config.get("input_std") or ()),
        feature_layouts=layers.layouts,
    )


def _no_gradients(config: dict[str, Any]) -> str:
    """Why the run's source gives no gradients ("" when it does: every source but a wrapped pipeline)."""
    kind = (config.get("source") or {}).get("kind")
    source = SOURCES.find(kind) if kind else None
    return source.no_gradients if source is not None else ""


def rebuild(run: Run, config: dict[str, Any] | None = None) -> Rebuilt:
    config = config or run.config()
    source = config["source"]
    try:
        return get_source(source["kind"]).rebuild(source["record"], run.path)
    except KeyError as e:
        raise ModelError(f"Run {run.id}: config.json lacks {e}; import the model again.") from None


def imported_tokenizer(run: Run) -> Any:
    """The tokenizer of an imported text model (None for images)."""
    config = run.config()
    return rebuild(run, config).tokenizer if modality_of(config["modality"]).tokenized else None


@torch.no_grad()
def _warm_up(model: nn.Module, probe: torch.Tensor) -> None:
    """transformers installs its output-capturing hooks the first time a model is asked for attention weights
    and keeps them: asking once here makes them part of the model from the start, as minilm does."""
    reader = getattr(model, "forward_with_attention", None)
    if callable(reader):
        reader(probe)


def load_imported(run: Run, device: str | None = "auto", epoch: int | None = None) -> ModelBundle:
    config = run.config()
    if epoch is not None:
        raise ModelError(f"Run {run.id} is an imported model: it has no per-epoch checkpoints.")
    rebuilt = rebuild(run, config)
    model = rebuilt.model
    load_weights(model, run.file(WEIGHTS))
    info = run.info_in(config)
    grid = config["source"]["record"].get("grid")
    if grid and getattr(model, "grid", None) is None:
        plain: Any = model  # a plain attribute, as vit_tiny has one: the Attention page lays patches out on it
        plain.grid = (int(grid[0]), int(grid[1]))
    dev = pick_device(device)
    model.to(dev).eval()
    adapter = modality_of(config["modality"])
    _warm_up(model, adapter.prepare(adapter.example(info, rebuilt.tokenizer), info, rebuilt.tokenizer, dev))
    return ModelBundle(
        model=model,
        spec=imported_spec(config),
        info=info,
        device=dev,
        tokenizer=rebuilt.tokenizer,
        run_dir=run.path,
        has_dataset=config.get("dataset") is not None,
    )


register_loader("imported", RunLoader(load=load_imported, tokenizer=imported_tokenizer))
