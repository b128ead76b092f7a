"""Normalisation between [0, 1] images and what a model sees."""

from __future__ import annotations

import torch

from xaidash.data.registry import DatasetInfo


def _stats(info: DatasetInfo, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    c = info.input_shape[0]
    mean = torch.tensor(info.mean or (0.0,) * c, dtype=like.dtype, device=like.device).view(-1, 1, 1)
    std = torch.tensor(info.std or (1.0,) * c, dtype=like.dtype, device=like.device).view(-1, 1, 1)
    return mean, std


def normalize(images: torch.Tensor, info: DatasetInfo) -> torch.Tensor:
    """(x - mean) / std per channel, for images (..., C, H, W) in [0, 1]."""
    mean, std = _stats(info, images)
    return (images - mean) / std


def denormalize(images: torch.Tensor, info: DatasetInfo) -> torch.Tensor:
    """Inverse of `normalize`: back to [0, 1] pixel space."""
    mean, std = _stats(info, images)
    return images * std + mean
