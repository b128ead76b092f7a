"""The pages say a data set's notes in a warning box and an unexpected error in plain words (issue 36, item 3): a
run trained on a Latin-1 csv shows the guess beside the run on every page; the Train page boxes the notes of a data
set typed by name; no message carries a source path or an exception's class name."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_pages import assert_ok, make_app, open_page, open_run_page, texts
from streamlit.testing.v1 import AppTest

from xaidash.dashboard.components.train_form import OWN, OWN_KEY
from xaidash.models.runs.store import Run
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train


def _latin(path: Path) -> Path:
    rows = "".join(f"un film {'très bon' if i % 2 else 'pénible'} numéro {i},{i % 2}\n" for i in range(40))
    path.write_bytes(("text,label\n" + rows).encode("latin-1"))
    return path


def _said(at: AppTest) -> str:
    return " | ".join(texts(at.warning) + texts(at.error) + texts(at.info) + texts(at.caption))


@pytest.fixture(scope="module")
def latin_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    """A text run trained on a Latin-1 csv (in its own runs root)."""
    folder = tmp_path_factory.mktemp("latin")
    path = _latin(folder / "reviews.csv")
    with pytest.MonkeyPatch.context() as mp, pytest.warns(UserWarning, match="read as Latin-1"):
        mp.setenv("XAIDASH_RUNS", str(folder / "runs"))
        result = train(
            TrainConfig(dataset=f"csv:{path}", model="text_cnn", epochs=1, batch_size=16, device="cpu", seed=0)
        )
    assert result.ok, result.error
    return Run(result.run.path), path


def test_a_run_on_a_latin1_csv_shows_the_guess_in_a_warning_box(latin_run, monkeypatch) -> None:
    at = open_run_page(latin_run[0], "explain", monkeypatch)
    assert_ok(at)
    boxed = [w for w in texts(at.sidebar.warning) if "UTF-8" in w]  # beside the run's own warnings (near chance)
    assert boxed == ["reviews.csv is not valid UTF-8; it was read as Latin-1 (check accented characters)."], boxed
    assert "UserWarning" not in _said(at) and ".py:" not in _said(at)


def test_text_uploads_in_utf16_are_read_and_binary_ones_named(latin_run, monkeypatch) -> None:
    at = open_run_page(latin_run[0], "explain", monkeypatch)
    at.radio(key="explain_source").set_value("Upload .txt / .csv").run()
    upload = at.file_uploader(key="explain_textfile")
    upload.set_value(("bin.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "text/plain")).run()
    assert any(
        e == "bin.txt is not a text file: it holds a NUL byte at offset 8 (binary data, or UTF-16 text without a "
        "byte-order mark?); save it as UTF-8 and upload it again."
        for e in texts(at.error)
    ), texts(at.error)
    text = "un film très bon numéro 3"
    at.file_uploader(key="explain_textfile").set_value(("u16.txt", text.encode("utf-16"), "text/plain")).run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    shown = " ".join(texts(at.markdown))
    assert "xai-tokens" in shown and "très" in shown


def test_the_train_page_boxes_the_notes_of_a_typed_data_set(tmp_path: Path) -> None:
    path = _latin(tmp_path / "reviews.csv")
    at = open_page(make_app(), "views/train.py")
    at.selectbox(key="train_dataset").set_value(OWN).run()
    at.text_input(key=OWN_KEY).set_value(f"csv:{path}").run()
    assert_ok(at)
    assert not at.error
    assert [w for w in texts(at.warning) if "Latin-1" in w] == [
        "reviews.csv is not valid UTF-8; it was read as Latin-1 (check accented characters)."
    ]
    assert any(f"Texts from {path.resolve()}: 2 classes" in c for c in texts(at.caption))


def test_an_unexpected_error_on_a_page_is_plain_words_and_the_log_keeps_the_traceback(caplog) -> None:
    def page() -> None:
        from xaidash.dashboard.errors import guard

        with guard("Explaining"):
            raise KeyError("layer4")

    at = AppTest.from_function(page, default_timeout=60).run()
    assert_ok(at)
    assert texts(at.error) == [
        "Explaining: an unexpected error: 'layer4'; try other settings or reload the page; if it keeps happening, "
        "report it (the server's log has the details)"
    ]
    assert not at.expander and not at.code  # no traceback on the page: the server's log has it
