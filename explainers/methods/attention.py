"""Attention maps (text, series) and attention rollout (vision, text and series transformers).

Both apply only to models with `forward_with_attention` (vit_tiny, text_transformer, minilm, series_transformer).
Which attention row becomes the map:
- a model with a class token (vit_tiny's token 0, BERT's [CLS]) : that token's row, since the
  class token is what the classifier reads;
- a model without one (text_transformer pools the mean of its tokens, series_transformer of its time steps): the
  mean of the rows of the real (non-padding) tokens, the attention the pooled vector receives.
The input's modality adapter lays the row out over the input's features (`attention_map`): words, patches, steps.
Maps are non-negative; attention to special tokens ([CLS], [SEP]) is dropped when word pieces
are merged into words.
"""

from __future__ import annotations

from typing import Any

import torch

from xaidash.explainers.inspection.attention import (
    HEAD_FUSIONS,
    collect_attention,
    fuse_heads,
    has_attention,
    pick_layer,
    rollout,
)
from xaidash.explainers.methods._common import per_input
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle


def _applies(bundle: ModelBundle) -> str | None:
    if not has_attention(bundle.model):
        return (
            "the model exposes no global attention weights (transformers do: vit_tiny, text_transformer, minilm, "
            "series_transformer, "
            "imported ViT, DeiT or BERT-like models; not Swin's windowed attention)"
        )
    return None


def _rows(ctx: MethodContext, matrix: torch.Tensor) -> torch.Tensor:
    """(N, T, T) attention -> one map per input over its features, as the input's modality lays them out."""
    return adapter_of(ctx.bundle.modality).attention_map(ctx.bundle, ctx.raw, ctx.x, matrix)


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
    return MethodOutput(attributions=_rows(ctx, matrix))


def _rollout(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    fusion, residual = params["head_fusion"], params["residual"]
    maps = [rollout([fuse_heads(a, -1, fusion) for a in chunk], residual=residual) for chunk in _batched_attention(ctx)]
    matrix = torch.cat(maps)
    return MethodOutput(attributions=_rows(ctx, matrix))


register(
    MethodSpec(
        id="attention",
        label="Attention",
        modalities=("text", "series"),
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
        modalities=("image", "text", "series"),
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
