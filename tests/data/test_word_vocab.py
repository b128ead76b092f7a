"""data.tokenizer: split_words and the WordVocab built from training texts."""

from __future__ import annotations

import torch

from xaidash.data.tokenizer import PAD, UNK, WordVocab, split_words


def test_split_words():
    assert split_words("The plot wasn't BAD, honestly!") == ["the", "plot", "wasn't", "bad", ",", "honestly", "!"]
    assert split_words("") == []


def test_build_orders_by_frequency_and_respects_limits():
    texts = ["good good film", "bad film", "good plot"]
    vocab = WordVocab.build(texts)
    assert vocab.itos[:2] == [PAD, UNK] and vocab.pad_id == 0 and vocab.unk_id == 1
    assert vocab.itos[2:] == ["good", "film", "bad", "plot"]  # by count, then alphabetically
    assert len(vocab) == 6
    assert WordVocab.build(texts, min_freq=2).itos[2:] == ["good", "film"]
    assert WordVocab.build(texts, max_size=4).itos == [PAD, UNK, "good", "film"]


def test_encode_pads_truncates_and_maps_unknown_words():
    vocab = WordVocab.build(["good film", "bad plot"], max_length=3)
    ids = vocab.encode(["good film", "bad unseen plot good film", ""])
    assert ids.dtype == torch.long and ids.shape == (3, 3)
    good, film, bad, plot = (vocab.stoi[w] for w in ("good", "film", "bad", "plot"))
    assert ids.tolist() == [[good, film, 0], [bad, 1, plot], [1, 0, 0]]  # truncated at 3; empty -> one <unk>
    assert vocab.tokens("bad unseen plot good") == ["bad", "unseen", "plot"]
    assert vocab.word_ids("bad unseen plot good") == [0, 1, 2]
    assert vocab.tokens("") == [UNK]


def test_json_round_trip(tmp_path):
    vocab = WordVocab.build(["a b c", "c d"], max_length=7)
    again = WordVocab.from_json(vocab.to_json())
    assert again.itos == vocab.itos and again.max_length == 7
    assert torch.equal(again.encode(["c d e", "a"]), vocab.encode(["c d e", "a"]))
    vocab.save(tmp_path / "vocab.json")
    loaded = WordVocab.load(tmp_path / "vocab.json")
    assert loaded.stoi == vocab.stoi and loaded.max_length == 7


def test_a_damaged_vocabulary_file_is_named(tmp_path):
    """vocab.json is user-editable: not JSON, itos a number, words that are not strings, a bad max_length."""
    import json

    import pytest

    from xaidash.data.errors import DatasetError
    from xaidash.data.tokenizer import WordVocab

    path = tmp_path / "vocab.json"
    for content, says in (
        ("{'itos': [", "not a JSON vocabulary"),
        (json.dumps({"itos": 5}), "itos must be a list of words, not 5"),
        (json.dumps({"itos": ["a", 3]}), "itos must be a list of words"),
        (json.dumps({"itos": ["a"], "max_length": "long"}), "max_length must be a whole number"),
        (json.dumps([1, 2]), "itos must be a list of words, not None"),
    ):
        path.write_text(content)
        with pytest.raises(DatasetError, match=says) as info:
            WordVocab.load(path)
        assert str(info.value).startswith(f"{path} is damaged: ")
    path.write_text(json.dumps(WordVocab(["cat", "dog"], max_length=9).to_json()))
    assert len(WordVocab.load(path)) == 4 and WordVocab.load(path).max_length == 9
