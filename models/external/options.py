"""What a user may say about an external model besides its source, and the parsing of those texts.

The command line and the Import page both build an `ImportOptions`; every check of a value a user
typed lives here, so both refuse the same things with the same message.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xaidash.data.registry import DatasetInfo
from xaidash.data.text_files import decode_text
from xaidash.models.registry import ModelError

# --layer KIND=PATH: which detected layer each kind overrides.
LAYER_KINDS = ("gradcam", "embedding", "attention")


@dataclass
class ImportOptions:
    weights: Path | None = None  # .safetensors or a torch.save state dict
    input_shape: tuple[int, ...] = ()  # (C, H, W); () = the model's own
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    classes: tuple[str, ...] = ()  # names given with --classes or --classes-file
    dataset: str | None = None  # a registered data set to link
    layers: dict[str, str] = field(default_factory=dict)  # --layer gradcam=blocks.10
    model_options: dict[str, Any] = field(default_factory=dict)  # keyword arguments of the builder
    vocab: Path | None = None  # zoo text models trained elsewhere: their vocab.json
    name: str = ""  # display name (default: from the source)
    linked: DatasetInfo | None = None  # set by the importer from `dataset`: sources may read its shape and classes

    def shape_or_linked(self) -> tuple[int, ...]:
        """The input shape given, else the linked data set's, else ()."""
        return self.input_shape or (tuple(self.linked.input_shape) if self.linked is not None else ())

    def classes_or_linked(self) -> tuple[str, ...]:
        """The class names given, else the linked data set's, else ()."""
        return self.classes or (tuple(self.linked.classes) if self.linked is not None else ())

    def check(self) -> None:
        """ModelError for values no model takes, before anything is loaded or written (`import_model` calls it, so
        the command line and the Import page refuse the same things with the same message): the mean and std,
        finite, one value per channel (1 or 3), a positive std (inputs are divided by it)."""
        for what, values in (("--mean", self.mean), ("--std", self.std)):
            if values and (len(values) not in (1, 3) or not all(math.isfinite(v) for v in values)):
                raise ModelError(f"{what} {_numbers(values)}: give 1 or 3 finite numbers, one per channel.")
        if any(v <= 0 for v in self.std):
            raise ModelError(f"--std {_numbers(self.std)}: every value must be above 0 (inputs are divided by it).")
        if self.mean and self.std and len(self.mean) != len(self.std):
            raise ModelError(
                f"--mean has {len(self.mean)} values and --std {len(self.std)}: give one of each per channel."
            )


def _numbers(values: tuple[float, ...]) -> str:
    return ",".join(map(str, values))


def parse_shape(text: str) -> tuple[int, ...]:
    """'3x224x224' (or '3,224,224') -> (3, 224, 224)."""
    parts = [p for p in str(text).lower().replace(",", "x").replace(" ", "").split("x") if p]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise ModelError(f"--input-shape {text!r}: write channels x height x width, e.g. 3x224x224.") from None
    if len(shape) != 3 or min(shape) < 1:
        raise ModelError(f"--input-shape {text!r}: write channels x height x width, e.g. 3x224x224.")
    if shape[0] not in (1, 3):
        raise ModelError(f"--input-shape {text!r}: images have 1 (grey) or 3 (RGB) channels, not {shape[0]}.")
    return shape


def parse_floats(text: str, what: str) -> tuple[float, ...]:
    """'0.485,0.456,0.406' -> a tuple of floats (one per channel)."""
    try:
        values = tuple(float(p) for p in str(text).replace(" ", "").split(",") if p)
    except ValueError:
        raise ModelError(f"{what} {text!r}: write one number per channel, comma separated, e.g. 0.5,0.5,0.5.") from None
    if not values:
        raise ModelError(f"{what} is empty: write one number per channel, e.g. 0.5,0.5,0.5.")
    return values


def parse_classes(text: str) -> tuple[str, ...]:
    """'cat, dog,bird' -> ('cat', 'dog', 'bird'); duplicates and empty names are refused."""
    names = tuple(n.strip() for n in str(text).split(","))
    return _checked_names(names, "--classes")


def read_classes_file(path: Path | str) -> tuple[str, ...]:
    """Class names from a file: one per line, a JSON list, or a JSON {index: name} map (HF's id2label)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelError(f"Classes file {str(path)!r} does not exist.")
    text = decode_text(path.read_bytes(), f"Classes file {path.name}", error=ModelError).text
    return classes_from_text(text, path.name)


def classes_from_text(text: str, name: str) -> tuple[str, ...]:
    """The names in a labels file's text (see `read_classes_file`)."""
    stripped = text.strip()
    if stripped[:1] in ("[", "{"):
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as e:
            raise ModelError(f"{name} looks like JSON but is not valid JSON ({e}).") from None
        if isinstance(obj, dict):
            try:
                pairs = sorted((int(k), str(v)) for k, v in obj.items())
            except ValueError:
                raise ModelError(f"{name}: a JSON map of class names needs integer keys (0, 1, ...).") from None
            if [k for k, _ in pairs] != list(range(len(pairs))):
                raise ModelError(f"{name}: the class indices must be 0..{len(pairs) - 1} without gaps.")
            return _checked_names(tuple(v for _, v in pairs), name)
        if isinstance(obj, list):
            return _checked_names(tuple(str(v) for v in obj), name)
        raise ModelError(f"{name}: expected a JSON list of class names or an index -> name map.")
    return _checked_names(tuple(line.strip() for line in stripped.splitlines() if line.strip()), name)


def _checked_names(names: tuple[str, ...], what: str) -> tuple[str, ...]:
    if not names or any(not n for n in names):
        raise ModelError(f"{what}: class names must not be empty (got {list(names)}).")
    if len(names) < 2:
        raise ModelError(f"{what}: a classifier has at least two classes (got {list(names)}).")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ModelError(f"{what}: class names must be unique; repeated: {', '.join(dupes)}.")
    return names


def parse_key_values(items: list[str] | None, what: str) -> dict[str, Any]:
    """['img_size=32', 'drop_rate=0.1', 'name=x'] -> {'img_size': 32, 'drop_rate': 0.1, 'name': 'x'} (JSON values,
    true/false in any case; anything else stays a string)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ModelError(f"{what} {item!r}: write KEY=VALUE.")
        v = value.strip()
        try:
            out[key.strip()] = json.loads(v.lower() if v.lower() in ("true", "false", "null") else v)
        except json.JSONDecodeError:
            out[key.strip()] = v
    return out


def parse_layers(items: list[str] | None) -> dict[str, str]:
    """['gradcam=blocks.10'] -> {'gradcam': 'blocks.10'}; kinds other than LAYER_KINDS are refused."""
    layers: dict[str, str] = {}
    for item in items or []:
        kind, sep, path = str(item).partition("=")
        kind = "gradcam" if kind.strip() == "cam" else kind.strip()
        if not sep or kind not in LAYER_KINDS or not path.strip():
            raise ModelError(
                f"--layer {item!r}: write KIND=MODULE_PATH with KIND one of {', '.join(LAYER_KINDS)} "
                "(e.g. gradcam=layer4, attention=blocks.0.attn,blocks.1.attn)."
            )
        layers[kind] = path.strip()
    return layers
