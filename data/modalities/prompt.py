"""A generative language model's prompts: text read through the model's own tokenizer (and chat template); a map
scores the prompt's tokens, or its words when the user groups them so. The model's own prompt builder
(`models/language/prompt.py`: chat template, the user's tokens told apart) turns a prompt into ids, so this adapter
has no `prepare` of its own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.base import MODALITIES, Modality
from xaidash.data.registry import Split, TextSplit


@dataclass(frozen=True)
class PromptModality(Modality):
    def batch(self, raws: Sequence[Any]) -> list[str]:
        if not raws:
            raise ExplainError("There is no prompt: type one.")
        return [str(r) for r in raws]

    def as_batch(self, inputs: Any) -> list[str]:
        return [inputs] if isinstance(inputs, str) else [str(t) for t in inputs]

    def item(self, split: Split, index: int) -> str:
        assert isinstance(split, TextSplit)
        return split.texts[index]

    def check_split(self, split: Split, dataset: str) -> None:
        if not isinstance(split, TextSplit):
            raise self.wrong_split(dataset, "a language model", "texts")


PROMPT = MODALITIES.register(
    PromptModality(
        id="causal_lm",
        label="prompts",
        unit="token",
        units="tokens",
        sample="prompt",
        tokenized=True,
        sources=("type", "upload"),
        upload_types=("txt",),
    )
)
