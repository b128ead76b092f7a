"""Boxes from masks: the one rule every scene source uses, so generated scenes, COCO files and mask folders agree on
what a box is (the tight box of the visible pixels, x1 and y1 exclusive)."""

from __future__ import annotations

import torch

from xaidash.data.scenes.types import SceneTarget


def boxes_of_masks(masks: torch.Tensor) -> torch.Tensor:
    """(N, 4) float32 x0, y0, x1, y1 of each (H, W) bool mask's pixels, x1/y1 one past the last pixel; an empty mask
    gets (0, 0, 0, 0)."""
    n = int(masks.shape[0])
    out = torch.zeros(n, 4, dtype=torch.float32)
    if n == 0:
        return out
    rows = masks.any(dim=2)  # (N, H): which rows hold a pixel
    cols = masks.any(dim=1)  # (N, W)
    h, w = rows.shape[1], cols.shape[1]
    ys = torch.arange(h)
    xs = torch.arange(w)
    big = max(h, w) + 1
    out[:, 0] = torch.where(cols, xs, big).min(dim=1).values.float()
    out[:, 1] = torch.where(rows, ys, big).min(dim=1).values.float()
    out[:, 2] = torch.where(cols, xs, -1).max(dim=1).values.float() + 1
    out[:, 3] = torch.where(rows, ys, -1).max(dim=1).values.float() + 1
    out[~masks.flatten(1).any(dim=1)] = 0.0
    return out


def target_from_masks(masks: torch.Tensor, labels: torch.Tensor) -> SceneTarget:
    """A scene's ground truth from its visible instance masks (N, H, W) bool and labels (N,): tight boxes."""
    masks = masks.to(torch.bool)
    return SceneTarget(boxes_of_masks(masks), labels.to(torch.int64), masks)
