"""Where a concept's examples come from: the concept source registry.

A concept is written `KIND:ARGUMENT` (`dataset:shapes_colour:circle`, `folder:/data/red`, `text:cues.txt`,
`gallery:3,17,42`). Each kind is one `ConceptSource` registration declaring what it reads, the modalities it
serves, and how its argument is written; the CLI's help and the Concepts page list the kinds from here. A new
source is one `register(...)` call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.specs import Registry, Spec
from xaidash.data.text_files import decode_text
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

MIN_EXAMPLES = 5  # below this a linear CAV over thousands of activations is noise, and its held-out check is empty
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".gif", ".tif", ".tiff")


@dataclass(frozen=True)
class ConceptOrigin:
    """What a source knows about where its examples come from: the data set and each example's class there (the
    facts flags.circular_flag decides from). Sources of files (folders, text files) know neither: no origin."""

    dataset: str
    classes: tuple[str, ...]  # one per example, in the examples' order

    def subset(self, indices: Sequence[int]) -> ConceptOrigin:
        return ConceptOrigin(self.dataset, tuple(self.classes[i] for i in indices))


@dataclass
class ConceptExamples:
    """A concept's examples as the model reads them raw: images (N, C, H, W) in [0, 1], or texts."""

    name: str
    spec: str  # the KIND:ARGUMENT it was read from
    inputs: torch.Tensor | list[str]
    notes: list[str] = field(default_factory=list)
    origin: ConceptOrigin | None = None

    def __len__(self) -> int:
        return len(self.inputs)

    def subset(self, indices: Sequence[int], name: str | None = None) -> ConceptExamples:
        picked = (
            [self.inputs[i] for i in indices]
            if isinstance(self.inputs, list)
            else self.inputs[torch.as_tensor(list(indices), dtype=torch.long)]
        )
        origin = self.origin.subset(indices) if self.origin is not None else None
        return ConceptExamples(name or self.name, self.spec, picked, list(self.notes), origin)

    def content_hash(self) -> str:
        """A hash of the examples themselves (not of where they came from): the CAV cache's key."""
        h = hashlib.sha256()
        if isinstance(self.inputs, list):
            for text in self.inputs:
                h.update(text.encode("utf-8") + b"\0")
        else:
            x = self.inputs.detach().to("cpu", torch.float32).contiguous()
            h.update(str(tuple(x.shape)).encode())
            h.update(x.numpy().tobytes())
        return h.hexdigest()


Load = Callable[[str, ModelBundle, int, int], ConceptExamples]


@dataclass(frozen=True)
class ConceptSource(Spec):
    """kind: the prefix; argument: how the part after `KIND:` is written; modalities: the models it serves;
    upload: the page offers a file upload for it (the page writes the files to a folder and passes its path)."""

    kind: str
    label: str
    argument: str
    help: str
    modalities: tuple[str, ...]
    load: Load  # (argument, bundle, examples wanted, seed) -> ConceptExamples
    upload: bool = False


def _unknown(kind: Hashable, known: list[str]) -> str:
    return f"Unknown concept source {kind!r}; known: {', '.join(f'{s.kind}:' for s in SOURCES)}."


SOURCES: Registry[ConceptSource] = Registry(
    "concept source", keys=lambda s: (s.kind,), error=ExplainError, unknown=_unknown
)


def register(source: ConceptSource) -> ConceptSource:
    return SOURCES.register(source)


def list_sources(modality: str | None = None) -> list[ConceptSource]:
    return SOURCES.all(None if modality is None else lambda s: modality in s.modalities)


def get_source(kind: str) -> ConceptSource:
    return SOURCES.get(kind)


def sources_help() -> str:
    return "; ".join(f"{s.kind}:{s.argument} ({s.help})" for s in SOURCES)


