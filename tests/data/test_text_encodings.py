"""Encodings of a user's csv and text files (issue 36, item 2): UTF-16 LE and BE and UTF-8 with their byte-order mark
read as the same file saved as UTF-8 is read (tables, series, `csv:` text sets, `--input` files); a file that is not
text gets one line that names the encoding problem, from the command line too."""

from __future__ import annotations

import codecs
from pathlib import Path

import numpy as np
import pytest
import torch

import xaidash.data  # noqa: F401  (registers every data set)
from xaidash.dashboard.cli import main
from xaidash.data.errors import DatasetError, ExplainError
from xaidash.data.registry import get_source
from xaidash.data.text_files import decode_text
from xaidash.explainers.modalities.series_read import csv_rows
from xaidash.explainers.modalities.text import read_text_file

# What a spreadsheet's "Unicode text" export and its "CSV UTF-8" write: the mark, then the text in that encoding.
ENCODINGS = {
    "utf-16-le": (codecs.BOM_UTF16_LE, "utf-16-le"),
    "utf-16-be": (codecs.BOM_UTF16_BE, "utf-16-be"),
    "utf-8-bom": (codecs.BOM_UTF8, "utf-8"),
    "utf-32-le": (codecs.BOM_UTF32_LE, "utf-32-le"),
}


def _save(path: Path, text: str, encoding: str) -> Path:
    mark, codec = ENCODINGS[encoding]
    path.write_bytes(mark + text.encode(codec))
    return path


def _texts() -> str:
    return "text,label\n" + "".join(
        f"crème brûlée n°{i} — très {'bon' if i % 2 else 'mauvais'},{i % 2}\n" for i in range(30)
    )


def _table() -> str:
    rng = np.random.default_rng(2)
    return "size,colour,label\n" + "".join(
        f"{rng.normal(5, 2):.3f},{['rouge', 'vert', 'bleu'][i % 3]},{'oui' if i % 2 else 'non'}\n" for i in range(60)
    )


def _series() -> str:
    rng = np.random.default_rng(3)
    lines = ["label," + ",".join(f"t{k}" for k in range(8))]
    for i in range(30):
        slope = (1.0, -1.0, 0.0)[i % 3]
        lines.append(
            f"{['montée', 'descente', 'plat'][i % 3]},"
            + ",".join(f"{slope * k + rng.normal(0, 0.2):.4f}" for k in range(8))
        )
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-8-bom"])
def test_a_text_set_saved_with_a_byte_order_mark_reads_as_its_utf8_twin(tmp_path: Path, encoding: str) -> None:
    """The issue's case: 'Unicode text' from a spreadsheet was `has no text column ... ÿþt e x t`."""
    reference = tmp_path / "plain.csv"
    reference.write_text(_texts(), encoding="utf-8")
    marked = _save(tmp_path / f"{encoding}.csv", _texts(), encoding)
    want, got = get_source(f"csv:{reference}"), get_source(f"csv:{marked}")
    assert got.info.classes == want.info.classes == ("0", "1")
    for split in ("train", "test"):
        a, b = want.load(split), got.load(split)
        assert b.texts == a.texts and torch.equal(b.labels, a.labels)
    assert "crème brûlée n°3 — très bon" in got.load("train").texts + got.load("test").texts
    assert not getattr(got, "notes", ())  # the mark told the encoding: nothing was guessed


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-8-bom"])
def test_a_table_saved_with_a_byte_order_mark_reads_as_its_utf8_twin(tmp_path: Path, encoding: str) -> None:
    reference = tmp_path / "plain.csv"
    reference.write_text(_table(), encoding="utf-8")
    marked = _save(tmp_path / f"{encoding}.csv", _table(), encoding)
    want, got = get_source(f"csv:{reference}?target=label"), get_source(f"csv:{marked}?target=label")
    assert [c.name for c in got.info.columns] == ["size", "colour"]
    assert got.info.columns[1].categories == ("bleu", "rouge", "vert")
    assert got.info.classes == want.info.classes == ("non", "oui")
    for split in ("train", "test"):
        a, b = want.load(split), got.load(split)
        assert torch.equal(a.rows, b.rows) and torch.equal(a.labels, b.labels)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-8-bom"])
def test_a_series_file_saved_with_a_byte_order_mark_reads_as_its_utf8_twin(tmp_path: Path, encoding: str) -> None:
    reference = tmp_path / "plain.csv"
    reference.write_text(_series(), encoding="utf-8")
    marked = _save(tmp_path / f"{encoding}.csv", _series(), encoding)
    want = get_source(f"csv:{reference}?modality=series&label=label")
    got = get_source(f"csv:{marked}?modality=series&label=label")
    assert got.info.classes == want.info.classes == ("descente", "montée", "plat")
    for split in ("train", "test"):
        a, b = want.load(split), got.load(split)
        assert torch.equal(a.series, b.series) and torch.equal(a.labels, b.labels)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-8-bom", "utf-32-le"])
