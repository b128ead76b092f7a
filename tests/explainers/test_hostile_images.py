"""Hostile image files (issue 12): a PNG whose text chunk is a decompression bomb and a 1 x 5,000,000 image
each get one clear message, without exhausting memory."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from xaidash.data.registry import get_info
from xaidash.explainers.modalities.image_files import load_image
from xaidash.explainers.params import ExplainError

pytestmark = pytest.mark.faults


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_with_text_bomb() -> bytes:
    """A valid 8x8 PNG plus a zTXt chunk whose 100 MB of text compresses to about 100 KB."""
    buf = io.BytesIO()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(buf, format="PNG")
    png = buf.getvalue()
    bomb = _chunk(b"zTXt", b"Comment\x00\x00" + zlib.compress(b"A" * 100_000_000, 9))
    return png[:33] + bomb + png[33:]  # right after the IHDR chunk


def test_a_text_chunk_bomb_gets_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(png_with_text_bomb())
    with pytest.raises(ExplainError, match=r"bomb\.png holds metadata too large"):
        load_image(path, get_info("shapes"))


def test_an_extremely_elongated_image_is_refused_before_resizing(tmp_path: Path) -> None:
    path = tmp_path / "line.png"
    Image.new("L", (5_000_000, 1)).save(path)
    with pytest.raises(ExplainError, match=r"5000000x1: too elongated"):
        load_image(path, get_info("shapes"))


def test_ordinary_proportions_still_load(tmp_path: Path) -> None:
    path = tmp_path / "wide.png"
    Image.new("RGB", (320, 40), (200, 30, 30)).save(path)
    assert load_image(path, get_info("shapes")).shape == (3, 32, 32)
