"""Declared method parameters: a schema the dashboard builds controls from and `explain` validates against."""

from __future__ import annotations

from xaidash.data.errors import ExplainError
from xaidash.data.specs import Param, ParamKind

__all__ = ["MAX_BATCH_SIZE", "MAX_TEXT_CHARS", "ExplainError", "Param", "ParamKind", "check_text_length"]

# The longest text explained: LIME and occlusion build one perturbed copy per sample and word, so a 5 MB text
# ran them out of memory; the text models read at most a few hundred tokens of it anyway.
MAX_TEXT_CHARS = 20_000
MAX_BATCH_SIZE = 65_536  # samples per forward pass (--batch-size)


def check_text_length(texts: list[str]) -> None:
    """ExplainError for a text longer than MAX_TEXT_CHARS, naming which one and the limit."""
    for i, text in enumerate(texts):
        if len(text) > MAX_TEXT_CHARS:
            which = f"Text {i + 1} of {len(texts)}" if len(texts) > 1 else "The text"
            raise ExplainError(
                f"{which} has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} can be explained "
                "(the model reads only its first few hundred words): shorten it or explain a part of it."
            )
