"""The one PNG encoder: every PNG xaidash writes or offers for download (maps, colour bars, inputs, reports,
thumbnails) is encoded here, with fixed settings and no metadata, so the same image gives the same bytes in
the CLI's folder, the dashboard's downloads and the HTML report."""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
from PIL import Image

from xaidash.explainers.figures.render import image_hwc

INPUT_TAG = "xaidash_input"  # Image.info key: the picture is an input as the model saw it (no colour scale)
COMPRESS_LEVEL = 6  # zlib level; no `optimize` (its search is slower and changes nothing a reader sees)


def png_bytes(image: Image.Image) -> bytes:
    """`image` as PNG bytes: RGB (or L/RGBA as given), zlib level 6, no text chunks or timestamps."""
    if image.mode not in ("RGB", "RGBA", "L"):
        image = image.convert("RGB")
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=COMPRESS_LEVEL, optimize=False)
    return buf.getvalue()


def data_uri(png: bytes) -> str:
    """PNG bytes as a `data:image/png;base64,...` URI (for self-contained HTML)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def input_image(image01: Any) -> Image.Image:
    """An input image (C, H, W) or (H, W, C) in [0, 1] as RGB at its own size: the pixels the model saw (marked
    with `INPUT_TAG`, which resizing and copies keep, so the page tests can tell it from a colour-encoded map)."""
    img = Image.fromarray((image_hwc(image01) * 255.0 + 0.5).astype(np.uint8))
    img.info[INPUT_TAG] = True
    return img


def input_png(image01: Any) -> bytes:
    """`input_image` as PNG bytes."""
    return png_bytes(input_image(image01))
