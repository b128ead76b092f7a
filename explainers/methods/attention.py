"""Attention maps (text) and attention rollout (vision and text transformers).

Both apply only to models with `forward_with_attention` (vit_tiny, text_transformer, minilm).
Which attention row becomes the map:
- a model with a class token (vit_tiny's token 0, BERT's [CLS]) : that token's row, since the
  class token is what the classifier reads;
- a model without one (text_transformer pools the mean of its tokens): the mean of the rows of
  the real (non-padding) tokens, the attention the pooled vector receives.
Maps are non-negative; attention to special tokens ([CLS], [SEP]) is dropped when word pieces
are merged into words.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from xaidash.explainers.inspection.attention import (
    HEAD_FUSIONS,
    collect_attention,
    fuse_heads,
    has_attention,
    pick_layer,
    query_row,
    rollout,
)
from xaidash.explainers.methods._common import per_input
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle

MAX_LEADING_TOKENS = 8  # class, distillation and register tokens before the patches


def _applies(bundle: ModelBundle) -> str | None:
    if not has_attention(bundle.model):
        return (
            "the model exposes no global attention weights (transformers do: vit_tiny, text_transformer, minilm, "
            "imported ViT, DeiT or BERT-like models; not Swin's windowed attention)"
        )
    return None


def _text_rows(ctx: MethodContext, matrix: torch.Tensor) -> torch.Tensor:
    """(N, T, T) token-to-token attention -> (N, L) scores per input token position."""
    ids = ctx.x
    n, length = ids.shape
    t = matrix.shape[-1]
    if t == length + 1:  # the model prepends a class token of its own: its row, without itself
        return query_row(matrix, "first")[:, 1:]
    if t != length:
        raise ExplainError(
            f"Attention covers {t} tokens but the input has {length}; the model's attention does not match its input."
        )
    tokenizer = ctx.bundle.tokenizer
    rows = []
    for i in range(n):
        word_ids = tokenizer.word_ids(ctx.raw[i])
        if word_ids and word_ids[0] is None:  # a leading special token: [CLS]
            rows.append(query_row(matrix[i : i + 1], "first"))
        else:
            real = ids[i : i + 1] != tokenizer.pad_id
            rows.append(query_row(matrix[i : i + 1], "mean", real))
    return torch.cat(rows)


def _image_grid(ctx: MethodContext, tokens: int) -> tuple[int, int, int]:
    """(rows, cols, leading tokens) of the patch grid behind `tokens` attention positions: the patches come
    last, after a class token (and DeiT's distillation token, or register tokens) when the model has them."""
    grid = getattr(ctx.model, "grid", None)
    if grid is not None:
        gh, gw = int(grid[0]), int(grid[1])
        if 0 <= tokens - gh * gw <= MAX_LEADING_TOKENS:
            return gh, gw, tokens - gh * gw
    for lead in (1, 0):
        side = math.isqrt(max(tokens - lead, 0))
        if side > 0 and side * side == tokens - lead:
            return side, side, lead
    raise ExplainError(f"Cannot lay {tokens} attention tokens out on a patch grid (the model declares no `grid`).")


def _image_rows(ctx: MethodContext, matrix: torch.Tensor) -> torch.Tensor:
    """(N, T, T) -> (N, gh, gw): class-token row over the patches (mean row without a class token)."""
    gh, gw, lead = _image_grid(ctx, matrix.shape[-1])
    row = query_row(matrix, "first")[:, lead:] if lead else query_row(matrix, "mean")
    return row.reshape(len(row), gh, gw)


def _batched_attention(ctx: MethodContext) -> list[list[torch.Tensor]]:
    """Per-layer attention, one list per chunk of `ctx.batch_size` inputs (bounds memory: T x T per head)."""
    step = max(1, ctx.batch_size)
    return [collect_attention(ctx.model, ctx.x[i : i + step]) for i in range(0, len(ctx.x), step)]


def _attention(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    maps = []
    for chunk in _batched_attention(ctx):
        fused = fuse_heads(pick_layer(chunk, params["layer"]), params["head"])
        maps.append(fused)
    matrix = torch.cat(maps)
    return MethodOutput(attributions=_text_rows(ctx, matrix))


def _rollout(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    fusion, residual = params["head_fusion"], params["residual"]
    maps = [rollout([fuse_heads(a, -1, fusion) for a in chunk], residual=residual) for chunk in _batched_attention(ctx)]
    matrix = torch.cat(maps)
    rows = _text_rows(ctx, matrix) if ctx.bundle.modality == "text" else _image_rows(ctx, matrix)
    return MethodOutput(attributions=rows)


register(
    MethodSpec(
        id="attention",
        label="Attention",
        modalities=("text",),
        compute=_attention,
        params=(
            Param("layer", "int", -1, "Attention layer to read, 0 = first; -1 = last.", min=-1),
            Param("head", "int", -1, "Attention head to read; -1 = mean over heads.", min=-1),
        ),
        description="Raw attention weights of one layer: from the [CLS] token where the model has one, "
        "else the mean over the real tokens. Shows where the model looks, not why it decides.",
        applies=_applies,
        signed=False,
        family="attention",
        output="attention",
    )
)

register(
    MethodSpec(
        id="attention_rollout",
        label="Attention rollout",
        modalities=("image", "text"),
        compute=_rollout,
        params=(
            Param(
                "head_fusion",
                "choice",
                "mean",
                "How heads are combined in each layer (Abnar & Zuidema use the mean).",
                choices=HEAD_FUSIONS,
            ),
            Param(
                "residual",
                "bool",
                True,
                "Add the identity for the residual connection (0.5 A + 0.5 I) before multiplying layers.",
            ),
        ),
        description="Attention rollout (Abnar & Zuidema, 2020): attention multiplied through all layers, "
        "with the residual connection, read from the class token (mean over tokens without one).",
        applies=_applies,
        signed=False,
        family="attention",
        output="attention",
        passes=per_input(fwd=1),  # one forward pass that returns the attention weights
    )
)