def load_concept(spec: str, bundle: ModelBundle, examples: int, seed: int = 0) -> ConceptExamples:
    """The examples of concept `spec` (KIND:ARGUMENT) for this model, at most `examples` of them (seeded pick),
    refused with an ExplainError when there are fewer than MIN_EXAMPLES usable ones."""
    kind, sep, arg = spec.partition(":")
    if not sep or not arg.strip():
        raise ExplainError(f"Concept {spec!r}: write KIND:ARGUMENT, one of: {sources_help()}.")
    source = get_source(kind)
    if bundle.modality not in source.modalities:
        raise ExplainError(
            f"Concept {spec!r}: {kind}: concepts are for {' or '.join(source.modalities)} models; "
            f"this is a {bundle.modality} model."
        )
    found = source.load(arg.strip(), bundle, examples, seed)
    if len(found) < MIN_EXAMPLES:
        extra = f" ({'; '.join(found.notes)})" if found.notes else ""
        raise ExplainError(
            f"Concept {spec!r} has {len(found)} usable example{'s' if len(found) != 1 else ''}; TCAV needs at least "
            f"{MIN_EXAMPLES} (20 or more give steadier scores){extra}."
        )
    if len(found) > examples:
        found = found.subset(pick(len(found), examples, seed))
    return found


def pick(n: int, k: int, seed: int) -> list[int]:
    """k of range(n) without repetition, seeded, in ascending order."""
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(n, size=min(k, n), replace=False).tolist())


# --- the built-in sources -------------------------------------------------------------------------------------


def _model_split(bundle: ModelBundle, dataset: str, split: str) -> Any:
    """A split of `dataset`, refused when it does not hold the kind of input the model reads."""
    from xaidash.data.registry import get_source as get_dataset

    loaded = get_dataset(dataset).load(split)  # type: ignore[arg-type]
    try:
        bundle.adapter.check_split(loaded, dataset)
    except DatasetError as e:
        raise ExplainError(str(e)) from None
    return loaded


def _fit_images(images: torch.Tensor, bundle: ModelBundle, what: str) -> torch.Tensor:
    """Images of another data set resized to the model's input; a channel count that differs is refused."""
    c, h, w = bundle.info.input_shape
    if images.shape[1] != c:
        raise ExplainError(f"{what} has {images.shape[1]}-channel images; this model reads {c} channels.")
    if tuple(images.shape[2:]) != (h, w):
        images = torch.nn.functional.interpolate(images, size=(h, w), mode="bilinear", antialias=True)
    return images.clamp(0.0, 1.0)


def _load_dataset_class(arg: str, bundle: ModelBundle, examples: int, seed: int) -> ConceptExamples:
    from xaidash.data.registry import ImageSplit, TextSplit, get_info

    parts = arg.split(":")
    split = "train"
    if len(parts) >= 3 and parts[-1] in ("train", "test"):
        split = parts.pop()
    if len(parts) < 2:
        raise ExplainError(f"dataset:{arg}: write dataset:NAME:CLASS or dataset:NAME:CLASS:SPLIT.")
    name, cls = ":".join(parts[:-1]), parts[-1]
    info = get_info(name)
    if cls not in info.classes:
        if cls.isdigit() and int(cls) < info.num_classes:
            cls = info.classes[int(cls)]
        else:
            raise ExplainError(f"Data set {name} has no class {cls!r}; its classes: {', '.join(info.classes)}.")
    loaded = _model_split(bundle, name, split)
    index = torch.nonzero(loaded.labels == info.classes.index(cls)).flatten().tolist()
    chosen = [index[i] for i in pick(len(index), examples, seed)]
    label = f"{name}:{cls}"
    origin = ConceptOrigin(name, (cls,) * len(chosen))
    if isinstance(loaded, TextSplit):
        return ConceptExamples(label, f"dataset:{arg}", [loaded.texts[i] for i in chosen], origin=origin)
    if not isinstance(loaded, ImageSplit):  # series: the adapter's batch of raw inputs
        return ConceptExamples(label, f"dataset:{arg}", bundle.adapter.items(loaded, chosen), origin=origin)
    images = _fit_images(loaded.batch(chosen), bundle, f"Data set {name}") if chosen else loaded.batch([])
    return ConceptExamples(label, f"dataset:{arg}", images, origin=origin)


