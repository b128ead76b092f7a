"""Turning what a user gives (`dataset:INDEX`, `test:N`, a file, typed text) into a model input: a data set's
sample with its label and ground truth, or a file or text read by the model's modality adapter
(`explainers/modalities`: image files through `image_files`, text files and typed text by the text adapter)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.modalities.text import read_extent
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle


@dataclass
class ResolvedInput:
    """A CLI/page input: the raw model input, its true label if known, and where it came from.

    `mask` ((H, W) bool) and `rationale` (word indices) are the ground truth when the input is a
    data set sample whose data set has them.
    """

    raw: torch.Tensor | str
    label: int | float | None  # the true class, or the true value of a number to predict
    description: str
    mask: np.ndarray | None = None
    rationale: list[int] | None = None
    coverage: TextCoverage | None = None  # texts: how many of its words the model reads


@dataclass(frozen=True)
class TextCoverage:
    """How much of a text the model reads, and so how much of it an explanation covers: its first `read` of
    `total` words (words and punctuation marks, `split_words`, the unit the maps show). `read_chars` is where the
    last word read ends, so `text[:read_chars]` is the part explained. A text longer than the tokenizer's
    `max_length` is cut there by the model itself, without a word: this says so."""

    read: int
    total: int
    read_chars: int

    @property
    def truncated(self) -> bool:
        return self.read < self.total

    def read_text(self, text: str) -> str:
        """The part of `text` the model reads (all of it when nothing is cut)."""
        return text[: self.read_chars] if self.truncated else text

    def sentence(self) -> str:
        """'The model reads the first 64 of 3,412 words; the maps explain those 64 only.' ('' when it reads all)."""
        if not self.truncated:
            return ""
        return (
            f"The model reads only the first {self.read:,} of {self.total:,} words (its tokenizer's limit); "
            f"the maps explain those {self.read:,}, and the last {self.total - self.read:,} play no part."
        )


def text_coverage(bundle: ModelBundle, text: str) -> TextCoverage:
    """How many words of `text` the model reads (`TextCoverage`), from its tokenizer's word of each position (on the
    part it reads: `read_extent`), of how many words in all."""
    from xaidash.data.tokenizer import word_spans

    total = len(word_spans(text))
    extent = read_extent(bundle, text)
    if extent is None:
        return TextCoverage(total, total, len(text))
    return TextCoverage(extent[0], total, extent[1])


# dataset:N, dataset:test:N, dataset:train:N, the short test:N / train:N (what the pages' links say), and row:N /
# row:train:N (a table's word for a sample, accepted for every kind of input: row N of the test split by default)
_DATASET = re.compile(r"^(?:(?:dataset|row):(?:(train|test):)?|(train|test):)(\d+)$")


def _dataset_sample(bundle: ModelBundle, split_name: str, index: int, spec: str) -> ResolvedInput:
    from xaidash.data.errors import DatasetError
    from xaidash.data.registry import load_split

    info = bundle.info
    reason = bundle.no_dataset_reason(spec)
    if reason:
        raise ExplainError(reason)
    try:
        split = load_split(info.name, split_name)  # type: ignore[arg-type]
    except DatasetError as e:
        raise ExplainError(f"Cannot load the {split_name} split of {info.name}: {e}") from None
    if not 0 <= index < len(split):
        raise ExplainError(f"{spec} is out of range: the {split_name} split of {info.name} has {len(split)} samples.")
    name = f"{info.name} {split_name} #{index}"
    truth_values = split.labels[index].reshape(-1)
    given = int(truth_values[0])
    label: int | float | None = given if 0 <= given < info.num_classes else None
    if len(truth_values) > 1 and info.regression is not None:  # a forecast: the true values of every step ahead
        label = None
        head = ", ".join(info.regression.value_text(float(v)) for v in truth_values[:3])
        name += f" (true {head}{', …' if len(truth_values) > 3 else ''})"
    elif info.regression is not None:  # a number to predict: the row's true value, in the target's units
        label = float(split.labels[index])
        name += f" (true {info.regression.value_text(label)})"
    elif label is not None:
        name += f" (label {info.classes[int(label)]})"
    adapter = adapter_of(bundle.modality)
    raw = adapter.item(split, index)
    problem = adapter.sample_problem(raw, bundle, name)
    if problem:
        raise ExplainError(problem)
    truth = adapter.ground_truth(split, [index])
    return ResolvedInput(
        raw,
        label,
        name,
        mask=None if truth.masks is None else truth.masks[0],
        rationale=None if not truth.rationales else truth.rationales[0],
        coverage=_coverage(bundle, raw),
    )


def _coverage(bundle: ModelBundle, raw: Any) -> TextCoverage | None:
    return text_coverage(bundle, raw) if isinstance(raw, str) else None


def resolve_sample(spec: str, bundle: ModelBundle, fit: str = "crop") -> ResolvedInput:
    """What `--input` means for this model: `dataset:INDEX` / `dataset:train:INDEX` / `test:INDEX` /
    `train:INDEX` / `row:INDEX` / `row:train:INDEX` (a sample of the model's data set; the test split by default),
    else what the model's modality adapter reads from it (an image file; a text file or the text itself; a CSV row
    or typed values)."""
    spec = str(spec)
    m = _DATASET.match(spec.strip())
    if m:
        return _dataset_sample(bundle, m.group(1) or m.group(2) or "test", int(m.group(3)), spec.strip())
    prefix = spec.strip().partition(":")[0]
    if prefix in ("dataset", "row"):
        raise ExplainError(
            f"{spec!r}: write {prefix}:INDEX or {prefix}:train:INDEX (INDEX a non-negative integer; the test split "
            "unless train: is given)."
        )
    raw, description = adapter_of(bundle.modality).read_input(spec, bundle, fit)
    return ResolvedInput(raw, None, description, coverage=_coverage(bundle, raw))


def resolve_input(spec: str, bundle: ModelBundle, fit: str = "crop") -> tuple[Any, int | float | None, str]:
    """(raw input, true label or None, description) for a CLI `--input` value; see `resolve_sample`."""
    r = resolve_sample(spec, bundle, fit)
    return r.raw, r.label, r.description
