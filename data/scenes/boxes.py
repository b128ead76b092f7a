"""Boxes from masks: the one rule every scene source uses, so generated scenes, COCO files and mask folders agree on
what a box is (the tight box of the visible pixels, x1 and y1 exclusive)."""

from __future__ import annotations

import numpy as np
import torch

from xaidash.data.scenes.types import SceneTarget


def boxes_of_masks(masks: torch.Tensor) -> torch.Tensor:
    """(N, 4) float32 x0, y0, x1, y1 of each (H, W) bool mask's pixels, x1/y1 one past the last pixel; an empty mask
    gets (0, 0, 0, 0)."""
    array: np.ndarray = np.asarray(
        masks.detach().cpu().numpy(), dtype=bool
    )  # NumPy: several times faster on small masks
    n = array.shape[0]
    out = np.zeros((n, 4), dtype=np.float32)
    if n == 0:
        return torch.from_numpy(out)
    rows: np.ndarray = np.any(array, axis=2)  # (N, H): which rows hold a pixel
    cols: np.ndarray = np.any(array, axis=1)  # (N, W)
    out[:, 0] = cols.argmax(axis=1)
    out[:, 1] = rows.argmax(axis=1)
    out[:, 2] = cols.shape[1] - cols[:, ::-1].argmax(axis=1)
    out[:, 3] = rows.shape[1] - rows[:, ::-1].argmax(axis=1)
    out[~np.any(rows, axis=1)] = 0.0
    return torch.from_numpy(out)


def target_from_masks(masks: torch.Tensor, labels: torch.Tensor) -> SceneTarget:
    """A scene's ground truth from its visible instance masks (N, H, W) bool and labels (N,): tight boxes."""
    masks = masks.to(torch.bool)
    return SceneTarget(boxes_of_masks(masks), labels.to(torch.int64), masks)
