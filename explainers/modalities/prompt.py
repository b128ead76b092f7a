"""A language model's prompts, explained: maps over the prompt's tokens or words (the unit the user picks), drawn as
the features highlighted, as text maps are; what a map explains is a generated token, not a class."""

from __future__ import annotations

from dataclasses import dataclass

from xaidash.data.modalities import PROMPT, PromptModality
from xaidash.explainers.modalities.base import ADAPTERS, extend
from xaidash.explainers.modalities.text import SequenceAdapter


@dataclass(frozen=True)
class PromptAdapter(SequenceAdapter, PromptModality):
    pass


PROMPT_ADAPTER = ADAPTERS.register(
    extend(
        PROMPT,
        PromptAdapter,
        displays=("tokens",),
        gradient_unit="embedding",
        target="token",
        map_files="html",
        stores_values=False,
    )
)
