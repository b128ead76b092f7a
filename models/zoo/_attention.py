"""Pre-norm transformer encoder blocks shared by vit_tiny and text_transformer (registers no model).

Written by hand rather than with nn.MultiheadAttention / nn.TransformerEncoderLayer: those
compute softmax and dropout functionally inside one fused call, so attention weights are
not readable per head and DeepLift cannot see the nonlinearity. Here each block owns its
Softmax, GELU and Dropout instances, and `SelfAttention.forward` returns the weights.
"""

from __future__ import annotations

import torch
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head self-attention; forward(x, key_padding_mask) -> (output, weights (N, heads, T, T))."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by {heads} heads")
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.softmax = nn.Softmax(dim=-1)
        self.attn_drop = nn.Dropout(dropout)
        self.proj = nn.Linear(dim, dim)

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n, t, d = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * self.scale
        if key_padding_mask is not None:
            # The most negative finite value, not -inf: a row whose keys are all padding stays finite.
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], torch.finfo(scores.dtype).min)
        weights = self.softmax(scores)
        out = (self.attn_drop(weights) @ v).transpose(1, 2).reshape(n, t, d)
        return self.proj(out), weights


class EncoderBlock(nn.Module):
    """x + attn(norm(x)), then x + mlp(norm(x)); forward returns (x, attention weights)."""

    def __init__(self, dim: int, heads: int, mlp_dim: int, dropout: float = 0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, dropout)
        self.drop1 = nn.Dropout(dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(mlp_dim, dim))
        self.drop2 = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        a, weights = self.attn(self.norm1(x), key_padding_mask)
        x = x + self.drop1(a)
        x = x + self.drop2(self.mlp(self.norm2(x)))
        return x, weights


class Encoder(nn.Module):
    """A stack of EncoderBlocks followed by a final LayerNorm."""

    def __init__(self, depth: int, dim: int, heads: int, mlp_dim: int, dropout: float = 0.0):
        super().__init__()
        self.blocks = nn.ModuleList(EncoderBlock(dim, heads, mlp_dim, dropout) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        weights = []
        for block in self.blocks:
            x, w = block(x, key_padding_mask)
            weights.append(w)
        return self.norm(x), weights
