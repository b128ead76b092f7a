"""Attention maps read from models that implement `forward_with_attention`, and attention rollout.

Rollout follows Abnar & Zuidema (2020), "Quantifying Attention Flow in Transformers": each
layer's head-fused attention is mixed with the identity for the residual connection,
A' = 0.5 * A + 0.5 * I, rows re-normalised, and the layers multiplied from the input up,
R = A'_L ... A'_1. Written by hand: none of the installed libraries (captum, shap, lime,
transformers) computes rollout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, cast

import torch
from torch import nn

from xaidash.explainers.params import ExplainError

HeadFusion = Literal["mean", "max", "min"]
HEAD_FUSIONS: tuple[str, ...] = ("mean", "max", "min")


class AttentionModel(Protocol):
    """A zoo model that returns its attention weights beside its logits."""

    def forward_with_attention(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]: ...


LEADING = ("[CLS]", "[DIST]", *(f"[REG{i}]" for i in range(1, 7)))  # names of tokens before an image's patches


@dataclass(frozen=True)
class TokenLayout:
    """What an attention matrix's positions are for one input: one label per position; `grid` (rows, cols) of the
    image patches behind the last positions, or None for a sequence; `query` the row the prediction reads (a class
    token), or None where the model pools the mean over its tokens."""

    labels: list[str]
    grid: tuple[int, int] | None
    query: int | None


def has_attention(model: nn.Module) -> bool:
    return callable(getattr(model, "forward_with_attention", None))


@torch.no_grad()
def collect_attention(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Per-layer attention weights [(N, heads, T, T)], input layer first, as float32."""
    if not has_attention(model):
        raise ExplainError(f"{type(model).__name__} does not expose its attention (no forward_with_attention).")
    model.eval()
    _, weights = cast(AttentionModel, model).forward_with_attention(x)
    if not weights:
        raise ExplainError(f"{type(model).__name__} returned no attention weights.")
    out = []
    for i, w in enumerate(weights):
        if w.dim() != 4 or w.shape[-1] != w.shape[-2]:
            raise ExplainError(f"Attention of layer {i} has shape {tuple(w.shape)}; expected (N, heads, T, T).")
        out.append(w.detach().float())
    return out


def fuse_heads(attention: torch.Tensor, head: int = -1, fusion: HeadFusion = "mean") -> torch.Tensor:
    """(N, heads, T, T) -> (N, T, T): one head (head >= 0) or all heads fused by mean/max/min."""
    if attention.dim() != 4:
        raise ExplainError(f"Expected attention (N, heads, T, T), got shape {tuple(attention.shape)}.")
    heads = attention.shape[1]
    if head >= 0:
        if head >= heads:
            raise ExplainError(f"Head {head} does not exist: this layer has heads 0..{heads - 1} (-1 fuses all).")
        return attention[:, head]
    if fusion == "mean":
        return attention.mean(dim=1)
    if fusion == "max":
        return attention.amax(dim=1)
    if fusion == "min":
        return attention.amin(dim=1)
    raise ExplainError(f"Unknown head fusion {fusion!r}: choose one of {', '.join(HEAD_FUSIONS)}.")


def pick_layer(attentions: Sequence[torch.Tensor], layer: int) -> torch.Tensor:
    """One layer by index; negative indices count from the last layer (-1 = last)."""
    n = len(attentions)
    if not -n <= layer < n:
        raise ExplainError(
            f"Layer {layer} does not exist: the model has {n} attention layers (0..{n - 1}, or -1 for the last)."
        )
    return attentions[layer]


def rollout(attentions: Sequence[torch.Tensor], residual: bool = True) -> torch.Tensor:
    """Attention rollout of head-fused layers [(N, T, T)], input layer first -> (N, T, T).

    Row i of the result says how much each input token flows into token i at the last layer;
    rows sum to one when every layer's rows do.
    """
    if not attentions:
        raise ExplainError("Attention rollout needs at least one layer.")
    mixed = []
    for a in attentions:
        if a.dim() != 3 or a.shape[-1] != a.shape[-2]:
            raise ExplainError(f"Rollout takes head-fused attention (N, T, T); got {tuple(a.shape)}.")
        a = a.float()
        if residual:
            eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
            a = 0.5 * a + 0.5 * eye
        # max/min head fusion leaves rows that no longer sum to one.
        mixed.append(a / a.sum(dim=-1, keepdim=True).clamp_min(1e-12))
    result = mixed[0]
    for a in mixed[1:]:
        result = a @ result
    return result


def query_row(
    matrix: torch.Tensor, mode: Literal["first", "mean"], query_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """(N, T, T) -> (N, T): the first token's row (a class token), or the mean row over the
    queries where `query_mask` (N, T) is True (all queries when None)."""
    if mode == "first":
        return matrix[:, 0]
    if query_mask is None:
        return matrix.mean(dim=1)
    m = query_mask.to(matrix.dtype).unsqueeze(-1)
    return (matrix * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)
