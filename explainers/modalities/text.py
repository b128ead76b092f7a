"""Texts, explained: typed or read from a .txt file, maps over words (a method's per-token scores summed over each
word's pieces), drawn as the words highlighted on the colour scale, their scores kept in the figure's JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import ExplainError
from xaidash.data.modalities import TEXT, TextModality
from xaidash.data.paths import is_file
from xaidash.data.text_files import decode_text
from xaidash.data.tokenizer import split_words, word_spans
from xaidash.explainers.figures.html_parts import highlight_tokens
from xaidash.explainers.inspection.attention import TokenLayout, query_row
from xaidash.explainers.map_arrays import row_magnitudes, spearman, word_maps
from xaidash.explainers.modalities.base import ADAPTERS, Drawing, ExplainingModality, Maps, extend
from xaidash.explainers.params import check_text_length
from xaidash.explainers.perturbation_curves import CurveResult, Mode, text_perturbation_curve
from xaidash.explainers.registry import MethodOutput
from xaidash.models.bundle import ModelBundle

LONGEST_PATH = 4096  # a --input longer than this (or with a line break) is the text itself, never a file name
# Where the model stops reading is looked for in prefixes of a text, this long at first (at least 16 characters per
# token the model reads), four times longer each time the model reads all of one: a 5 MB text costs what is read.
FIRST_PREFIX_CHARS = 4096


def read_text_file(path: Path) -> str:
    """A text file's contents (UTF-8, or the encoding its byte-order mark names); ExplainError when it is missing or
    not text."""
    if not is_file(path):
        raise ExplainError(f"Text file {str(path)!r} does not exist.")
    return decode_text(path.read_bytes(), path.name, error=ExplainError).text


def read_extent(bundle: ModelBundle, text: str) -> tuple[int, int] | None:
    """(how many words of `text` the model reads, where the last of them ends) when its tokenizer's limit cuts the
    text; None when the model reads all of it. Found on growing prefixes of the text: a prefix settles it once the
    tokenizer fills its `max_length` there and stops before the prefix's last word (which may be cut mid-word)."""
    tokenizer = bundle.tokenizer
    if tokenizer is None:  # not a text model: nothing is cut
        return None
    size = max(FIRST_PREFIX_CHARS, 16 * tokenizer.max_length)
    while True:
        part = text[:size]
        spans, ids = word_spans(part), tokenizer.word_ids(part)
        seen = [w for w in ids if w is not None]
        read = min(len(spans), max(seen) + 1) if seen else 0
        if len(ids) >= tokenizer.max_length and read < len(spans):
            return read, spans[read - 1][1] if read else 0
        if size >= len(text):
            return None
        size *= 4


def read_part(bundle: ModelBundle, text: str) -> str:
    """The part of `text` the model reads: its words up to the last one within the tokenizer's limit (the text
    itself when the model reads all of it). The model's ids, and so every map, are the same for both."""
    extent = read_extent(bundle, text)
    return text if extent is None else text[: extent[1]]


def word_labels(labels: Sequence[str] | None, n: int) -> list[str]:
    """The labels a map of `n` scores is drawn with: its words, or the positions when stored words do not match."""
    words = list(labels or ())
    return words if len(words) == n else [str(j) for j in range(n)]


@dataclass(frozen=True)
class SequenceAdapter(ExplainingModality):
    """What texts and prompts share: maps are one score per named feature (a word or a token), drawn as a strip of
    highlighted features whose scores the figure's JSON carries."""

    def map_labels(self, labels: list[list[str]] | None, index: int) -> list[str] | None:
        return (labels or [[]])[index]

    def stored(self, maps: Any, labels: list[str] | None) -> tuple[Any, list[list[str]] | None]:
        return [np.asarray(maps, dtype=np.float32)], None if labels is None else [list(labels)]

    def draw(
        self,
        values: np.ndarray,
        *,
        signed: bool,
        scale: float,
        clipped: bool,
        units: str,
        display: str,
        background: np.ndarray | None,
        labels: Sequence[str] | None,
        upscale: int,
    ) -> Drawing:
        words = word_labels(labels, int(values.size))
        html = highlight_tokens(words, values, scale=scale, signed=signed)
        return Drawing(tokens_html=html, labels=tuple(words))

    def figure_json(self, values: np.ndarray, labels: Sequence[str] | None) -> dict[str, Any]:
        return {
            "words": list(labels or ()),
            "scores": [float(v) if np.isfinite(v) else None for v in np.asarray(values, np.float64)],
        }

    def values_from_json(self, d: dict[str, Any]) -> np.ndarray | None:
        return np.asarray([np.nan if v is None else v for v in d.get("scores", [])], np.float32)