def test_input_files_with_a_byte_order_mark_read_as_written(tmp_path: Path, encoding: str) -> None:
    text = "Ça commence bien — puis ça déraille.\nUne deuxième ligne."
    assert read_text_file(_save(tmp_path / "in.txt", text, encoding)) == text
    rows = "1.5,2,3\n4,5,6.25\n"
    assert csv_rows(_save(tmp_path / "rows.csv", rows, encoding)) == [["1.5", "2", "3"], ["4", "5", "6.25"]]


def test_the_decoder_names_the_encoding_it_read_and_where_a_file_fails() -> None:
    assert decode_text("a,b\n".encode("utf-16"), "f").encoding.startswith("UTF-16")
    assert decode_text(codecs.BOM_UTF16_BE + "日本語".encode("utf-16-be"), "f").text == "日本語"
    assert decode_text(b"a,b\n", "f").encoding == "UTF-8"
    latin = decode_text(b"caf\xe9", "f.csv", latin1=True)
    assert (latin.text, latin.encoding) == ("café", "Latin-1") and "read as Latin-1" in latin.note
    cases = [
        # UTF-16 without its mark: the zero bytes of ASCII letters show it is not UTF-8 text.
        (
            "a,b\n".encode("utf-16-le"),
            r"f\.csv is not a text file: it holds a NUL byte at offset 1 \(binary data, or UTF-16",
        ),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", r"not a text file: it holds a NUL byte at offset 8"),
        (b"x,y\ncaf\xe9\n", r"f\.csv is not UTF-8 text: byte 0xe9 at offset 7 cannot be decoded; save it as UTF-8"),
        # A cut-off UTF-16 file (an odd number of bytes), a lone surrogate: the mark promised text it does not hold.
        (
            codecs.BOM_UTF16_LE + "ab".encode("utf-16-le") + b"\x00",
            r"starts with a UTF-16 LE byte-order mark but is not UTF-16 LE text: the bytes at offset 6 cannot be decoded \(a cut-off file\?\)",
        ),
        (
            codecs.BOM_UTF16_LE + b"a\x00\x00\xd8b\x00",
            r"not UTF-16 LE text: the bytes at offset 4 cannot be decoded \(binary data\?\)",
        ),
        # Bytes that only look like a mark: valid UTF-16 code units, but half of them format characters.
        (
            b"\xff\xfe\x00\x81" * 50,
            r"is not a text file: read as UTF-16 LE \(its byte-order mark says so\), 49 of its first 99",
        ),
        (codecs.BOM_UTF16_LE + "ab\x00c".encode("utf-16-le"), r"is not a text file: read as UTF-16 LE"),
    ]
    for raw, says in cases:
        with pytest.raises(DatasetError, match=says):
            decode_text(raw, "f.csv")
    with pytest.raises(ExplainError, match="upload it again"):
        decode_text(b"\x00", "up.txt", error=ExplainError, hint="upload it again")


def test_random_bytes_behind_a_mark_are_refused_as_not_text() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        raw = codecs.BOM_UTF16_LE + rng.integers(0, 256, 4000, dtype=np.uint8).tobytes()
        with pytest.raises(DatasetError, match="UTF-16 LE"):
            decode_text(raw, "noise.csv")


@pytest.mark.parametrize(
    ("content", "options", "says"),
    [
        (b"\x00\x01\x02binary\xff" * 40, "", r"not a text file: it holds a NUL byte at offset 0"),
        ("text,label\nhé,1\n".encode("utf-16-le"), "", r"NUL byte at offset 1 \(binary data, or UTF-16 text without"),
        (b"\xff\xfe\x00\x81" * 50, "?target=y", r"read as UTF-16 LE \(its byte-order mark says so\)"),
        (codecs.BOM_UTF16_BE + b"\x00a\x00", "?modality=series&label=y", r"not UTF-16 BE text: the bytes at offset"),
    ],
    ids=["binary-text-set", "utf16-no-mark", "fake-mark-table", "cut-off-series"],
)
def test_a_file_that_is_not_text_is_one_line_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, options: str, says: str
) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=says):
        get_source(f"csv:{path}{options}")
    code = main(["train", "--dataset", f"csv:{path}{options}", "--model", "text_cnn", "--epochs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
