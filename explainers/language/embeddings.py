"""A causal language model's representations of a text data set, for the Embeddings page: one vector per text
(its tokens' states at one layer, pooled) or one per token (with properties to colour by), ready for
`explainers/inspection/projection.project`.

    texts, labels, classes = labelled_texts("sst2", "test", 500)
    features = sentence_representations(lm, texts, layer=middle_layer(lm))        # (500, D)
    tokens = token_representations(lm, texts, layer=middle_layer(lm), limit=3000)  # tokens.features (M, D)
    projection = project(features, "pca")

Layer L is the residual stream after L decoder layers (0: the embeddings, positions included), before the final
norm, as in the logit lens (`logit_lens.py`): read with a forward hook on the decoder block, and the forward pass
stopped there, so an early layer costs a fraction of a full pass. transformers' `output_hidden_states` would run
every layer and gives the last one after the final norm.

Each text is read raw (no chat template) after a start-of-text token, as documents are in pre-training (`start_token`).
The model's first token is an attention sink with massive activations: in SmolLM2 at layer 15 its state's norm is
about 24,000 against about 170 for the others, so without a start token the mean of a short text is dominated by its
first word and a PCA of 200 SST-2 sentences was one component (100% of the variance, correlation 0.99 with 1 / the
text's length). With `<|endoftext|>` in front, the largest component held 31% of the variance. Special tokens (the
start token, any the tokenizer adds) are never pooled nor listed.

Texts are batched in order of length with padding on either side: the attention mask hides the padding and explicit
position ids keep each text's positions as if it were alone (models with absolute positions, such as GPT-2, need
them under left padding), so a text's representation does not depend on its batch.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from xaidash.data.registry import TextSplit, get_info, load_split
from xaidash.explainers.params import ExplainError
from xaidash.models.language.model import LanguageModel

Pool = Literal["mean", "last"]
POOLS: tuple[str, ...] = ("mean", "last")
Padding = Literal["right", "left"]
MAX_TEXT_TOKENS = 256  # longer texts are cut to their first tokens (SST-2's longest is about 70)
DEFAULT_BATCH = 32
Progress = Callable[[int, int], object]  # progress(texts done, total)
# The token properties the page can colour by (TokenRepresentations.properties), with their labels.
TOKEN_PROPERTIES: dict[str, str] = {
    "kind": "kind (word start, word piece, punctuation, number, space)",
    "starts_word": "starts a word",
    "punctuation": "punctuation",
    "digit": "number",
    "position": "position in the text",
}


def layer_names(lm: LanguageModel) -> dict[int, str]:
    """The readable layers: 0 "embeddings", then "layer 1" ... "layer L" (as the logit lens names them)."""
    return {0: "embeddings", **{i: f"layer {i}" for i in range(1, lm.num_layers + 1)}}


def middle_layer(lm: LanguageModel) -> int:
    """The page's default: the middle of the stack, where sentence-level features tend to be most linear."""
    return max(1, lm.num_layers // 2)


@dataclass(frozen=True)
class TokenRepresentations:
    """One row per token read: `features` (M, D) float32; `text_index` (which text), `position` (its place among
    that text's tokens), `token_id` and `token` (its text); `properties` maps each TOKEN_PROPERTIES name to an (M,)
    array (booleans, ints, or the `kind` strings)."""

    features: np.ndarray
    text_index: np.ndarray
    position: np.ndarray
    token_id: np.ndarray
    token: list[str]
    properties: dict[str, np.ndarray]
    layer: int

    def __len__(self) -> int:
        return len(self.token)

    def per_token(self, per_text: Sequence[Any] | np.ndarray) -> np.ndarray:
        """A value per text (e.g. the data set's labels) spread to the tokens: `per_text[text_index]`."""
        return np.asarray(per_text)[self.text_index]


def labelled_texts(
    dataset: str = "sst2", split: Literal["train", "test"] = "test", n: int = 500, seed: int = 0
) -> tuple[list[str], np.ndarray, tuple[str, ...]]:
    """`n` texts of a text data set (all of the split when it has fewer; a seeded subset kept in the split's
    order otherwise), their labels (n,) and the class names."""
    info = get_info(dataset)
    data = load_split(dataset, split)
    if not isinstance(data, TextSplit):
        raise ExplainError(f"{dataset} is an image data set: language model representations need texts.")
    if n < 1:
        raise ExplainError(f"Ask for at least one text, not {n}.")
    picked = np.arange(len(data))
    if n < len(data):
        picked = np.sort(np.random.default_rng(seed).choice(len(data), size=n, replace=False))
    labels = data.labels.numpy()[picked]
    return [data.texts[i] for i in picked], labels, tuple(info.classes)


# ---- reading one layer ---------------------------------------------------------------------------------------------
class _Reached(Exception):
    """Raised by the hook once the layer is read: nothing after it is computed."""

    def __init__(self, states: torch.Tensor) -> None:
        super().__init__()
        self.states = states


def _check_layer(lm: LanguageModel, layer: int) -> int:
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= int(layer) <= lm.num_layers:
        raise ExplainError(f"{lm.name} has layers 0 (embeddings) to {lm.num_layers}; there is no layer {layer!r}.")
    return int(layer)


def _hook(lm: LanguageModel, layer: int) -> Any:
    """Register the hook that reads layer `layer` and stops the pass: the input of block `layer` (the output of
    the one before, or the embeddings), or the output of the last block."""
    blocks = lm.layers()

    def before(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        states = args[0] if args else kwargs["hidden_states"]
        raise _Reached(states)

    def after(module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        raise _Reached(output[0] if isinstance(output, (tuple, list)) else output)

    if layer < len(blocks):
        return blocks[layer].register_forward_pre_hook(before, with_kwargs=True)
    return blocks[-1].register_forward_hook(after)


@torch.no_grad()
def _layer_states(lm: LanguageModel, ids: torch.Tensor, mask: torch.Tensor, layer: int) -> torch.Tensor:
    """(N, T, D) float states of layer `layer` for a padded batch: mask (N, T) marks the real tokens; position ids
    count the real tokens only, so left padding does not shift them."""
    positions = (mask.long().cumsum(dim=1) - 1).clamp(min=0)
    handle = _hook(lm, layer)
    try:
        lm.model(
            input_ids=ids.to(lm.device),
            attention_mask=mask.to(lm.device),
            position_ids=positions.to(lm.device),
            use_cache=False,
        )
    except _Reached as reached:
        return reached.states.float()
    finally:
        handle.remove()
    raise ExplainError(f"Layer {layer} of {lm.name} was not reached by its forward pass.")  # a block never called


def start_token(lm: LanguageModel) -> int | None:
    """The token each text is read after: None when the tokenizer puts a special token first itself (Llama's
    `<s>`, Llama 3's `<|begin_of_text|>`); else `<|endoftext|>`, the document separator of GPT-2-style vocabularies
    (GPT-2, SmolLM2, Qwen), when the vocabulary has it; else the tokenizer's BOS, else its EOS token."""
    tokenizer = lm.tokenizer
    probe = list(tokenizer("a", add_special_tokens=True)["input_ids"])
    if probe and probe[0] in lm.special_ids():
        return None
    separator = tokenizer.get_vocab().get("<|endoftext|>")
    for candidate in (separator, getattr(tokenizer, "bos_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        if isinstance(candidate, int):
            return candidate
    return None


def _encode(lm: LanguageModel, texts: Sequence[str], max_tokens: int) -> tuple[list[list[int]], list[list[int]]]:
    """Each text's token ids (the start token first) and the positions of its own, non-special tokens."""
    if not texts:
        raise ExplainError("No texts to read: give at least one.")
    first = start_token(lm)
    special = lm.special_ids() | ({first} if first is not None else set())
    encoded, own = [], []
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise ExplainError(f"Text {i} is empty: every text needs at least one token.")
        ids = list(lm.tokenizer(text, add_special_tokens=True, truncation=True, max_length=max_tokens)["input_ids"])
        ids = ([first] if first is not None else []) + ids
        positions = [p for p, t in enumerate(ids) if t not in special]
        if not positions:
            raise ExplainError(f"Text {i} ({text[:40]!r}) is only special tokens: there is nothing of it to read.")
        encoded.append(ids)
        own.append(positions)
    return encoded, own


def _pad_id(lm: LanguageModel) -> int:
    pad = getattr(lm.tokenizer, "pad_token_id", None)
    return int(pad) if pad is not None else 0  # any id: padded positions are masked out and never read


def _batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Text indices in batches of similar length (longest first), so little padding is computed."""
    if batch_size < 1:
        raise ExplainError(f"The batch size must be at least 1, not {batch_size}.")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _padded(seqs: list[list[int]], pad_id: int, side: Padding) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        cols = slice(0, len(seq)) if side == "right" else slice(width - len(seq), width)
        ids[row, cols] = torch.tensor(seq, dtype=torch.long)
        mask[row, cols] = 1
    return ids, mask


def _each_text_states(
    lm: LanguageModel,
    encoded: list[list[int]],
    layer: int,
    batch_size: int,
    padding: Padding,
    progress: Progress | None,
) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield (text index, (T, D) states of its real tokens) for every text, batch by batch."""
    if padding not in ("right", "left"):
        raise ExplainError(f"Padding goes on the 'right' or the 'left', not {padding!r}.")
    pad_id, done = _pad_id(lm), 0
    for batch in _batches([len(s) for s in encoded], batch_size):
        ids, mask = _padded([encoded[i] for i in batch], pad_id, padding)
        states = _layer_states(lm, ids, mask, layer).cpu()
        for row, index in enumerate(batch):
            yield index, states[row][mask[row].bool()]
        done += len(batch)
        if progress is not None:
            progress(done, len(encoded))


# ---- the two public readers ----------------------------------------------------------------------------------------
def sentence_representations(
    lm: LanguageModel,
    texts: Sequence[str],
    layer: int,
    pool: Pool = "mean",
    batch_size: int = DEFAULT_BATCH,
    *,
    padding: Padding = "right",
    max_tokens: int = MAX_TEXT_TOKENS,
    progress: Progress | None = None,
) -> np.ndarray:
    """(N, D) float32: each text's states at `layer` averaged over its tokens (`pool="mean"`) or its last token's
    state (`"last"`: in a causal model the only one that has read the whole text)."""
    if pool not in POOLS:
        raise ExplainError(f"Pooling is {' or '.join(POOLS)}, not {pool!r}.")
    layer = _check_layer(lm, layer)
    encoded, own = _encode(lm, texts, max_tokens)
    out: np.ndarray | None = None
    for index, states in _each_text_states(lm, encoded, layer, batch_size, padding, progress):
        if out is None:
            out = np.empty((len(encoded), states.shape[-1]), dtype=np.float32)
        read = states[own[index]]
        out[index] = (read.mean(dim=0) if pool == "mean" else read[-1]).numpy()
    assert out is not None
    return out


def token_representations(
    lm: LanguageModel,
    texts: Sequence[str],
    layer: int,
    limit: int = 5000,
    batch_size: int = DEFAULT_BATCH,
    *,
    padding: Padding = "right",
    max_tokens: int = MAX_TEXT_TOKENS,
    progress: Progress | None = None,
) -> TokenRepresentations:
    """The states at `layer` of the texts' tokens, text after text, up to `limit` tokens in all (the texts needed
    to reach it are read, no more); special tokens (a BOS the tokenizer adds) are left out."""
    if limit < 1:
        raise ExplainError(f"Ask for at least one token, not {limit}.")
    layer = _check_layer(lm, layer)
    encoded, own = _encode(lm, texts, max_tokens)
    kept: list[tuple[int, list[int]]] = []  # (text index, the positions read) until the limit
    total = 0
    for i, positions in enumerate(own):
        if total >= limit:
            break
        kept.append((i, positions[: limit - total]))
        total += len(kept[-1][1])
    states_of = dict(_each_text_states(lm, [encoded[i] for i, _ in kept], layer, batch_size, padding, progress))
    features = np.concatenate([states_of[k][positions].numpy() for k, (_, positions) in enumerate(kept)])
    text_index = np.concatenate([np.full(len(p), i, dtype=np.int64) for i, p in kept])
    # the place among the text's own tokens (the start token not counted)
    position = np.concatenate([np.arange(len(p), dtype=np.int64) for _, p in kept])
    token_id = np.asarray([encoded[i][p] for i, ps in kept for p in ps], dtype=np.int64)
    starts = np.concatenate([_word_starts(lm, texts[i], encoded[i], own[i], max_tokens)[: len(p)] for i, p in kept])
    tokens = lm.token_text(token_id.tolist())
    return TokenRepresentations(
        features=features.astype(np.float32, copy=False),
        text_index=text_index,
        position=position,
        token_id=token_id,
        token=tokens,
        properties=_properties(tokens, starts, position),
        layer=layer,
    )


# ---- token properties ----------------------------------------------------------------------------------------------
def _word_starts(lm: LanguageModel, text: str, ids: list[int], own: list[int], max_tokens: int) -> np.ndarray:
    """Whether each of the text's own tokens begins a word: it is the first, or whitespace comes right before it or
    at its own start (through the tokenizer's character offsets; from the tokens' text when it gives none)."""
    enc = lm.tokenizer(
        text, add_special_tokens=True, truncation=True, max_length=max_tokens, return_offsets_mapping=True
    )
    offsets = enc.get("offset_mapping")
    shift = len(ids) - len(enc["input_ids"])  # the start token put in front
    if offsets is None or shift < 0:
        texts = lm.token_text([ids[p] for p in own])
        return np.asarray([i == 0 or t[:1].isspace() or texts[i - 1][-1:].isspace() for i, t in enumerate(texts)])
    spans = [(int(offsets[p - shift][0]), int(offsets[p - shift][1])) for p in own]
    first = spans[0][0]
    return np.asarray([a <= first or text[a - 1].isspace() or text[a : a + 1].isspace() for a, _ in spans], dtype=bool)


def _is_punctuation(text: str) -> bool:
    return bool(text) and all(unicodedata.category(c)[0] in "PS" for c in text)


def _properties(tokens: list[str], starts: np.ndarray, position: np.ndarray) -> dict[str, np.ndarray]:
    stripped = [t.strip() for t in tokens]
    punctuation = np.asarray([_is_punctuation(s) for s in stripped], dtype=bool)
    digit = np.asarray([bool(s) and s.isdigit() for s in stripped], dtype=bool)
    space = np.asarray([not s for s in stripped], dtype=bool)
    kind = np.where(
        space,
        "space",
        np.where(punctuation, "punctuation", np.where(digit, "number", np.where(starts, "word start", "word piece"))),
    )
    return {"kind": kind, "starts_word": starts, "punctuation": punctuation, "digit": digit, "position": position}
