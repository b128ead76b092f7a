"""Word perturbations of token ids for text LIME and KernelSHAP (registers no method).

lime_text deletes words from the string and re-tokenizes every perturbed text, one input at a time;
captum's KernelShap pastes one coalition at a time into one input. Here each input's words are located
among its token ids once (`WordLayout`), every perturbation of every input of the call is built as id
rows on the device, chunk by chunk, and all of them share one stream of model passes
(`_common.scored_rows`: `ctx.batch_size` rows per pass, halved on out-of-memory).

A word removed (LIME): its id positions are dropped and the row is left-compacted, padding at the end
(`deleted_rows`); a row left with no word gets the ids of an empty text. That is what re-tokenizing the
text with the word deleted gives as long as every word left is tokenized as in the full text: with the
word vocabulary and WordPiece, always for words separated by whitespace or punctuation touching one word
("great!"); tests compare ids and probabilities with re-tokenized strings. They cannot be equal:
- where words touch (no whitespace between them), deleting one can change how the others are read: "well,
  done" without "," is the string "welldone", one new word, where the ids keep "well" "done"; with
  WordPiece, "5€" without "5" re-tokenizes "€" as a word, where the ids keep the continuation piece "##€";
- in a text longer than the tokenizer's max_length: deleted from the string, the first unread words slide
  into view; with ids the model keeps reading only the words it read in the original (the ones explained).
LIME's rows are run shortest first (`kept_lengths`), so the rows of one pass have about the same
length and little padding: half the ids per pass on average, since lime deletes 1..d of d words.
A word absent (KernelSHAP): its id positions take the padding id, in place (`padded_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from xaidash.data.tokenizer import split_words
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import MethodContext


def word_ids_of(ctx: MethodContext, i: int) -> list[int | None]:
    """Word index of each id position of input i (None for special tokens), cut to the encoded width."""
    return ctx.bundle.tokenizer.word_ids(ctx.raw[i])[: ctx.x.shape[1]]


@dataclass(frozen=True)
class WordLayout:
    """Where the words of every input of a call sit among its ids.

    word: (N, L) long on the device, the word index (in `split_words`) of each id position, -1 for
    special tokens and padding. words: per input, the words the model reads (`split_words`, cut after
    the last word with an id). present: per input, the indices of the words that have ids (a word
    the tokenizer drops, such as a lone control character for WordPiece, has none)."""

    word: torch.Tensor
    words: list[list[str]]
    present: list[list[int]]

    def players(self) -> torch.Tensor:
        """(N, L) long: each id position's KernelSHAP player, the rank of its word among the words with ids
        (players are numbered contiguously), -1 where `word` is -1."""
        rank = torch.zeros((len(self.words), max(len(w) for w in self.words)), dtype=torch.long)
        for i, have in enumerate(self.present):
            rank[i, have] = torch.arange(len(have))
        rank = rank.to(self.word.device).gather(1, self.word.clamp(min=0))
        return torch.where(self.word < 0, -1, rank)


def word_layout(ctx: MethodContext) -> WordLayout:
    """The layout of ctx's inputs; ExplainError for a text none of whose words has an id."""
    word = torch.full(ctx.x.shape, -1, dtype=torch.long)
    words, present = [], []
    for i, text in enumerate(ctx.raw):
        ids = word_ids_of(ctx, i)
        have = sorted({w for w in ids if w is not None})
        if not have:
            raise ExplainError(f"Text {i + 1} has no word the model can read.")
        word[i, : len(ids)] = torch.tensor([-1 if w is None else w for w in ids])
        words.append(split_words(text)[: have[-1] + 1])
        present.append(have)
    return WordLayout(word.to(ctx.x.device), words, present)


