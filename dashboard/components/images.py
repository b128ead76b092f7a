"""Small image helpers for display: tensors in [0, 1] to PIL images at a readable size. PNG bytes come from
the one encoder, `xaidash.explainers.figures.png.png_bytes`."""

from __future__ import annotations

import math
from typing import Any

from PIL import Image

from xaidash.explainers.figures.png import input_image


def to_pil(image01: Any, min_side: int = 96) -> Image.Image:
    """An image (C, H, W) or (H, W, C) in [0, 1] as RGB, enlarged by a whole factor (nearest) to >= min_side px."""
    img = input_image(image01)
    short = min(img.size)
    if short < min_side:
        f = math.ceil(min_side / short)
        img = img.resize((img.width * f, img.height * f), Image.Resampling.NEAREST)
    return img
