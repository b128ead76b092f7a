"""Tokenizers turn text into the id tensors text models read.

`Tokenizer` is the interface shared by the word vocabulary built here (for models trained
from scratch) and the pretrained Hugging Face tokenizer (models/minilm.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import torch

from xaidash.data.errors import DatasetError

PAD, UNK = "<pad>", "<unk>"
# Words (any script, with an optional apostrophe suffix: "isn't") and single punctuation marks.
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?|[^\w\s]|_")


def split_words(text: str) -> list[str]:
    """Lower-cased words and punctuation marks: the unit of rationales and of WordVocab."""
    return [w.lower() for w in _WORD.findall(text)]


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character (start, end) of each word of `split_words(text)`, to align subword tokens with words."""
    return [m.span() for m in _WORD.finditer(text)]


class Tokenizer(Protocol):
    pad_id: int
    max_length: int

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """Ids (N, L), padded with pad_id to the longest text (at most max_length)."""

    def tokens(self, text: str) -> list[str]:
        """The display token for each id position `encode([text])[0]` produces (no padding)."""

    def word_ids(self, text: str) -> list[int | None]:
        """For each token position, the index of its word in `split_words(text)` (None for specials)."""


class WordVocab:
    """Word-level vocabulary built from a training split; id 0 is padding, 1 unknown."""

    pad_id = 0
    unk_id = 1

    def __init__(self, words: Sequence[str], max_length: int = 64):
        self.itos = [PAD, UNK, *[w for w in words if w not in (PAD, UNK)]]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.max_length = max_length

    @classmethod
    def build(cls, texts: Iterable[str], max_size: int = 20000, min_freq: int = 1, max_length: int = 64) -> WordVocab:
        counts = Counter(w for t in texts for w in split_words(t))
        words = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_freq]
        return cls(words[: max_size - 2], max_length=max_length)

    def __len__(self) -> int:
        return len(self.itos)

    def ids(self, text: str) -> list[int]:
        return [self.stoi.get(w, self.unk_id) for w in split_words(text)][: self.max_length]

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        rows = [self.ids(t) or [self.unk_id] for t in texts]  # never an empty row: models need one token
        width = max((len(r) for r in rows), default=1)
        out = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        return out

    def tokens(self, text: str) -> list[str]:
        return split_words(text)[: self.max_length] or [UNK]

    def word_ids(self, text: str) -> list[int | None]:
        return list(range(len(self.tokens(text))))

    def to_json(self) -> dict:
        return {"kind": "word", "itos": self.itos, "max_length": self.max_length}

    @classmethod
    def from_json(cls, obj: dict) -> WordVocab:
        """The vocabulary `to_json` wrote; DatasetError saying which field is wrong (a file is user-editable)."""
        itos = obj.get("itos") if isinstance(obj, dict) else None
        if not isinstance(itos, list) or not all(isinstance(w, str) for w in itos):
            raise DatasetError(f"itos must be a list of words, not {_short(itos)}")
        max_length = obj.get("max_length", 64)
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise DatasetError(f"max_length must be a whole number of at least 1, not {_short(max_length)}")
        return cls(itos, max_length=max_length)

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_json()))

    @classmethod
    def load(cls, path: Path) -> WordVocab:
        """A vocabulary file; DatasetError naming the file and what is wrong with it."""
        try:
            obj = json.loads(Path(path).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise DatasetError(f"{path} is damaged: not a JSON vocabulary ({str(e)[:80]}).") from None
        try:
            return cls.from_json(obj)
        except DatasetError as e:
            raise DatasetError(f"{path} is damaged: {e}.") from None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
