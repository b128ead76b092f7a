"""A tiny Vision Transformer: conv patch embedding, class token, learned positions, 4 pre-norm blocks."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import ModelError, ModelSpec, register
from xaidash.models.zoo._attention import Encoder

DIM, DEPTH, HEADS, MLP_DIM = 64, 4, 4, 128
_TARGET_PATCHES = 64  # about 8x8 patches: enough tokens to see where attention goes, few enough to train on a CPU


def patch_size_for(height: int, width: int) -> int | None:
    """The patch size (a common divisor >= 2 of height and width, leaving >= 2 patches per side)
    whose patch count is nearest to 8x8: 4 for 28 or 32 px, 2 for 8 px, 28 for 224 px.
    None when no such divisor exists."""
    candidates = [p for p in range(2, min(height, width) // 2 + 1) if height % p == 0 and width % p == 0]
    if not candidates:
        return None
    return min(candidates, key=lambda p: (abs(math.log((height // p) * (width // p) / _TARGET_PATCHES)), p))


class ViTTiny(nn.Module):
    """forward(x) -> logits; forward_with_attention(x) -> (logits, [A_l (N, heads, T, T)]) with
    T = 1 + patches, token 0 the class token and patches in row-major order over `grid`."""

    def __init__(
        self, in_channels: int, image_size: tuple[int, int], num_classes: int, patch_size: int, dropout: float = 0.1
    ):
        super().__init__()
        self.patch_size = patch_size
        self.grid = (image_size[0] // patch_size, image_size[1] // patch_size)
        self.patch_embed = nn.Conv2d(in_channels, DIM, patch_size, stride=patch_size)
        self.flatten = nn.Flatten(2)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + self.grid[0] * self.grid[1], DIM))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.pos_drop = nn.Dropout(dropout)
        self.encoder = Encoder(DEPTH, DIM, HEADS, MLP_DIM, dropout)
        self.head = nn.Linear(DIM, num_classes)

    def forward_with_attention(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        patches = self.flatten(self.patch_embed(x)).transpose(1, 2)  # (N, P, DIM)
        if patches.shape[1] != self.pos_embed.shape[1] - 1:
            raise ModelError(
                f"vit_tiny was built for {self.grid[0] * self.patch_size}x{self.grid[1] * self.patch_size} images; "
                f"got {x.shape[-2]}x{x.shape[-1]}."
            )
        tokens = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), patches], dim=1)
        h, weights = self.encoder(self.pos_drop(tokens + self.pos_embed))
        return self.head(h[:, 0]), weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with_attention(x)[0]


def _fits(info: DatasetInfo) -> str | None:
    if len(info.input_shape) != 3 or min(info.input_shape[1:]) < 8:
        return "needs images of at least 8x8 pixels"
    if patch_size_for(*info.input_shape[1:]) is None:
        h, w = info.input_shape[1:]
        return f"height {h} and width {w} share no factor >= 2 to cut equal patches (resize to e.g. 32x32)"
    return None


def build(info: DatasetInfo, patch_size: int | None = None, dropout: float = 0.1, **_: Any) -> ViTTiny:
    c, h, w = info.input_shape
    p = patch_size or patch_size_for(h, w)
    if p is None or h % p or w % p:
        raise ModelError(f"patch size {p} does not divide {h}x{w} images.")
    return ViTTiny(c, (h, w), info.num_classes, p, dropout)


register(
    ModelSpec(
        name="vit_tiny",
        modality="image",
        build=build,
        description=f"Vision Transformer: patch embedding, class token, {DEPTH} pre-norm blocks "
        f"(dim {DIM}, {HEADS} heads, MLP {MLP_DIM}); attention weights readable per layer.",
        fits=_fits,
        input_note="any image of at least 8x8 whose sides share a factor (patches of 4 px at 28/32 px)",
        attention=tuple(f"encoder.blocks.{i}.attn" for i in range(DEPTH)),
    )
)
