"""Every other file a user gives as text is read by the one decoder too (issue 36): a classes file, a concept's text
file and a prompt file saved as UTF-16 with its byte-order mark read as the same file in UTF-8; a binary file is
refused in one line that names the encoding problem and no Python class."""

from __future__ import annotations

from pathlib import Path

import pytest

from xaidash.data.errors import ExplainError, XaidashError
from xaidash.explainers.concepts.sources import _load_text
from xaidash.explainers.language.cli import read_prompt
from xaidash.models.external.options import read_classes_file
from xaidash.models.registry import ModelError

TEXT = "café\nnaïve\nstraße\n"
ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "utf-16-be")  # Python's utf-16 writes a little-endian mark


def saved(tmp_path: Path, name: str, encoding: str) -> Path:
    path = tmp_path / name
    raw = TEXT.encode(encoding)
    if encoding == "utf-16-be":
        raw = b"\xfe\xff" + raw
    path.write_bytes(raw)
    return path


def binary(tmp_path: Path) -> Path:
    path = tmp_path / "picture.bin"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 4)
    return path


def one_line(err: pytest.ExceptionInfo[XaidashError]) -> str:
    text = str(err.value)
    assert "\n" not in text and "Error" not in text and "not a text file" in text
    return text


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_classes_file_in_any_marked_encoding(tmp_path: Path, encoding: str) -> None:
    assert read_classes_file(saved(tmp_path, "classes.txt", encoding)) == ("café", "naïve", "straße")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_concept_text_file_in_any_marked_encoding(tmp_path: Path, encoding: str) -> None:
    examples = _load_text(str(saved(tmp_path, "concept.txt", encoding)), None, 10, 0)  # type: ignore[arg-type]
    assert examples.inputs == ["café", "naïve", "straße"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_prompt_file_in_any_marked_encoding(tmp_path: Path, encoding: str) -> None:
    assert read_prompt(None, str(saved(tmp_path, "prompt.txt", encoding))) == TEXT


def test_binary_files_are_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as err:
        read_classes_file(binary(tmp_path))
    assert one_line(err).startswith("Classes file picture.bin is not a text file")
    with pytest.raises(ExplainError) as err2:
        _load_text(str(binary(tmp_path)), None, 10, 0)  # type: ignore[arg-type]
    one_line(err2)
    with pytest.raises(ExplainError) as err3:
        read_prompt(None, str(binary(tmp_path)))
    one_line(err3)
