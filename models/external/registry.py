"""Import sources: one module per kind of model (`hf:`, `timm:`, `torchvision:`, `module:`, `zoo:`).

A source turns what the user gave (`hf:./my-vit`, `timm:resnet50 --weights w.safetensors`) into a
`Loaded` model, and later rebuilds the same architecture from the record it left in the run's
config.json (`rebuild`); the run's `model.safetensors` then fills in the weights. Everything else
(class names, data set link, layer detection, the run folder) is shared, in `models/external/runs.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from xaidash.data.specs import Registry, Spec
from xaidash.models.external.options import ImportOptions
from xaidash.models.registry import Modality, ModelError, ModelSpec


@dataclass
class Loaded:
    """An external model as one source read it, before class names and layers are settled.

    model: forward(x) -> logits (N, classes), x normalised images (N, C, H, W) or token ids (N, L);
      models with global attention also carry `forward_with_attention`.
    classes: class names where the source knows them, else None (then --classes, the data set, or 0..n-1).
    input_shape/mean/std: what the model reads ((C, H, W) and its normalisation; () for text or unknown).
    record: what `rebuild` needs, JSON-able. files: writes the run folder needs besides the weights
      (a processor or tokenizer saved into it), each a function of the run folder.
    spec: the zoo spec for zoo models (its layers are known); None: layers are detected.
    probe: see the field.
    """

    model: nn.Module
    modality: Modality
    name: str
    num_classes: int
    record: dict[str, Any]
    classes: tuple[str, ...] | None = None
    input_shape: tuple[int, ...] = ()
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    tokenizer: Any = None
    files: list[Callable[[Path], None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    spec: ModelSpec | None = None
    description: str = ""
    # Inputs as the model reads them, made by the source from the linked data set (a table's prepared rows, through
    # its adapter); None: the importer makes them (images of the settled shape, token ids from the tokenizer).
    probe: torch.Tensor | None = None


@dataclass(frozen=True)
class Rebuilt:
    """The architecture rebuilt from a run folder (weights not loaded yet) and its tokenizer (text)."""

    model: nn.Module
    tokenizer: Any = None
    spec: ModelSpec | None = None


@dataclass(frozen=True)
class ImportSource(Spec):
    """A kind of external model: `prefix:ARGUMENT` on the command line."""

    prefix: str
    label: str  # a few words for menus: "Hugging Face folder or id"
    argument: str  # what follows the prefix: "PATH_OR_ID"
    help: str  # one line for --help and the Import page
    load: Callable[[str, ImportOptions], Loaded]
    rebuild: Callable[[dict[str, Any], Path], Rebuilt]  # (source record, run folder) -> architecture
    needs_weights: bool = False  # --weights is required (no weights of its own)
    # (argument, options) -> None, or ModelError for options this source never takes (a zoo model's declared
    # option ranges); called by `import_model` before anything is loaded.
    check: Callable[[str, ImportOptions], None] = field(default=lambda argument, options: None)
    # Why its models give no gradients ("" when they do): the imported run's spec carries it, so gradient and CAM
    # methods are refused with this reason (a scikit-learn pipeline wrapped for side-by-side comparison).
    no_gradients: str = ""


def _unknown(key: object, known: list[str]) -> str:
    return f"Unknown import source {key!r}: use one of {', '.join(f'{p}:' for p in known)}."


SOURCES: Registry[ImportSource] = Registry(
    "import source", keys=lambda s: (s.prefix,), error=ModelError, unknown=_unknown
)


def register(source: ImportSource) -> ImportSource:
    return SOURCES.register(source)


def list_sources() -> list[ImportSource]:
    return SOURCES.all()


def get_source(prefix: str) -> ImportSource:
    return SOURCES.get(prefix)


def parse_source(text: str) -> tuple[ImportSource, str]:
    """'hf:./folder' -> (the hf source, './folder'); a message naming the known prefixes otherwise."""
    prefix, sep, argument = str(text).partition(":")
    source = SOURCES.find(prefix) if sep else None
    if source is None:
        usage = "; ".join(f"{s.prefix}:{s.argument}" for s in SOURCES)
        raise ModelError(f"{text!r} names no import source: write one of {usage}.")
    if not argument.strip():
        raise ModelError(f"{prefix}: needs {source.argument} after the colon ({source.help}).")
    return source, argument.strip()
