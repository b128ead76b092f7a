"""The data-level half of a modality adapter (see the package's docstring) and the registry of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from xaidash.data.errors import DatasetError
from xaidash.data.registry import DatasetInfo, Split
from xaidash.data.specs import Registry, Spec


@dataclass(frozen=True)
class GroundTruth:
    """What a data set says about where a sample's label comes from, for the localisation metrics: object masks
    ((N, H, W) bool) for images, the indices of the words that set the label for texts. None when not known."""

    masks: Any = None
    rationales: list[list[int] | None] | None = None

    @property
    def empty(self) -> bool:
        return self.masks is None and not (self.rationales and any(r for r in self.rationales))


@dataclass(frozen=True)
class Modality(Spec):
    """One kind of input. `id` is the name run folders and data sets record ("image", "text", "causal_lm");
    `label` the plural people read ("images"); `unit` / `units` what one value of a map scores ("pixel", "word").

    Facts (read instead of a modality's name): `augmentations` the training augmentations that apply to it;
    `generic_training` the training settings (name, value) of a model that declares no recipe for this kind of
    data, untested, moderate and stable (`models.training.recipes.generic_recipe`; empty where models of this kind
    are not trained here);
    `spatial` whether inputs lie on a 2-D grid (convolution feature maps, first-layer filters, receptive fields,
    NHWC layout, Grad-CAM layers); `local` whether a convolution reads neighbouring positions of an input (pixels
    of an image, steps of a series), so its layers have receptive fields counted in `units`; `tokenized` whether a tokenizer turns inputs into ids (and pads them);
    `gallery_open` whether a page opens its picture gallery of test samples by default; `sources` the ways a page
    offers to give inputs besides the test set ('upload' files of `upload_types`, 'type' text, 'values' typed
    as comma-separated values, 'rows file' a CSV file of rows); `pictured` whether an
    input is a picture a page can show as it is (a thumbnail in a gallery, the background of a map, decoded from an
    uploaded image file)."""

    id: str
    label: str
    unit: str
    units: str
    sample: str  # one input in words: "image", "text", "prompt"
    augmentations: tuple[str, ...] = ("none",)
    generic_training: tuple[tuple[str, Any], ...] = ()
    spatial: bool = False
    local: bool = False
    tokenized: bool = False
    gallery_open: bool = False
    sources: tuple[str, ...] = ()
    upload_types: tuple[str, ...] = ()
    pictured: bool = False

    # ---- inputs as a batch ------------------------------------------------------------------------------------
    def batch(self, raws: Sequence[Any]) -> Any:
        """Several raw inputs (each as a page or the CLI holds one) as the one batch `explain` takes."""
        raise NotImplementedError

    def as_batch(self, inputs: Any) -> Any:
        """One input or a batch of them, as a batch."""
        raise NotImplementedError

    def count(self, batch: Any) -> int:
        return len(batch)

    def prepare(self, inputs: Any, info: DatasetInfo, tokenizer: Any, device: torch.device) -> torch.Tensor:
        """Raw inputs (as given by a user or a data set) as the tensor the model reads, on `device`."""
        raise NotImplementedError

    def rows(self, x: Any) -> int:
        """How many inputs a prepared batch (what `prepare` returns) holds."""
        return len(x)

    def select(self, x: Any, index: torch.Tensor | slice) -> Any:
        """The inputs `index` of a prepared batch, as a prepared batch (a tensor's rows)."""
        return x[index]

    def padding_mask(self, x: torch.Tensor, tokenizer: Any) -> torch.Tensor | None:
        """Which positions of prepared inputs are real (not padding); None when every position is."""
        return None

    def example(self, info: DatasetInfo, tokenizer: Any, n: int = 1) -> Any:
        """`n` plain raw inputs of this kind, to trace a model with (mid-grey images, a short text)."""
        raise NotImplementedError

    # ---- describing inputs ------------------------------------------------------------------------------------
    def describe(self, input_shape: Sequence[int]) -> str:
        """What a model reads, in words: '3x32x32 images', 'texts'."""
        return self.label

    def one_line(self, raw: Any, info: DatasetInfo, chars: int = 200) -> str:
        """One raw input in a line of at most `chars` characters (a table's cell, a card): a text's start, a row's
        values; a picture by its size (pages show pictures themselves)."""
        return cut(str(raw), chars)

    def input_rows(self, x: Any, value: torch.Tensor) -> torch.Tensor:
        """A layer's output `value` for the prepared batch `x`, one row per input: as it is where a layer's first
        dimension is the batch's (images, texts, rows); a graph layer's rows are nodes or graphs, not inputs."""
        return value

    def short_name(self, raw: Any) -> str | None:
        """A few words that tell one input from the others of its split where its index does not (a graph's node:
        'node 412'), for a picker's options; None where the index is name enough."""
        return None

    def sparkline(self, raw: Any, points: int = 200) -> list[float] | None:
        """One raw input as at most `points` values a table can draw as a small line (a series); None where an input
        is not a line of values."""
        return None

    def same_inputs(self, a: Sequence[int], b: Sequence[int]) -> bool:
        """Whether two models of this modality read the same inputs (images: the same shape)."""
        return True

    # ---- a data set's samples ---------------------------------------------------------------------------------
    def item(self, split: Split, index: int) -> Any:
        """Sample `index` of a split, as a raw input."""
        raise NotImplementedError

    def items(self, split: Split, indices: Sequence[int]) -> Any:
        """Samples of a split, as one batch."""
        return self.batch([self.item(split, int(i)) for i in indices])

    def ground_truth(self, split: Split, indices: Sequence[int]) -> GroundTruth:
        """The ground truth of those samples, where the data set has it."""
        return GroundTruth()

    def check_split(self, split: Split, dataset: str) -> None:
        """DatasetError when a loaded split does not hold this kind of input."""
        raise NotImplementedError

    def wrong_split(self, dataset: str, reader: str = "this model", reads: str | None = None) -> DatasetError:
        """The refusal of a data set of another kind: 'Data set cues holds texts; this model reads images.'"""
        return DatasetError(f"Data set {dataset} holds {held_inputs(dataset)}; {reader} reads {reads or self.label}.")


def held_inputs(dataset: str) -> str:
    """What a data set holds, in its adapter's words ('images', 'texts', 'rows'); 'other inputs' when unknown."""
    from xaidash.data.registry import get_info

    try:
        return modality_of(get_info(dataset).modality).label
    except Exception:  # noqa: BLE001 - only words for a refusal: a data set that cannot say stays unnamed
        return "other inputs"


def cut(text: str, chars: int) -> str:
    """`text` cut to its first `chars` characters, an ellipsis marking the cut."""
    return text if len(text) <= chars else text[: max(0, chars - 1)] + "…"


def _unknown(key: object, known: list[str]) -> str:
    return f"Unknown modality {key!r}. Known: {', '.join(known)}."


MODALITIES: Registry[Modality] = Registry("modality", error=DatasetError, unknown=_unknown)


def modality_of(name: str) -> Modality:
    """The adapter of the modality a data set, model or run records (`info.modality`, `bundle.modality`)."""
    return MODALITIES.get(name)
