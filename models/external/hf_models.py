"""Hugging Face classifiers behind xaidash's model conventions.

A zoo model takes one tensor and returns logits; a Hugging Face model takes keyword arguments and
returns a ModelOutput. These thin wrappers translate (`hf.` prefixes every parameter name):
- images: normalised `pixel_values` (N, C, H, W) -> logits;
- text: token ids (N, L) -> logits, the attention mask built from the tokenizer's padding id, as every
  text model here does;
- models whose eager attention is global (one (N, heads, T, T) matrix per layer: ViT, DeiT, BERT, ...)
  also get `forward_with_attention`; Swin's windowed attention does not fit that shape, so it has none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' progress bars and load reports off inside (they would flood the CLI and the server log)."""
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


class HFImageClassifier(nn.Module):
    """forward(pixel_values) -> logits of a transformers image classifier."""

    def __init__(self, hf: nn.Module):
        super().__init__()
        self.hf = hf

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hf(pixel_values=x).logits


class HFImageClassifierWithAttention(HFImageClassifier):
    def forward_with_attention(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        out = self.hf(pixel_values=x, output_attentions=True)
        return out.logits, list(out.attentions)


class HFTextClassifier(nn.Module):
    """forward(ids) -> logits of a transformers sequence classifier; padding (pad_id) is masked out."""

    def __init__(self, hf: nn.Module, pad_id: int):
        super().__init__()
        self.hf = hf
        self.pad_id = int(pad_id)

    def _out(self, ids: torch.Tensor, attentions: bool) -> Any:
        return self.hf(input_ids=ids, attention_mask=(ids != self.pad_id).long(), output_attentions=attentions)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self._out(ids, False).logits


class HFTextClassifierWithAttention(HFTextClassifier):
    def forward_with_attention(self, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        out = self._out(ids, True)
        return out.logits, list(out.attentions)


def _global_attention(attentions: Any, batch: int, tokens: int | None) -> bool:
    """Whether attention weights are one (N, heads, T, T) matrix per layer over the whole input."""
    if not attentions:
        return False
    for a in attentions:
        if not isinstance(a, torch.Tensor) or a.dim() != 4 or a.shape[0] != batch or a.shape[-1] != a.shape[-2]:
            return False
        if tokens is not None and a.shape[-1] != tokens:
            return False
    return True


@torch.no_grad()
def wrap_image(hf: nn.Module, probe: torch.Tensor) -> nn.Module:
    """The wrapper for an image classifier; with attention when its eager attention is global."""
    hf.eval()
    try:
        attentions = getattr(hf(pixel_values=probe, output_attentions=True), "attentions", None)
    except (TypeError, ValueError, RuntimeError):
        attentions = None  # models without attention (ResNet, ConvNeXt) refuse or ignore output_attentions
    if _global_attention(attentions, len(probe), None):
        return HFImageClassifierWithAttention(hf)
    return HFImageClassifier(hf)


@torch.no_grad()
def wrap_text(hf: nn.Module, pad_id: int, probe: torch.Tensor) -> nn.Module:
    """The wrapper for a sequence classifier; with attention when its eager attention is global."""
    plain = HFTextClassifier(hf, pad_id).eval()
    try:
        attentions = getattr(plain._out(probe, True), "attentions", None)
    except (TypeError, ValueError, RuntimeError):
        attentions = None
    if _global_attention(attentions, len(probe), int(probe.shape[1])):
        return HFTextClassifierWithAttention(hf, pad_id)
    return plain
