"""Image files as model inputs (the image adapter's reading): any format Pillow reads (PNG, JPEG, BMP, WebP, GIF's first frame, TIFF, ...) and any mode
(grey, RGB, palette, alpha, 16-bit, CMYK) become a float tensor (C, H, W) in [0, 1] of the
model's input shape:
- transparency is composited over white (how a browser shows the file);
- grey <-> RGB by replication / ITU-R 601 luma (Pillow's own 'L' conversion);
- 16-bit images are scaled by 65535, not clipped at 255;
- the EXIF orientation of camera JPEGs is applied;
- size: by default the image is scaled so it covers the input and the centre is cropped
  ("crop", like torchvision's Resize + CenterCrop: no distortion, no borders the model never
  saw in training, at the cost of the edges); "letterbox" fits it whole with black borders,
  "stretch" ignores the aspect ratio.
Anything that is not a readable image of a sane size is refused with an ExplainError saying why.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np
import torch
import torchvision.transforms.functional as TF
from PIL import Image, ImageOps, UnidentifiedImageError

from xaidash.data.errors import ExplainError
from xaidash.data.paths import is_file
from xaidash.data.registry import DatasetInfo

Fit = Literal["crop", "letterbox", "stretch"]
FITS: tuple[str, ...] = ("crop", "letterbox", "stretch")

# Refused before any pixel is decoded: a 40-megapixel RGB image is ~120 MB decoded, and a few
# kilobytes of PNG can claim far more (a "decompression bomb"). Pillow's own guard only starts at ~89 MP.
MAX_ASPECT = 100  # longest side over shortest: beyond it no model input fits without a huge resize
MAX_PIXELS = 40_000_000
READABLE = "PNG, JPEG, BMP, WebP, GIF, TIFF"
_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N")

ImageSource = str | Path | bytes | bytearray | memoryview | BinaryIO


def _open_source(source: ImageSource) -> tuple[BinaryIO | Path, str]:
    """A file path or a byte stream Pillow can open, and a name for messages."""
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        if not is_file(path):
            try:
                there = path.exists()
            except (OSError, ValueError):  # a name no file can have
                there = False
            shown = str(path) if len(str(path)) <= 200 else str(path)[:200] + "…"
            raise ExplainError(f"{shown!r} is not a file." if there else f"Image file {shown!r} does not exist.")
        if path.stat().st_size == 0:
            raise ExplainError(f"Image file {path.name!r} is empty (0 bytes).")
        return path, path.name
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif hasattr(source, "getvalue"):  # BytesIO, Streamlit's UploadedFile
        data = source.getvalue()
    elif hasattr(source, "read"):
        data = source.read()
    else:
        raise ExplainError(f"Cannot read an image from a {type(source).__name__}; give a path or bytes.")
    name = getattr(source, "name", None) or "uploaded image"
    if not data:
        raise ExplainError(f"{name} is empty (0 bytes).")
    return io.BytesIO(data), str(name)


def _looks_like_text(head: bytes) -> bool:
    if not head or b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return sum(ch.isprintable() or ch.isspace() for ch in text) / len(text) > 0.95


def _head(fp: BinaryIO | Path, n: int = 512) -> bytes:
    if isinstance(fp, Path):
        with open(fp, "rb") as f:
            return f.read(n)
    pos = fp.tell()
    fp.seek(0)
    data = fp.read(n)
    fp.seek(pos)
    return data


def _open_image(source: ImageSource) -> tuple[Image.Image, str]:
    """Open (header only), refuse non-images and oversized images, then decode the first frame."""
    fp, name = _open_source(source)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            img = Image.open(fp)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ExplainError(
                f"{name} is too large to decode safely (over {MAX_PIXELS // 1_000_000} megapixels)."
            ) from None
        except UnidentifiedImageError:
            what = "a text file, not an image" if _looks_like_text(_head(fp)) else "not an image Pillow can read"
            raise ExplainError(f"{name} is {what}: use {READABLE}.") from None
        except OSError as e:
            raise ExplainError(f"{name} could not be opened as an image ({e}).") from None
        except ValueError as e:  # Pillow's guard: a compressed text chunk that would expand without bound
            raise ExplainError(f"{name} holds metadata too large to decode safely ({e}).") from None
    w, h = img.size
    if min(w, h) and max(w, h) / min(w, h) > MAX_ASPECT:
        # Scaling its short side up to the model's input would allocate max/min times the input's pixels.
        raise ExplainError(
            f"{name} is {w}x{h}: too elongated to fit a model input (aspect ratio over {MAX_ASPECT}:1). Crop it first."
        )
    if w * h > MAX_PIXELS:
        raise ExplainError(
            f"{name} is {w}x{h} = {w * h / 1e6:.1f} megapixels; the limit is {MAX_PIXELS // 1_000_000}. "
            "Downscale it first."
        )
    if w == 0 or h == 0:
        raise ExplainError(f"{name} has no pixels ({w}x{h}).")
    try:
        img.seek(0)  # animated GIF / WebP: the first frame
        img.load()
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise ExplainError(f"{name} is corrupt or truncated ({e}).") from None
    return img, name


def _to_float_array(img: Image.Image, target_size: tuple[int, int]) -> np.ndarray:
    """(H, W) grey or (H, W, 3) RGB float32 in [0, 1]."""
    if img.mode in _SIXTEEN_BIT or img.mode in ("I", "F"):
        a = np.asarray(img, dtype=np.float32)
        if img.mode in _SIXTEEN_BIT or (img.mode == "I" and a.max(initial=0) > 255):
            scale = 65535.0
        elif img.mode == "F" and a.max(initial=0) <= 1.0:
            scale = 1.0
        else:
            scale = 255.0
        return np.clip(a / scale, 0.0, 1.0)
    has_alpha = img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or (img.mode == "P" and "transparency" in img.info)
    if has_alpha:
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        img = Image.alpha_composite(white, rgba).convert("RGB")
    elif img.mode in ("1", "L"):
        img = img.convert("L")
    else:  # RGB, P, CMYK, YCbCr, LAB, HSV, ...
        img = img.convert("RGB")
    # Box-reduce very large images first: cheaper, and then the float copy stays small.
    factor = min(img.width // (2 * target_size[1]), img.height // (2 * target_size[0]))
    if factor >= 2:
        img = img.reduce(factor)
    return np.asarray(img, dtype=np.float32) / 255.0


def _to_channels(a: np.ndarray, channels: int) -> np.ndarray:
    """(C, H, W) with the model's channel count."""
    if channels == 1:
        if a.ndim == 3:  # ITU-R 601-2 luma, as Pillow's convert('L')
            a = a @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
        return a[None]
    if channels == 3:
        return np.repeat(a[None], 3, axis=0) if a.ndim == 2 else a.transpose(2, 0, 1)
    raise ExplainError(f"Only 1- and 3-channel models can read image files; this one takes {channels} channels.")


