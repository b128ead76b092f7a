"""The generated cue sentences: format, exact labels from the cues, rationales, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xaidash.data.registry import get_info, load_split
from xaidash.data.sets import cues
from xaidash.data.tokenizer import split_words


@pytest.fixture(scope="module")
def train():
    return load_split("cues", "train")


@pytest.fixture(scope="module")
def test_split():
    return load_split("cues", "test")


def test_info():
    info = get_info("cues")
    assert info.modality == "text" and info.input_shape == ()
    assert info.classes == ("negative", "positive")
    assert info.builtin and info.has_rationales and not info.has_masks


def test_split_format(train, test_split):
    for split, n in ((train, 4000), (test_split, 1000)):
        assert len(split) == n == len(split.rationales)
        assert all(isinstance(t, str) for t in split.texts)
        assert split.labels.dtype == torch.int64 and split.labels.shape == (n,)
        assert torch.bincount(split.labels).tolist() == [n // 2, n // 2]
        lengths = [sum(w.isalnum() for w in split_words(t)) for t in split.texts]
        assert min(lengths) >= 6 and max(lengths) <= 14


def test_rationales_point_to_cue_words(train):
    cue_words = set(cues.POSITIVE) | set(cues.NEGATIVE)
    for text, rationale in zip(train.texts, train.rationales, strict=True):
        words = split_words(text)
        picked = [words[i] for i in rationale]
        assert 1 <= sum(w in cue_words for w in picked) <= 3
        assert all(w in cue_words or w in cues.NEGATORS for w in picked)
        # Every cue word and every negator of the sentence is in the rationale, nothing else.
        assert sorted(rationale) == [i for i, w in enumerate(words) if w in cue_words or w in cues.NEGATORS]
        for i in rationale:  # a negator is always followed by its cue
            if words[i] in cues.NEGATORS:
                assert words[i + 1] in cue_words and i + 1 in rationale


def test_labels_follow_exactly_from_the_cues(train, test_split):
    for split in (train, test_split):
        assert [cues.cue_label(t) for t in split.texts] == split.labels.tolist()


def test_negation_is_present_and_flips(train):
    negated = [t for t in train.texts if {"not", "never"} & set(split_words(t))]
    assert 0.2 * len(train) < len(negated) < 0.6 * len(train)
    assert cues.cue_label("the plot was not bad .") == 1
    assert cues.cue_label("the plot was not good .") == 0


def test_filler_words_carry_no_label(train):
    labels = train.labels.numpy()
    cue_words = set(cues.POSITIVE) | set(cues.NEGATIVE) | set(cues.NEGATORS)
    counts: dict[str, list[int]] = {}
    for text, label in zip(train.texts, labels, strict=True):
        for w in set(split_words(text)) - cue_words:
            counts.setdefault(w, [0, 0])[label] += 1
    for word, (neg, pos) in counts.items():
        if neg + pos >= 100:
            assert abs(pos / (neg + pos) - 0.5) < 0.1, word


def test_deterministic():
    assert cues.generate(300, cues.SEEDS["train"])[0] == cues.generate(300, cues.SEEDS["train"])[0]
    a = cues.generate(300, 5)
    b = cues.generate(300, 5)
    assert a[1].tobytes() == b[1].tobytes() and a[2] == b[2]
    assert cues.generate(300, cues.SEEDS["test"])[0] != a[0]


def test_a_bigram_model_learns_it(train, test_split):
    # Unigrams cannot see negation; word pairs can: a small linear model must reach > 95%.
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = CountVectorizer(ngram_range=(1, 2), tokenizer=split_words, token_pattern=None, lowercase=False)
    model = LogisticRegression(max_iter=1000).fit(vec.fit_transform(train.texts), train.labels.numpy())
    accuracy = np.mean(model.predict(vec.transform(test_split.texts)) == test_split.labels.numpy())
    assert accuracy > 0.95