@dataclass(frozen=True)
class TextAdapter(SequenceAdapter, TextModality):
    def read_input(self, spec: str, bundle: ModelBundle, fit: str = "crop") -> tuple[Any, str]:
        """A path to a text file (.txt, or any file that exists), else the text itself."""
        path = Path(spec).expanduser()
        looks_like_path = "\n" not in spec and len(spec) < LONGEST_PATH
        if looks_like_path and (path.suffix.lower() == ".txt" or is_file(path)):
            text, description = read_text_file(path), f"text file {path.name}"
        else:
            text, description = spec, "text"
        if not text.strip():
            raise ExplainError(f"The {description} is empty: give some words to explain.")
        preview = " ".join(text.split())
        return text, f"{description}: {preview[:60]}{'…' if len(preview) > 60 else ''}"

    def checked(self, bundle: ModelBundle, inputs: Any) -> list[str]:
        texts = self.as_batch(inputs)
        if not texts or any(not t.strip() for t in texts):
            raise ExplainError("Text input is empty: type or upload some text.")
        # Every method explains the words the model reads (the note `TextCoverage.sentence` says how many): a 5 MB
        # text is cut to them here, so LIME's and occlusion's perturbed copies are copies of those words only.
        texts = [read_part(bundle, t) for t in texts]
        check_text_length(texts)  # a model that reads more than this: before any method builds perturbed copies
        return texts

    def attention_map(self, bundle: ModelBundle, raw: Any, x: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
        """(N, T, T) -> (N, L): per input token, the [CLS] row where the model has one, else the mean over the real
        (not padding) tokens' rows."""
        n, length = x.shape
        t = matrix.shape[-1]
        if t == length + 1:  # the model prepends a class token of its own: its row, without itself
            return query_row(matrix, "first")[:, 1:]
        if t != length:
            raise ExplainError(
                f"Attention covers {t} tokens but the input has {length}; the model's attention does not match its input."
            )
        tokenizer = bundle.tokenizer
        rows = []
        for i in range(n):
            word_ids = tokenizer.word_ids(raw[i])
            if word_ids and word_ids[0] is None:  # a leading special token: [CLS]
                rows.append(query_row(matrix[i : i + 1], "first"))
            else:
                rows.append(query_row(matrix[i : i + 1], "mean", x[i : i + 1] != tokenizer.pad_id))
        return torch.cat(rows)

    def token_layout(self, bundle: ModelBundle, raw: Any, tokens: int) -> TokenLayout:
        labels = list(bundle.tokenizer.tokens(raw))
        if len(labels) != tokens:
            raise ExplainError(f"The attention covers {tokens} tokens but the tokenizer shows {len(labels)}.")
        word_ids = bundle.tokenizer.word_ids(raw)
        query = 0 if word_ids and word_ids[0] is None else None  # a leading [CLS] is what the head reads
        return TokenLayout(labels, None, query)

    def to_maps(self, bundle: ModelBundle, raw: Any, out: MethodOutput) -> Maps:
        """Per-token scores -> per-word scores (word pieces summed), with the words they belong to."""
        if out.words is not None:
            return Maps([np.asarray(a, dtype=np.float32) for a in out.attributions], out.words)
        per_token = torch.as_tensor(out.attributions).detach().float()
        if per_token.dim() == 3:
            per_token = per_token.sum(-1)
        attr = per_token.cpu().numpy()
        maps: list[np.ndarray] = []
        words: list[list[str]] = []
        for i, text in enumerate(raw):
            word_ids = bundle.tokenizer.word_ids(text)
            tokens = bundle.tokenizer.tokens(text)
            ws = split_words(text)
            if all(w is None for w in word_ids) or not ws:
                maps.append(attr[i, : len(tokens)])
                words.append(tokens)
                continue
            scores = np.zeros(max(w for w in word_ids if w is not None) + 1, dtype=np.float32)
            for pos, w in enumerate(word_ids):
                if w is not None and pos < attr.shape[1]:
                    scores[w] += attr[i, pos]
            maps.append(scores)
            words.append(ws[: len(scores)])
        return Maps(maps, words)

    # ---- metrics -----------------------------------------------------------------------------------------------
    def metric_inputs(self, bundle: ModelBundle, inputs: Any) -> list[str]:
        return self.checked(bundle, inputs)

    def metric_maps(self, attributions: Any) -> list[np.ndarray]:
        """One 1-D array of word scores per text."""
        return word_maps(attributions)

    def magnitudes(self, attributions: Any, device: torch.device | None) -> list[torch.Tensor]:
        """|map| of each text as its own row on the CPU (texts differ in length)."""
        return row_magnitudes(self.metric_maps(attributions))

    def map_similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        """Spearman rank correlation of the word scores (a text's map is too short for SSIM)."""
        return spearman(a, b)

    def perturbation_curve(
        self, bundle: ModelBundle, raw: Any, attributions: Any, *, mode: Mode, steps: int, batch_size: int = 256
    ) -> CurveResult:
        """Words removed from the text (deletion) or put back into an empty one (insertion), most relevant first."""
        texts = self.checked(bundle, raw)  # the words the maps are of
        return text_perturbation_curve(bundle, texts, attributions, mode=mode, steps=steps, batch_size=batch_size)


TEXT_ADAPTER = ADAPTERS.register(
    extend(
        TEXT,
        TextAdapter,
        displays=("tokens",),
        metrics=(
            "deletion_auc",
            "insertion_auc",
            "rationale_pointing",
            "rationale_energy",
            "completeness_gap",
            "sparseness",
            "complexity",
            "random_logit",
            "seconds",
        ),
        gradient_unit="embedding",
        map_files="html",
        stores_values=False,
    )
)