def kept_lengths(layout: WordLayout, ids: torch.Tensor, on: np.ndarray, pad_id: int) -> np.ndarray:
    """(N, samples): how many ids each LIME row keeps (its special tokens and the pieces of its words left),
    from the (N, samples, K) 0/1 draws, before any model pass."""
    word, real = layout.word.cpu().numpy(), (ids != pad_id).cpu().numpy()
    out = np.zeros(on.shape[:2], dtype=np.int64)
    for i, words in enumerate(layout.words):
        pieces = np.bincount(word[i][word[i] >= 0], minlength=len(words))  # ids per word
        out[i] = ((word[i] < 0) & real[i]).sum() + on[i, :, : len(words)] @ pieces
    return out


def shown_positions(feature: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """(R, L) bool: the id positions a row keeps. feature: (R, L) long, each position's feature (-1:
    not a feature: special tokens and padding, always kept); on: (R, K) 0/1, the features each row shows."""
    return (feature < 0) | on.gather(1, feature.clamp(min=0)).bool()


def padded_rows(ids: torch.Tensor, keep: torch.Tensor, pad_id: int) -> torch.Tensor:
    """`ids` (R, L) with every position not kept replaced by the padding id (KernelSHAP's absent words)."""
    return torch.where(keep, ids, torch.full_like(ids, pad_id))


def deleted_rows(
    ids: torch.Tensor, keep: torch.Tensor, is_word: torch.Tensor, pad_id: int, empty: torch.Tensor
) -> torch.Tensor:
    """`ids` (R, L) with the positions not kept removed and the rest moved left, padding at the end: the ids
    of the text with those words deleted (LIME's removed words). A row with no word left gets `empty`, the
    tokenizer's ids of an empty text ([UNK] for the word vocabulary, [CLS] [SEP] for WordPiece), as
    re-tokenizing a text of whitespace gives. Written here: no library deletes tokens from id tensors."""
    rows, width = ids.shape
    # Kept positions go to their rank among the kept ones; dropped ones to a spare last column, cut off after.
    dest = torch.where(keep, keep.long().cumsum(1) - 1, width)
    out = torch.full((rows, width + 1), pad_id, dtype=ids.dtype, device=ids.device)
    out.scatter_(1, dest, ids)
    out = out[:, :width]
    if len(empty) > width:
        out = torch.cat([out, out.new_full((rows, len(empty) - width), pad_id)], dim=1)
    no_word = ~(keep & is_word).any(1, keepdim=True)
    return torch.where(no_word, torch.nn.functional.pad(empty, (0, out.shape[1] - len(empty)), value=pad_id), out)


def trim_padding(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """`ids` without the columns after the last one that holds a non-padding id in any row (every text
    model here masks padding, so the scores do not change; the passes get shorter)."""
    used = (ids != pad_id).any(0).nonzero()
    return ids[:, : int(used.max()) + 1] if len(used) else ids[:, :1]


def deletion_samples(samples: int, d: int, seed: int) -> np.ndarray:
    """lime_text's neighbourhood of a text of d words, drawn at once: (samples, d) 0/1 (1: the word stays),
    the first row the unperturbed text, every other one with a number of deleted words drawn uniformly
    from 1..d (lime: `randint(1, d + 1)`; all d deleted leaves an empty text), which ones uniformly.
    lime draws each row in a Python loop from NumPy's generator; these are drawn from the seed alone, on
    the CPU, so an input's samples do not depend on the other inputs of the call or on the device."""
    gen = torch.Generator().manual_seed(int(seed))
    on = torch.ones(samples, d, dtype=torch.long)
    deleted = torch.randint(1, d + 1, (samples - 1,), generator=gen)
    ranks = torch.rand(samples - 1, d, generator=gen).argsort(1).argsort(1)  # a random order of the words
    on[1:] = (ranks >= deleted[:, None]).long()
    return on.numpy()


def stacked(draws: list[np.ndarray]) -> np.ndarray:
    """Per-input (samples, k_i) 0/1 draws as one (N, samples, max k) array, zeros past each input's k_i
    (those columns belong to no position of that input)."""
    out = np.zeros((len(draws), draws[0].shape[0], max(d.shape[1] for d in draws)), dtype=np.int64)
    for i, d in enumerate(draws):
        out[i, :, : d.shape[1]] = d
    return out