def _resize(x: torch.Tensor, size: tuple[int, int], fit: str) -> torch.Tensor:
    h, w = size
    ih, iw = x.shape[-2:]
    if (ih, iw) == (h, w):
        return x
    if fit == "stretch":
        return TF.resize(x, [h, w], antialias=True)
    scale = max(h / ih, w / iw) if fit == "crop" else min(h / ih, w / iw)
    nh, nw = max(1, round(ih * scale)), max(1, round(iw * scale))
    x = TF.resize(x, [nh, nw], antialias=True)
    if fit == "crop":
        return TF.center_crop(x, [h, w])
    top, left = (h - nh) // 2, (w - nw) // 2
    return TF.pad(x, [left, top, w - nw - left, h - nh - top], fill=0.0)


def load_image_and_note(source: ImageSource, info: DatasetInfo, fit: str) -> tuple[torch.Tensor, str]:
    """The image as (C, H, W) in [0, 1] shaped for `info`'s models, and a note on what was read (name, format, size)."""
    if fit not in FITS:
        raise ExplainError(f"fit must be one of {', '.join(FITS)}, got {fit!r}.")
    if len(info.input_shape) != 3:
        raise ExplainError(f"Data set {info.name} is not an image data set; it cannot read image files.")
    c, h, w = info.input_shape
    img, name = _open_image(source)
    note = f"{name} ({img.format or 'image'} {img.width}x{img.height} {img.mode})"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow warns on odd EXIF blocks it can still read
        img = ImageOps.exif_transpose(img)
    arr = _to_channels(_to_float_array(img, (h, w)), c)
    x = _resize(torch.from_numpy(np.ascontiguousarray(arr)), (h, w), fit).clamp(0.0, 1.0)
    return x.contiguous(), note


def load_image(source: ImageSource, info: DatasetInfo, fit: Fit = "crop") -> torch.Tensor:
    """An image file, bytes or file object as a float tensor (C, H, W) in [0, 1] shaped for `info`'s models."""
    return load_image_and_note(source, info, fit)[0]
