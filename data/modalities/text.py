"""Texts: strings, read through the model's tokenizer as padded ids; a map scores words (word pieces merged)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.base import MODALITIES, GroundTruth, Modality
from xaidash.data.registry import DatasetInfo, Split, TextSplit

EXAMPLE_TEXT = "the film was not bad at all"


@dataclass(frozen=True)
class TextModality(Modality):
    def batch(self, raws: Sequence[Any]) -> list[str]:
        if not raws:
            raise ExplainError("No inputs to explain: pick or upload at least one.")
        return [str(r) for r in raws]

    def as_batch(self, inputs: Any) -> list[str]:
        return [inputs] if isinstance(inputs, str) else [str(t) for t in inputs]

    def prepare(self, inputs: Any, info: DatasetInfo, tokenizer: Any, device: torch.device) -> torch.Tensor:
        return tokenizer.encode(self.as_batch(inputs)).to(device)

    def padding_mask(self, x: torch.Tensor, tokenizer: Any) -> torch.Tensor | None:
        return x != tokenizer.pad_id

    def example(self, info: DatasetInfo, tokenizer: Any, n: int = 1) -> list[str]:
        return [EXAMPLE_TEXT] * n

    def item(self, split: Split, index: int) -> str:
        assert isinstance(split, TextSplit)
        return split.texts[index]

    def ground_truth(self, split: Split, indices: Sequence[int]) -> GroundTruth:
        if not isinstance(split, TextSplit) or not split.rationales:
            return GroundTruth()
        given = [split.rationales[int(i)] for i in indices]
        return GroundTruth(rationales=[None if r is None else list(r) for r in given])

    def check_split(self, split: Split, dataset: str) -> None:
        if not isinstance(split, TextSplit):
            raise self.wrong_split(dataset)


TEXT = MODALITIES.register(
    TextModality(
        id="text",
        label="texts",
        unit="word",
        units="words",
        sample="text",
        generic_training=(("epochs", 5), ("batch_size", 64), ("lr", 2e-3), ("weight_decay", 0.01)),
        tokenized=True,
        sources=("type", "upload"),
        upload_types=("txt", "csv"),
    )
)
