"""The attention of every layer and head of a transformer for one input, ready to draw (the
Attention page): weights as numpy with the tokens they relate and the row the prediction reads.
The attention maths (collecting, fusing heads, rollout) is `explainers.attention`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image

from xaidash.explainers.figures.html_parts import scaled_tokens_html
from xaidash.explainers.figures.render import scaled_map
from xaidash.explainers.figures.scales import ColourScale
from xaidash.explainers.inspection.attention import collect_attention, has_attention, rollout
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

ATTENTION_CMAP = "viridis"  # every attention picture of the page, as its altair charts


@dataclass
class AttentionView:
    """Every layer's and head's attention for one input, as numpy, with what the tokens are.

    weights: (layers, heads, T, T), rows (queries) summing to one. tokens: one label per position.
    grid: (rows, cols) of the image patches behind tokens 1.. (vision) or None (text).
    query: the row the model's prediction reads — the class token (vision, BERT's [CLS]) or,
    for text_transformer which pools the mean of its tokens, None (the mean over rows is used).
    """

    weights: np.ndarray
    tokens: list[str]
    grid: tuple[int, int] | None
    query: int | None

    @property
    def layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def heads(self) -> int:
        return int(self.weights.shape[1])

    def matrix(self, layer: int, head: int | None = None) -> np.ndarray:
        """(T, T): one head, or the mean over heads (head None)."""
        w = self.weights[layer]
        return w.mean(0) if head is None else w[head]

    def read_row(self, matrix: np.ndarray) -> np.ndarray:
        """(T,) the attention the prediction reads from a (T, T) matrix: the query token's row or the mean row."""
        return matrix[self.query] if self.query is not None else matrix.mean(0)

    def patch_map(self, matrix: np.ndarray) -> np.ndarray:
        """Vision: (rows, cols) attention from the class token to each patch."""
        if self.grid is None:
            raise ExplainError("Patch maps exist for vision transformers only.")
        row = self.read_row(matrix)
        return row[len(row) - self.grid[0] * self.grid[1] :].reshape(self.grid)  # the patches come last

    def patch_figure(
        self,
        patch_map: np.ndarray,
        what: str,
        image: Any = None,
        upscale: int | None = 224,
        font_size: int = 13,
        say_stretched: bool = True,
    ) -> Image.Image:
        """Vision: a (rows, cols) patch map as blocks over a grey copy of `image` (or alone, without one), stretched
        from the map's minimum (transparent, dark) to its maximum (opaque, bright) so near-uniform attention still
        shows its peaks, with that scale's colour bar below (its ends are the map's own weights). `font_size`:
        larger for a map shown small; `say_stretched`: the bar's label says it is stretched (leave it to a caption
        when several maps are shown side by side)."""
        label = f"{what}; stretched from this map's minimum" if say_stretched else what
        scale = ColourScale.of(patch_map, label, cmap=ATTENTION_CMAP, stretch=True)
        alpha = 0.85 if image is not None else 1.0
        return scaled_map(patch_map, scale, image=image, upscale=upscale, alpha=alpha, font_size=font_size)

    def tokens_html(self, row: np.ndarray, what: str) -> str:
        """Text: the tokens coloured by `row` (one weight per token) from 0 to its largest weight, with the colour
        bar below."""
        return scaled_tokens_html(self.tokens, row, ColourScale.of(row, what, cmap=ATTENTION_CMAP))

    def rollout(self) -> np.ndarray:
        """(T, T) attention rollout (mean over heads, residual mixed in) through all layers."""
        fused = [torch.from_numpy(self.weights[i].mean(0))[None] for i in range(self.layers)]
        return rollout(fused, residual=True)[0].numpy()


def attention_view(bundle: ModelBundle, raw: torch.Tensor | str) -> AttentionView:
    """The attention of every layer and head of `bundle` for one image (C, H, W) in [0, 1] or one text."""
    if not has_attention(bundle.model):
        raise ExplainError(
            f"{bundle.spec.name} has no attention to show: only transformer models (vit_tiny, text_transformer, minilm) do."
        )
    x = bundle.prepare(bundle.adapter.as_batch(raw))[:1]
    weights = np.stack([a[0].cpu().numpy() for a in collect_attention(bundle.model, x)])  # (L, H, T, T)
    layout = adapter_of(bundle.modality).token_layout(bundle, raw, weights.shape[-1])
    return AttentionView(weights, layout.labels, layout.grid, layout.query)
