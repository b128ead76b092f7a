"""Small image helpers for display: tensors in [0, 1] to PIL images at a readable size."""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from PIL import Image

from xaidash.explainers.figures.render import image_hwc


def to_pil(image01: Any, min_side: int = 96) -> Image.Image:
    """An image (C, H, W) or (H, W, C) in [0, 1] as RGB, enlarged by a whole factor (nearest) to >= min_side px."""
    img = Image.fromarray((image_hwc(image01) * 255.0 + 0.5).astype(np.uint8))
    short = min(img.size)
    if short < min_side:
        f = math.ceil(min_side / short)
        img = img.resize((img.width * f, img.height * f), Image.Resampling.NEAREST)
    return img


def png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()