def read_image_folder(folder: Path, bundle: ModelBundle) -> tuple[torch.Tensor, list[str]]:
    """Every readable image directly in `folder` resized to the model's input, and notes on the files skipped."""
    from xaidash.explainers.modalities.image_files import load_image

    if not folder.is_dir():
        raise ExplainError(f"Concept folder {folder} does not exist or is not a folder.")
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    images, bad = [], []
    for path in files:
        try:
            images.append(load_image(path, bundle.info))
        except ExplainError:
            bad.append(path.name)
    notes = []
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        notes.append(f"skipped {len(bad)} file{'s' if len(bad) != 1 else ''} that are not readable images: {shown}")
    if not files:
        raise ExplainError(
            f"Concept folder {folder} is empty: put at least {MIN_EXAMPLES} images ({', '.join(IMAGE_SUFFIXES)}) in it."
        )
    c, h, w = bundle.info.input_shape
    stacked = torch.stack(images) if images else torch.empty(0, c, h, w)
    return stacked, notes


def _load_folder(arg: str, bundle: ModelBundle, examples: int, seed: int) -> ConceptExamples:
    folder = Path(arg).expanduser()
    images, notes = read_image_folder(folder, bundle)
    return ConceptExamples(folder.name or str(folder), f"folder:{arg}", images, notes)


def _load_text(arg: str, bundle: ModelBundle, examples: int, seed: int) -> ConceptExamples:
    path = Path(arg).expanduser()
    if not path.is_file():
        raise ExplainError(f"Concept text file {path} does not exist.")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ExplainError(f"Concept text file {path} cannot be read: {e.strerror or e}.") from None
    lines = decode_text(raw, f"Concept text file {path.name}", error=ExplainError).text.splitlines()
    texts = [line.strip() for line in lines if line.strip()]
    return ConceptExamples(path.stem, f"text:{arg}", texts)


def _load_gallery(arg: str, bundle: ModelBundle, examples: int, seed: int) -> ConceptExamples:
    from xaidash.data.registry import ImageSplit, TextSplit

    if reason := bundle.no_dataset_reason("a concept of gallery examples"):
        raise ExplainError(reason)
    try:
        indices = sorted({int(i) for i in arg.replace(" ", "").split(",") if i})
    except ValueError:
        raise ExplainError(
            f"gallery:{arg}: write the test-split indices separated by commas, e.g. gallery:3,17,42."
        ) from None
    split = _model_split(bundle, bundle.info.name, "test")
    outside = [i for i in indices if not 0 <= i < len(split)]
    if outside:
        raise ExplainError(
            f"gallery:{arg}: the test split has {len(split)} samples (0..{len(split) - 1}); {outside[:5]} are outside."
        )
    name = f"gallery ({len(indices)} picked)"
    classes = bundle.info.classes
    origin = ConceptOrigin(bundle.info.name, tuple(classes[int(split.labels[i])] for i in indices))
    if isinstance(split, TextSplit):
        return ConceptExamples(name, f"gallery:{arg}", [split.texts[i] for i in indices], origin=origin)
    if not isinstance(split, ImageSplit):  # series: the adapter's batch of raw inputs
        return ConceptExamples(name, f"gallery:{arg}", bundle.adapter.items(split, indices), origin=origin)
    return ConceptExamples(name, f"gallery:{arg}", split.batch(indices), origin=origin)


register(
    ConceptSource(
        "dataset",
        "A class of a data set",
        "NAME:CLASS[:SPLIT]",
        "the examples of one class of a registered data set (train split unless :test)",
        ("image", "text", "series"),
        _load_dataset_class,
    )
)
register(
    ConceptSource(
        "folder",
        "A folder of images",
        "PATH",
        "the images in a folder, resized to the model's input",
        ("image",),
        _load_folder,
        upload=True,
    )
)
register(
    ConceptSource(
        "text",
        "A text file of sentences",
        "PATH",
        "one example per line of a UTF-8 text file",
        ("text",),
        _load_text,
        upload=True,
    )
)
register(
    ConceptSource(
        "gallery",
        "Examples picked in the gallery",
        "I,J,K",
        "samples of the run's test split by index",
        ("image", "text", "series"),
        _load_gallery,
    )
)
