"""Indices typed by users (URL parameters, chunk file names, module paths) are ASCII digits (issue 21): '²' and
other Unicode digits pass str.isdigit() and make int() raise, which showed a ValueError traceback on Explain for
?sample=test:². Each parser refuses them like any other malformed text."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from xaidash.explainers.dataset.report import parse_stored
from xaidash.explainers.dataset.store import _parse_chunk
from xaidash.models.inspect.activations import _block_of

UNICODE_DIGITS = ["²", "٣", "１２", "1²", "𝟘"]


@pytest.mark.parametrize("digits", UNICODE_DIGITS)
def test_unicode_digits_are_not_indices(digits: str) -> None:
    assert digits.isdigit()  # what fooled the old checks
    assert parse_stored(f"test:{digits}") is None
    assert _parse_chunk(f"{digits}-4") is None and _parse_chunk(f"0-{digits}") is None
    assert _block_of(f"encoder.{digits}.attn") == f"encoder.{digits}.attn"  # not a numbered block


def test_ascii_indices_still_parse() -> None:
    assert parse_stored("train:12") == ("train", 12) and parse_stored("test:" + "9" * 19) is None
    assert _parse_chunk("0-16") == (0, 16)
    assert _block_of("encoder.blocks.0.attn") == "encoder.blocks.0"


@pytest.mark.parametrize("wanted", ["test:²", "test:٣", "test:" + "9" * 5000])
def test_the_explain_pages_sample_link_refuses_unicode_digits(wanted: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """?sample=test:² on Explain: an error line saying what a link looks like, not a ValueError traceback."""
    from xaidash.dashboard.components import inputs

    errors: list[str] = []
    fake = SimpleNamespace(query_params={inputs.OPEN_SAMPLE_PARAM: wanted}, error=errors.append, session_state={})
    monkeypatch.setattr(inputs, "st", fake)
    inputs._open_requested_sample(SimpleNamespace(info=SimpleNamespace(name="digits")), "pick")  # type: ignore[arg-type]
    assert len(errors) == 1 and "links look like ?sample=test:INDEX" in errors[0], errors
    assert inputs.OPEN_SAMPLE_PARAM not in fake.query_params and fake.session_state == {}
