"""Reading a user's table file into a header and rows of text, refusing what is not a table with one line.

Python's csv module, not pandas: every refusal can name the line or byte it is about (a field count that differs
from the header's on line 12, a byte that is not UTF-8 at offset 4,113), and no text is turned into a missing value
or a number behind the user's back (pandas reads "NA", "None" and "1e5" its own way): the caller decides what is
missing and what is a number, with the rules it documents.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from xaidash.data.errors import DatasetError
from xaidash.data.text_files import decode_text

MAX_COLUMNS = 2000  # the run schema keeps up to 5,000; a one-hot of 2,000 columns is already a wide model
DELIMITERS = (",", ";", "\t")
SNIFF_LINES = 50  # lines read to choose the delimiter
_DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}


@dataclass(frozen=True)
class RawTable:
    """A table as text: the header's names, each row's fields, and the file line each row starts on."""

    header: tuple[str, ...]
    rows: list[list[str]]
    lines: list[int]
    delimiter: str

    @property
    def delimiter_name(self) -> str:
        return _DELIMITER_NAMES[self.delimiter]


def decode(path: Path, raw: bytes) -> str:
    """The file's text (data/text_files.py: the byte-order mark tells UTF-8, UTF-16 or UTF-32, else UTF-8);
    a file that is not text, or holds nothing but blanks, refused with where it fails."""
    text = decode_text(raw, str(path)).text
    if not text.strip():
        raise DatasetError(f"{path} is empty: a table needs a header line (the column names) and one line per row.")
    return text


def _fields_per_line(text: str, delimiter: str) -> list[int]:
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    counts = []
    try:
        for row in reader:
            if any(f.strip() for f in row):
                counts.append(len(row))
            if len(counts) >= SNIFF_LINES:
                break
    except csv.Error:
        return []
    return counts


def sniff_delimiter(text: str) -> str:
    """Comma, semicolon or tab: the one that splits the header into the most columns with every one of the first
    lines holding as many fields as the header; else the one the header holds most of (the reader then says which
    line differs)."""
    head = "\n".join(text.splitlines()[:SNIFF_LINES])
    best, best_width = "", 1
    for d in DELIMITERS:
        counts = _fields_per_line(head, d)
        if counts and counts[0] > best_width and all(c == counts[0] for c in counts):
            best, best_width = d, counts[0]
    if best:
        return best
    header = text.splitlines()[0]
    return max(DELIMITERS, key=lambda d: (header.count(d), d == ","))


def _header(path: Path, names: list[str]) -> tuple[str, ...]:
    header = tuple(n.strip() for n in names)
    if len(header) > MAX_COLUMNS:
        raise DatasetError(
            f"{path} has {len(header):,} columns; at most {MAX_COLUMNS:,} are read: keep the columns that matter."
        )
    blank = [i + 1 for i, n in enumerate(header) if not n]
    if blank:
        raise DatasetError(f"{path}: column {blank[0]} of the header has no name; name every column.")
    seen: dict[str, int] = {}
    for i, name in enumerate(header):
        if name in seen:
            raise DatasetError(
                f"{path}: the column name {name!r} appears twice (columns {seen[name] + 1} and {i + 1}); "
                "column names must be unique."
            )
        seen[name] = i
    return header


def read_table(path: Path) -> RawTable:
    """The file's header and rows (blank lines skipped); DatasetError for a file that is not a table."""
    text = decode(path, path.read_bytes())
    delimiter = sniff_delimiter(text)
    reader = csv.reader(io.StringIO(text), delimiter=delimiter, strict=True)
    rows: list[list[str]] = []
    lines: list[int] = []
    header: tuple[str, ...] | None = None
    try:
        for fields in reader:
            if not any(f.strip() for f in fields):
                continue
            if header is None:
                header = _header(path, fields)
                continue
            if len(fields) != len(header):
                raise DatasetError(
                    f"{path}: line {reader.line_num} has {len(fields)} fields, the header {len(header)} "
                    f"({_DELIMITER_NAMES[delimiter]}-separated): every line needs one value per column."
                )
            rows.append([f.strip() for f in fields])
            lines.append(reader.line_num)
    except csv.Error as err:
        raise DatasetError(
            f'{path}: cannot read line {reader.line_num} as a table row ({err}): is a quote (") left open? Close '
            'it, or write a quote inside a value as two ("").'
        ) from None
    if header is None:
        raise DatasetError(f"{path} is empty: a table needs a header line (the column names) and one line per row.")
    if len(header) < 2:
        raise DatasetError(
            f"{path} has one column ({header[0]!r}) with comma, semicolon and tab tried as separators: a table needs "
            "a target column and at least one column to predict it from."
        )
    if not rows:
        raise DatasetError(f"{path} has a header ({', '.join(header[:10])}) but no rows.")
    return RawTable(header, rows, lines, delimiter)
