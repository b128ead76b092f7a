"""Notes about a user's data set (a file skipped, a link left out, an encoding guessed, values filled): raised as a
`DataNote` warning where the data set is read, so every caller hears them without the readers knowing who calls.

The command line prints each as `warning: <note>` (`dashboard/cli.py`); the pages collect them with `collect_notes`
and show them in a warning box. Neither shows Python's form of a warning (a source path, a line number, a class).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


class DataNote(UserWarning):
    """Something a user should know about their data set that does not stop it from being read."""


def warn_notes(notes: Sequence[str], where: str) -> None:
    """Raise each note as a DataNote, prefixed with the data set it is about (`csv /data/people.csv`)."""
    for note in notes:
        warnings.warn(DataNote(f"{where}: {note}"), stacklevel=3)


@contextmanager
def collect_notes() -> Iterator[list[str]]:
    """The DataNotes raised inside the block, as text, in order (each once); other warnings pass on unchanged."""
    found: list[str] = []
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as log:
            warnings.simplefilter("always", DataNote)
            try:
                yield found
            finally:
                caught += log or []
    finally:
        others = [w for w in caught if not issubclass(w.category, DataNote)]
        found += dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, DataNote))
        for w in others:  # after the block, so they reach the caller's own filters and display
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
