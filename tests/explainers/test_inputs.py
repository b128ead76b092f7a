"""load_image for every common format and mode, refusals of bad input, and resolve_input."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

import xaidash.explainers  # noqa: F401  (registers data sets, models and methods)
from xaidash.data.registry import DatasetInfo, get_info
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers.inputs import resolve_input, resolve_sample
from xaidash.explainers.modalities.image_files import MAX_PIXELS, load_image
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import build_model, get_spec

RGB32 = DatasetInfo("rgb", "image", ("a", "b"), (3, 32, 32), (0.5,) * 3, (0.25,) * 3)
GREY28 = DatasetInfo("grey", "image", ("a", "b"), (1, 28, 28), (0.5,), (0.25,))


def _bytes(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def _solid(mode: str, colour, size=(40, 30)) -> Image.Image:
    return Image.new(mode, size, colour)


@pytest.mark.parametrize(
    "mode,colour,fmt,expected_rgb",
    [
        ("RGB", (255, 0, 0), "PNG", (1.0, 0.0, 0.0)),
        ("L", 128, "PNG", (128 / 255,) * 3),
        ("1", 1, "PNG", (1.0, 1.0, 1.0)),
        ("RGBA", (0, 0, 255, 255), "PNG", (0.0, 0.0, 1.0)),
        ("RGBA", (0, 0, 0, 0), "PNG", (1.0, 1.0, 1.0)),  # fully transparent: composited over white
        ("LA", (0, 128), "PNG", (0.5, 0.5, 0.5)),  # black at half opacity over white
        ("RGB", (0, 255, 0), "BMP", (0.0, 1.0, 0.0)),
        ("RGB", (0, 0, 255), "WEBP", (0.0, 0.0, 1.0)),
        ("RGB", (255, 255, 0), "TIFF", (1.0, 1.0, 0.0)),
        ("L", 200, "JPEG", (200 / 255,) * 3),
    ],
)
def test_formats_and_modes_become_rgb_in_unit_range(mode, colour, fmt, expected_rgb):
    data = _bytes(_solid(mode, colour), fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    x = load_image(data, RGB32)
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32
    centre = x[:, 16, 16].numpy()
    np.testing.assert_allclose(centre, expected_rgb, atol=0.03)


def test_jpeg_rgb_and_cmyk():
    rgb = load_image(_bytes(_solid("RGB", (255, 0, 0)), "JPEG", quality=95), RGB32)
    assert rgb[0].mean() > 0.9 and rgb[1:].mean() < 0.1
    cmyk = load_image(_bytes(_solid("CMYK", (0, 255, 255, 0)), "JPEG", quality=95), RGB32)  # no cyan, full M+Y: red
    assert cmyk.shape == (3, 32, 32)
    assert cmyk[0].mean() > 0.8 and cmyk[1:].mean() < 0.2


def test_palette_with_and_without_transparency():
    p = _solid("RGB", (0, 255, 0)).convert("P")
    np.testing.assert_allclose(load_image(_bytes(p, "PNG"), RGB32)[:, 5, 5], (0, 1, 0), atol=0.02)
    pt = Image.new("P", (20, 20), 0)
    pt.putpalette([0, 0, 0] * 256)
    pt.info["transparency"] = 0  # palette index 0 is transparent -> white
    x = load_image(_bytes(pt, "PNG", transparency=0), RGB32)
    np.testing.assert_allclose(x[:, 5, 5], (1, 1, 1), atol=0.02)


def test_sixteen_bit_grey_is_scaled_not_clipped():
    a = np.full((30, 30), 32768, dtype=np.uint16)
    a[:, :15] = 65535
    img = Image.fromarray(a)
    assert img.mode.startswith("I")
    x = load_image(_bytes(img, "PNG"), GREY28, fit="stretch")
    assert x.shape == (1, 28, 28)
    assert x[0, 14, 2] == pytest.approx(1.0, abs=1e-3)
    assert x[0, 14, 25] == pytest.approx(32768 / 65535, abs=1e-3)


def test_gif_first_frame_is_used():
    frames = [_solid("RGB", (255, 0, 0), (16, 16)), _solid("RGB", (0, 0, 255), (16, 16))]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=100)
    x = load_image(buf.getvalue(), RGB32)
    assert x[0].mean() > 0.9 and x[2].mean() < 0.1


def test_rgb_to_grey_uses_luma():
    x = load_image(_bytes(_solid("RGB", (255, 0, 0)), "PNG"), GREY28)
    assert x.shape == (1, 28, 28)
    assert x.mean().item() == pytest.approx(0.299, abs=0.01)


def test_fit_crop_letterbox_stretch():
    # Wide image: left half black, right half white; an 80x20 image into 32x32.
    a = np.zeros((20, 80), dtype=np.uint8)
    a[:, 40:] = 255
    data = _bytes(Image.fromarray(a), "PNG")
    crop = load_image(data, RGB32, fit="crop")
    letter = load_image(data, RGB32, fit="letterbox")
    stretch = load_image(data, RGB32, fit="stretch")
    # crop keeps the centre: rows are full height of content, no black borders top/bottom on the white side
    assert crop[0, 0, -1] > 0.9 and crop[0, -1, -1] > 0.9
    # letterbox: the whole image scaled to 32x8, black bars above and below
    assert letter[0, 0, -1] < 0.05 and letter[0, 16, -1] > 0.9
    assert stretch[0, 0, -1] > 0.9 and stretch[0, 0, 0] < 0.05
    with pytest.raises(ExplainError, match="fit"):
        load_image(data, RGB32, fit="zoom")  # type: ignore[arg-type]


def test_large_image_and_path_and_file_object(tmp_path):
    img = Image.fromarray((np.random.default_rng(0).random((600, 900, 3)) * 255).astype(np.uint8))
    path = tmp_path / "photo.jpg"
    img.save(path)
    assert load_image(path, RGB32).shape == (3, 32, 32)
    assert load_image(str(path), RGB32).shape == (3, 32, 32)
    assert load_image(io.BytesIO(path.read_bytes()), RGB32).shape == (3, 32, 32)


def test_exif_orientation_is_applied():
    a = np.zeros((20, 40, 3), dtype=np.uint8)
    a[:, :20] = 255  # left half white
    img = Image.fromarray(a)
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display": the white half ends up on top
    x = load_image(_bytes(img, "JPEG", exif=exif.tobytes(), quality=95), RGB32, fit="stretch")
    assert x[0, :8].mean() > 0.8 and x[0, -8:].mean() < 0.2


# ---- refusals ----------------------------------------------------------------


def test_missing_empty_and_directory(tmp_path):
    with pytest.raises(ExplainError, match="does not exist"):
        load_image(tmp_path / "nope.png", RGB32)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(ExplainError, match="empty"):
        load_image(empty, RGB32)
    with pytest.raises(ExplainError, match="empty"):
        load_image(b"", RGB32)
    with pytest.raises(ExplainError, match="not a file"):
        load_image(tmp_path, RGB32)


def test_text_file_and_random_bytes_are_refused(tmp_path):
    txt = tmp_path / "notes.png"
    txt.write_text("this is not a picture\nonly words\n")
    with pytest.raises(ExplainError, match="text file"):
        load_image(txt, RGB32)
    junk = bytes(np.random.default_rng(1).integers(0, 256, 2000, dtype=np.uint8))
    with pytest.raises(ExplainError, match="not an image"):
        load_image(junk, RGB32)


def test_truncated_image_is_refused():
    data = _bytes(Image.fromarray((np.random.default_rng(2).random((64, 64, 3)) * 255).astype(np.uint8)), "PNG")
    with pytest.raises(ExplainError, match=r"corrupt|truncated|could not"):
        load_image(data[: len(data) // 2], RGB32)


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height, with one tiny (invalid) data chunk: never decodable."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")
    )


def test_decompression_bomb_is_refused_before_decoding():
    side = int(np.sqrt(MAX_PIXELS)) + 100  # just over the limit, under Pillow's own threshold
    with pytest.raises(ExplainError, match="megapixels"):
        load_image(_png_header_only(side, side), RGB32)
    with pytest.raises(ExplainError, match=r"too large|megapixels"):
        load_image(_png_header_only(20000, 20000), RGB32)  # beyond Pillow's bomb error too


def test_non_image_dataset_is_refused():
    text_info = DatasetInfo("t", "text", ("a", "b"))
    with pytest.raises(ExplainError, match="not an image"):
        load_image(_bytes(_solid("RGB", (0, 0, 0)), "PNG"), text_info)


# ---- resolve_input ---------------------------------------------------------


@pytest.fixture
def shapes_bundle() -> ModelBundle:
    info = get_info("shapes")
    return ModelBundle(build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu"))


@pytest.fixture
def text_bundle() -> ModelBundle:
    info = get_info("cues")
    spec = get_spec("text_cnn")
    vocab = WordVocab.build(["the movie was good", "the plot was bad"])
    model = spec.build(info, vocab_size=len(vocab), pad_id=vocab.pad_id).eval()
    return ModelBundle(model, spec, info, torch.device("cpu"), tokenizer=vocab)


def test_resolve_dataset_samples(shapes_bundle):
    from xaidash.data.registry import load_split

    test, train = load_split("shapes", "test"), load_split("shapes", "train")
    raw, label, desc = resolve_input("dataset:3", shapes_bundle)
    assert torch.equal(raw, test.images[3]) and label == int(test.labels[3])
    assert "shapes test #3" in desc and shapes_bundle.info.classes[label] in desc
    sample = resolve_sample("dataset:train:5", shapes_bundle)
    assert torch.equal(sample.raw, train.images[5]) and sample.label == int(train.labels[5])
    np.testing.assert_array_equal(sample.mask, train.masks[5].numpy())
    with pytest.raises(ExplainError, match="out of range"):
        resolve_input(f"dataset:{len(test)}", shapes_bundle)
    with pytest.raises(ExplainError, match="dataset:INDEX"):
        resolve_input("dataset:abc", shapes_bundle)


def test_row_n_is_a_test_sample_of_every_kind_of_input(shapes_bundle, text_bundle):
    """row:N (a table's word) names the same sample as test:N for images and texts too; row:train:N the train split."""
    for bundle in (shapes_bundle, text_bundle):
        for alias, same in (("row:4", "test:4"), ("row:train:2", "dataset:train:2")):
            a, b = resolve_sample(alias, bundle), resolve_sample(same, bundle)
            assert a.description == b.description and a.label == b.label
            assert a.raw == b.raw if isinstance(a.raw, str) else torch.equal(a.raw, b.raw)
    with pytest.raises(ExplainError, match=r"^row:9999 is out of range: the test split of shapes has \d+ samples\.$"):
        resolve_input("row:9999", shapes_bundle)
    with pytest.raises(ExplainError, match=r"^'row:-1': write row:INDEX or row:train:INDEX"):
        resolve_input("row:-1", shapes_bundle)


def test_resolve_image_path(shapes_bundle, tmp_path):
    path = tmp_path / "in.png"
    _solid("RGB", (10, 200, 30), (64, 48)).save(path)
    raw, label, desc = resolve_input(str(path), shapes_bundle)
    assert raw.shape == (3, 32, 32) and label is None and "in.png" in desc and "64x48" in desc
    with pytest.raises(ExplainError, match="does not exist"):
        resolve_input(str(tmp_path / "missing.png"), shapes_bundle)


def test_resolve_text(text_bundle, tmp_path):
    raw, label, desc = resolve_input("the acting was superb", text_bundle)
    assert raw == "the acting was superb" and label is None and desc.startswith("text")
    f = tmp_path / "review.txt"
    f.write_text("a dull and tedious film\n", encoding="utf-8")
    raw, _, desc = resolve_input(str(f), text_bundle)
    assert raw.strip() == "a dull and tedious film" and "review.txt" in desc
    with pytest.raises(ExplainError, match="empty"):
        resolve_input("   ", text_bundle)
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n")
    with pytest.raises(ExplainError, match="empty"):
        resolve_input(str(blank), text_bundle)
    with pytest.raises(ExplainError, match="does not exist"):
        resolve_input(str(tmp_path / "nope.txt"), text_bundle)
    sample = resolve_sample("dataset:0", text_bundle)
    assert isinstance(sample.raw, str) and sample.label in (0, 1) and sample.rationale
