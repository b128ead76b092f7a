"""The logit lens (nostalgebraist 2020): the residual stream after each decoder layer decoded through the final norm
and the unembedding, as if the model stopped there: the top token and its probability per layer and position.

transformers' `output_hidden_states` gives num_layers + 1 states: the embeddings, then each layer's output, except
that the last one is replaced by the final norm's output (`last_hidden_state`, already normalised). Normalising it
again would decode the wrong thing, so the last layer's own output is taken from the final norm's input (a forward
pre-hook); every state then goes through the same final norm and unembedding, and the last layer's row equals the
model's own logits. Written by hand: transformers and captum have no logit lens (nnsight and TransformerLens do,
but wrap the model in their own classes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.explainers.params import ExplainError
from xaidash.models.language.model import LanguageModel

MAX_TOP_K = 20


@dataclass
class LogitLens:
    """layers: one label per row ("embeddings", "layer 1" ... "layer L"); positions: the sequence positions read,
    tokens: their token texts (the token *at* each position: its row predicts the next one); top_ids, top_probs
    (rows, positions, k) and top_tokens (rows x positions x k texts): each row's most probable next tokens;
    tracked / tracked_probs: the token ids followed at each position and their probability per row (None when no
    token was tracked)."""

    layers: list[str]
    positions: list[int]
    tokens: list[str]
    top_ids: np.ndarray
    top_probs: np.ndarray
    top_tokens: list[list[list[str]]]
    tracked: list[int] | None = None
    tracked_probs: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.layers), len(self.positions)

    def top_grid(self) -> list[list[str]]:
        """(rows, positions) texts of each cell's most probable token (what the page writes in the grid)."""
        return [[cell[0] for cell in row] for row in self.top_tokens]

    def to_dict(self) -> dict[str, Any]:
        return {
            "layers": self.layers,
            "positions": self.positions,
            "tokens": self.tokens,
            "top_ids": self.top_ids.tolist(),
            "top_probs": self.top_probs.tolist(),
            "top_tokens": self.top_tokens,
            "tracked": self.tracked,
            "tracked_probs": None if self.tracked_probs is None else self.tracked_probs.tolist(),
        }


@torch.no_grad()
def residual_stream(lm: LanguageModel, ids: torch.Tensor) -> list[torch.Tensor]:
    """num_layers + 1 residual states (1, T, D) of ids (1, T): the embeddings, then each layer's output before the
    final norm (see the module docstring for why the last one is read from a hook)."""
    captured: list[torch.Tensor] = []

    def before_norm(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        captured.append(args[0].detach())

    handle = lm.final_norm().register_forward_pre_hook(before_norm)
    try:
        out = lm.model(input_ids=ids, output_hidden_states=True, use_cache=False, logits_to_keep=1)
    finally:
        handle.remove()
    states = list(out.hidden_states or ())
    if len(states) != lm.num_layers + 1 or len(captured) != 1:
        raise ExplainError(f"{lm.name} did not return one hidden state per layer; the logit lens cannot read it.")
    return [*states[:-1], captured[0]]


@torch.no_grad()
def decode(lm: LanguageModel, state: torch.Tensor) -> torch.Tensor:
    """Float logits (..., vocab) of residual states (..., D): the final norm, then the unembedding."""
    return lm.unembedding()(lm.final_norm()(state)).float()


def _positions(positions: Sequence[int] | None, length: int) -> list[int]:
    if positions is None:
        return list(range(length))
    out = [int(p) + length if int(p) < 0 else int(p) for p in positions]
    bad = [p for p in out if not 0 <= p < length]
    if bad or not out:
        raise ExplainError(f"Positions {bad or 'none'} are not in the sequence of {length} tokens.")
    return out


def _tracked(track: int | Sequence[int] | None, n: int, vocab: int) -> list[int] | None:
    if track is None:
        return None
    ids = [int(track)] * n if isinstance(track, (int, np.integer)) else [int(t) for t in track]
    if len(ids) != n:
        raise ExplainError(f"Got {len(ids)} tokens to track for {n} positions.")
    if any(not 0 <= t < vocab for t in ids):
        raise ExplainError(f"A tracked token id is outside the vocabulary (0-{vocab - 1}).")
    return ids


def logit_lens(
    lm: LanguageModel,
    ids: Sequence[int] | torch.Tensor,
    positions: Sequence[int] | None = None,
    top_k: int = 1,
    track: int | Sequence[int] | None = None,
) -> LogitLens:
    """The logit lens of one token sequence at `positions` (default: all; negative ones count from the end):
    per layer and position the `top_k` most probable next tokens, and with `track` (one id, or one per position,
    e.g. the tokens the model went on to write) that token's probability per layer."""
    x = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1).to(lm.device)
    if x.shape[1] == 0:
        raise ExplainError("There are no tokens to read the logit lens of.")
    if not 1 <= int(top_k) <= MAX_TOP_K:
        raise ExplainError(f"top_k={top_k}: choose 1 to {MAX_TOP_K}.")
    where = _positions(positions, x.shape[1])
    followed = _tracked(track, len(where), lm.vocab_size)
    index = torch.tensor(where, device=lm.device)
    top_ids, top_probs, tracked_probs = [], [], []
    for state in residual_stream(lm, x):  # one layer at a time: (positions, vocab) probabilities, never all
        probs = torch.softmax(decode(lm, state[0, index]), dim=-1)
        p, i = probs.topk(int(top_k), dim=-1)
        top_probs.append(p.cpu().numpy())
        top_ids.append(i.cpu().numpy())
        if followed is not None:
            tracked_probs.append(
                probs[torch.arange(len(where), device=lm.device), torch.tensor(followed, device=lm.device)]
                .cpu()
                .numpy()
            )
    ids_arr = np.stack(top_ids)
    seen = sorted({int(t) for t in ids_arr.ravel()})
    lookup = dict(zip(seen, lm.token_text(seen), strict=True))  # each distinct token decoded once
    sequence = x[0].tolist()
    return LogitLens(
        layers=["embeddings", *(f"layer {i + 1}" for i in range(lm.num_layers))],
        positions=where,
        tokens=lm.token_text([sequence[p] for p in where]),
        top_ids=ids_arr,
        top_probs=np.stack(top_probs).astype(np.float32),
        top_tokens=[[[lookup[int(t)] for t in cell] for cell in row] for row in ids_arr],
        tracked=followed,
        tracked_probs=None if followed is None else np.stack(tracked_probs).astype(np.float32),
    )
