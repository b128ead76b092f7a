"""A decoder's attention for the Attention page: every layer's weights from one forward pass, a layers x heads
summary per head, and rollout through the causal mask, handed to the page as numpy (no torch in a page).

`decoder_view` returns the same `AttentionView` the page draws for classifier transformers (weights
(layers, heads, T, T), token labels, the query row the prediction reads: the last position, whose logits give the
next token), so the grid, head view, layer means and rollout sections work unchanged. `head_grid` adds the per-head
summaries a 30 x 9 grid of SmolLM2 can show at a glance where T x T tiles would be too small to read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from xaidash.explainers.inspection.attention import rollout
from xaidash.explainers.inspection.attention_view import AttentionView
from xaidash.explainers.params import ExplainError
from xaidash.models.language.model import LanguageModel

# The head summaries `head_grid` makes (name -> what it is, for the page's legend); every value lies in [0, 1].
HEAD_MEASURES: dict[str, str] = {
    "entropy": "how spread each query's attention is over the tokens it may see (0: one token, 1: all equally), "
    "averaged over queries",
    "first": "attention to the first token (an 'attention sink' when high), averaged over queries",
    "previous": "attention to the token just before the query (a 'previous-token head' when high)",
    "self": "attention of each token to itself",
}
MAX_VIEW_BYTES = 768 * 2**20  # the page holds every layer's and head's T x T weights: refuse past this


def _ids_tensor(lm: LanguageModel, ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
    t = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1).to(lm.device)
    if t.shape[1] == 0:
        raise ExplainError("There are no tokens to read the attention of.")
    if t.shape[1] > lm.context:
        raise ExplainError(f"{t.shape[1]} tokens are more than {lm.name}'s context of {lm.context}.")
    return t


@torch.no_grad()
def decoder_attention(lm: LanguageModel, ids: Sequence[int] | torch.Tensor) -> list[torch.Tensor]:
    """Per layer (input layer first) the attention weights (heads, T, T) of one token sequence, float32 on the
    model's device: rows are queries and sum to one over the keys up to and including themselves (causal mask)."""
    x = _ids_tensor(lm, ids)
    out = lm.model(input_ids=x, output_attentions=True, use_cache=False, logits_to_keep=1)
    weights = getattr(out, "attentions", None)
    if not weights or any(w is None for w in weights):
        raise ExplainError(
            f"{lm.name} returned no attention weights: it runs a fused attention kernel (sdpa or flash); "
            "load it with eager attention to read them."
        )
    return [w[0].float() for w in weights]


def _stacked(weights: Sequence[torch.Tensor] | np.ndarray) -> np.ndarray:
    """(layers, heads, T, T) float32 numpy from a list of per-layer tensors or an array."""
    if isinstance(weights, np.ndarray):
        arr = weights.astype(np.float32, copy=False)
    else:
        arr = np.stack([w.detach().float().cpu().numpy() for w in weights])
    if arr.ndim != 4 or arr.shape[-1] != arr.shape[-2]:
        raise ExplainError(f"Expected attention weights (layers, heads, T, T), got shape {arr.shape}.")
    return arr


def head_grid(weights: Sequence[torch.Tensor] | np.ndarray, measure: str = "entropy") -> np.ndarray:
    """(layers, heads) one summary per head (`HEAD_MEASURES`), averaged over the queries after the first (the
    first token can attend only to itself, so it says nothing about a head)."""
    w = _stacked(weights)
    t = w.shape[-1]
    if measure not in HEAD_MEASURES:
        raise ExplainError(f"Unknown head measure {measure!r}: choose one of {', '.join(HEAD_MEASURES)}.")
    if t < 2:
        return np.zeros(w.shape[:2], dtype=np.float32)
    queries = np.arange(1, t)
    if measure == "first":
        per_query = w[:, :, 1:, 0]
    elif measure == "previous":
        per_query = w[:, :, queries, queries - 1]
    elif measure == "self":
        per_query = w[:, :, queries, queries]
    else:  # entropy of row i over its i + 1 visible keys, divided by its largest possible value log(i + 1)
        rows = w[:, :, 1:, :]
        ent = -(rows * np.log(np.clip(rows, 1e-12, None))).sum(-1)
        per_query = ent / np.log(queries + 1.0)
    return per_query.mean(-1).astype(np.float32)


def causal_rollout(weights: Sequence[torch.Tensor] | np.ndarray) -> np.ndarray:
    """(T, T) attention rollout (Abnar & Zuidema; heads averaged, the residual mixed in, `inspection.attention.
    rollout`) through every layer of a decoder: weights above the diagonal are set to exactly zero first, so no
    query takes anything from a later token however the kernel rounded its masked entries."""
    w = _stacked(weights)
    mask = np.tril(np.ones(w.shape[-2:], dtype=np.float32))
    fused = [torch.from_numpy(layer.mean(0) * mask)[None] for layer in w]
    return rollout(fused, residual=True)[0].numpy()


def decoder_view(
    lm: LanguageModel, ids: Sequence[int] | torch.Tensor, tokens: Sequence[str] | None = None
) -> AttentionView:
    """The Attention page's view of one token sequence (a prompt, or a prompt and its answer): weights
    (layers, heads, T, T), token labels (`lm.token_text` unless given), the last position as the row the next
    token is read from. ExplainError when the weights would take more than MAX_VIEW_BYTES."""
    x = _ids_tensor(lm, ids)
    t = x.shape[1]
    size = lm.num_layers * lm.num_heads * t * t * 4
    if size > MAX_VIEW_BYTES:
        most = int((MAX_VIEW_BYTES / (lm.num_layers * lm.num_heads * 4)) ** 0.5)
        raise ExplainError(
            f"The attention of {t} tokens over {lm.num_layers} layers x {lm.num_heads} heads would take "
            f"{size / 2**20:,.0f} MB; at most {most} tokens can be shown: shorten the prompt or the answer."
        )
    labels = list(tokens) if tokens is not None else lm.token_text(x[0].tolist())
    if len(labels) != t:
        raise ExplainError(f"Got {len(labels)} token labels for {t} tokens.")
    return AttentionView(_stacked(decoder_attention(lm, x)), labels, None, t - 1)
