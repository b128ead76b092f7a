"""A user's file as text: the one decoder every reader of csv and text files uses (tables, series, `csv:` text sets,
the pages' uploads, `--input` files).

A byte-order mark tells the encoding (UTF-8, UTF-16 and UTF-32, little or big endian: what a spreadsheet's "Unicode
text" export writes); without one the file is UTF-8. A file that is not text (a NUL byte: binary data, or UTF-16
without its mark) or that its encoding cannot decode is refused with one line that names the encoding and the byte
where it fails, raised as the caller's own error type so each layer's message reaches the user unchanged.
"""

from __future__ import annotations

import codecs
import unicodedata
from dataclasses import dataclass

from xaidash.data.errors import DatasetError, XaidashError

CHECKED_CHARS = 20_000  # characters of a marked file checked for binary data (a loop in Python: 5 MB would take 1 s)
_SPACE = frozenset("\t\n\r\f\v")
UTF8_HINT = "save it as UTF-8 (in Excel: CSV UTF-8)"
# Longest first: UTF-32 LE's mark begins with UTF-16 LE's.
_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32 LE"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32 BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16 LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16 BE"),
)


def _odd_characters(text: str) -> int:
    """Characters no text holds many of: controls other than white space, format characters (a byte-order mark in
    the middle), private, unassigned and surrogate code points. Bytes that only look like a mark decode to many."""
    return sum(1 for c in text if c not in _SPACE and unicodedata.category(c)[0] == "C")


@dataclass(frozen=True)
class Decoded:
    """A file's text, the encoding it was read with (as a user names it) and, when that was a guess, a note (the
    caller says which file it is about)."""

    text: str
    encoding: str
    note: str = ""


def _marked(raw: bytes, name: str, error: type[XaidashError], hint: str) -> Decoded | None:
    """The text of a file that starts with a byte-order mark, None for one without."""
    for mark, codec, label in _MARKS:
        if not raw.startswith(mark):
            continue
        try:
            text = raw[len(mark) :].decode(codec)
        except UnicodeDecodeError as err:
            at = err.start + len(mark)
            raise error(
                f"{name} starts with a {label} byte-order mark but is not {label} text: the bytes at offset {at:,} "
                f"cannot be decoded ({'a cut-off file?' if err.reason == 'truncated data' else 'binary data?'}); "
                f"{hint}."
            ) from None
        odd = _odd_characters(text[:CHECKED_CHARS])
        if odd > max(2, len(text[:CHECKED_CHARS]) // 10) or "\x00" in text:
            raise error(
                f"{name} is not a text file: read as {label} (its byte-order mark says so), {odd:,} of its first "
                f"{min(len(text), CHECKED_CHARS):,} characters are control, format or unassigned code points "
                f"(binary data?); {hint}."
            )
        return Decoded(text, f"{label} with a byte-order mark")
    return None


def decode_text(
    raw: bytes,
    name: str,
    *,
    error: type[XaidashError] = DatasetError,
    latin1: bool = False,
    hint: str = UTF8_HINT,
) -> Decoded:
    """`raw` as text, read in the encoding its byte-order mark names, else UTF-8. `latin1`: a file that is not
    UTF-8 is read as Latin-1 (every byte is a character there) with a note saying so, instead of refused. `error`
    is raised (with `name` and what to do, `hint`) for a file that is not text."""
    marked = _marked(raw, name, error, hint)
    if marked is not None:
        return marked
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise error(
            f"{name} is not a text file: it holds a NUL byte at offset {nul:,} (binary data, or UTF-16 text without "
            f"a byte-order mark?); {hint}."
        )
    try:
        return Decoded(raw.decode("utf-8"), "UTF-8")
    except UnicodeDecodeError as err:
        if latin1:
            note = "not valid UTF-8; it was read as Latin-1 (check accented characters)."
            return Decoded(raw.decode("latin-1"), "Latin-1", note)
        raise error(
            f"{name} is not UTF-8 text: byte 0x{raw[err.start]:02x} at offset {err.start:,} cannot be decoded; {hint}."
        ) from None
