"""Notes about a user's data set and error wording (issue 36, item 3): the command line says a note as `warning: ...`
(no source path, no warning class), the pages collect them, and no error line carries an exception's class name."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from PIL import Image

from xaidash.dashboard.cli import main
from xaidash.data.errors import DatasetError, ExplainError, error_text
from xaidash.data.notes import DataNote, collect_notes, warn_notes


def _latin(path: Path) -> Path:
    path.write_bytes(("text,label\n" + "".join(f"café numéro {i},{i % 2}\n" for i in range(12))).encode("latin-1"))
    return path


def test_the_command_line_says_a_note_in_its_own_words(tmp_path: Path) -> None:
    """A fresh process, as a user runs it: Python's own display would print `…/registry.py:148: UserWarning: …`."""
    path = _latin(tmp_path / "latin.csv")
    env = {**os.environ, "XAIDASH_RUNS": str(tmp_path / "runs"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "xaidash.dashboard.cli", "datasets", "--check", f"csv:{path}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"warning: csv {path}: latin.csv is not valid UTF-8; it was read as Latin-1 (check accented characters)."
    ]
    assert f"Texts from {path}: 2 classes" in done.stdout and "1 note(s): see the warning lines above." in done.stdout


def test_each_note_is_one_warning_line_without_a_path_or_class(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = (tmp_path / "pets").resolve()
    for name, colour in (("cats", (200, 0, 0)), ("dogs", (0, 200, 0))):
        (root / name).mkdir(parents=True)
        for i in range(4):
            Image.new("RGB", (9, 9), colour).save(root / name / f"{i}.png")
    os.symlink(".", root / "all")
    os.symlink("cats", root / "cats2")
    assert main(["datasets", "--check", f"imagefolder:{root}?size=8"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"warning: imagefolder {root}: Skipped all: a link to the data set itself (its images would be read twice).",
        f"warning: imagefolder {root}: Skipped cats2: a link to cats, inside the data set (its images would be read "
        "twice).",
    ]
    assert "2 classes" in out and "2 note(s)" in out
    # A data set the command cannot read is the one error line, as before.
    assert main(["datasets", "--check", f"imagefolder:{tmp_path / 'none'}"]) == 2
    assert capsys.readouterr().err == f"error: Image folder {tmp_path / 'none'} does not exist.\n"


def test_the_pages_collect_notes_and_let_other_warnings_pass() -> None:
    with pytest.warns(RuntimeWarning, match="not a note"), collect_notes() as notes:
        warn_notes(["first.", "second."], "csv /d.csv")
        warn_notes(["first."], "csv /d.csv")  # the same note again (a data set read twice): shown once
        warnings.warn("not a note", RuntimeWarning, stacklevel=1)
    assert notes == ["csv /d.csv: first.", "csv /d.csv: second."]
    with pytest.warns(DataNote, match=r"^csv /d\.csv: third\.$"):
        warn_notes(["third."], "csv /d.csv")
    assert issubclass(DataNote, UserWarning)  # code that filters UserWarnings still hears them


def test_error_text_is_our_message_or_plain_words_never_a_class_name() -> None:
    assert error_text(DatasetError("x.csv is empty: add rows.")) == "x.csv is empty: add rows."
    assert error_text(ExplainError("too long"), "LIME") == "too long"
    said = error_text(ValueError("shapes (3,) and\n (4,) differ"), "LIME")
    assert said == (
        "an unexpected error in LIME: shapes (3,) and (4,) differ; try other settings, and report it if it happens "
        "again"
    )
    assert error_text(KeyError("layer"), then="retry") == "an unexpected error: 'layer'; retry"
    assert error_text(AssertionError(), "training").startswith("an unexpected error in training: it gave no message")
    for err in (ValueError("v"), KeyError("k"), RuntimeError("r"), AssertionError()):
        assert type(err).__name__ not in error_text(err, "LIME")
