"""`cues`: generated review-like sentences whose sentiment is set by a few known cue words.

Each sentence is neutral filler plus 1-3 cue phrases ("good", "not bad", ...). The cues of one
sentence all point the same way once negation is applied, so the label follows from them
exactly (no noise), and `rationales` lists the word indices of the cues and their negators:
the ground truth for judging text explanations. Filler words are drawn independently of the
label, and the negators appear only in front of cues.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from xaidash.data.registry import DatasetInfo, DatasetSource, SplitName, TextSplit, register
from xaidash.data.tokenizer import split_words

CLASSES = ("negative", "positive")
SIZES = {"train": 4000, "test": 1000}
SEEDS = {"train": 7301, "test": 7302}
MIN_WORDS, MAX_WORDS = 6, 14
NEGATION_RATE = 0.3

POSITIVE = (
    "good", "great", "excellent", "wonderful", "superb", "brilliant", "enjoyable",
    "delightful", "charming", "clever", "fantastic", "lovely",
)  # fmt: skip
NEGATIVE = (
    "bad", "awful", "terrible", "boring", "dull", "poor", "weak",
    "tedious", "bland", "clumsy", "dreadful", "disappointing",
)  # fmt: skip
NEGATORS = ("not", "never")

NOUNS = (
    "movie", "film", "plot", "story", "acting", "cast", "script", "ending", "soundtrack",
    "camera work", "pacing", "dialogue", "lead actor", "second half", "opening scene",
)  # fmt: skip
# A clause holds exactly one cue slot; "{noun}" is filled from NOUNS.
CLAUSES = (
    "the {noun} was {cue}",
    "the {noun} felt {cue}",
    "the {noun} is {cue}",
    "i thought the {noun} was {cue}",
    "this {noun} seemed {cue}",
    "to me the {noun} looked {cue}",
)  # fmt: skip
OPENERS = ("", "", "overall", "honestly", "in my view", "after the show", "for what it is worth", "as a whole")
CLOSERS = ("", "", "to be fair", "at the cinema", "on the big screen", "from start to finish", "this weekend")
JOINERS = ("and", ",", "; also")


def _sentence(rng: np.random.Generator, label: int) -> tuple[str, list[int]] | None:
    """One sentence of the given label and the indices of its cue words, or None if too long/short."""
    n_cues = int(rng.choice([1, 2, 3], p=[0.45, 0.35, 0.2]))
    words: list[str] = []
    rationale: list[int] = []

    def add(text: str) -> None:
        words.extend(split_words(text))

    add(str(rng.choice(OPENERS)))
    for k in range(n_cues):
        if k:
            add(str(rng.choice(JOINERS)))
        template = str(rng.choice(CLAUSES))
        before = template.split("{cue}")[0].format(noun=rng.choice(NOUNS))
        add(before)
        negated = rng.random() < NEGATION_RATE
        if negated:  # "not bad" is positive: the surface word has the opposite polarity
            rationale.append(len(words))
            add(str(rng.choice(NEGATORS)))
        polarity = label if not negated else 1 - label
        rationale.append(len(words))
        add(str(rng.choice(POSITIVE if polarity == 1 else NEGATIVE)))
    add(str(rng.choice(CLOSERS)))

    n_words = sum(w.isalnum() for w in words)
    if not MIN_WORDS <= n_words <= MAX_WORDS:
        return None
    return " ".join(words) + " .", rationale


def generate(n: int, seed: int) -> tuple[list[str], np.ndarray, list[list[int]]]:
    """`n` sentences, their labels (balanced) and rationales, deterministically from `seed`."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % 2).astype(np.int64)
    texts: list[str] = []
    rationales: list[list[int]] = []
    for label in labels:
        made = None
        while made is None:  # redraw the rare sentence outside the word range
            made = _sentence(rng, int(label))
        texts.append(made[0])
        rationales.append(made[1])
    return texts, labels, rationales


def cue_label(text: str) -> int:
    """The label a sentence's cues imply: what a perfect reader of this data set would answer."""
    words = split_words(text)
    votes = 0
    for i, w in enumerate(words):
        if w in POSITIVE or w in NEGATIVE:
            sign = 1 if w in POSITIVE else -1
            votes += -sign if i and words[i - 1] in NEGATORS else sign
    return int(votes > 0)


@lru_cache(maxsize=2)
def _cached(split: SplitName) -> tuple[tuple[str, ...], np.ndarray, tuple[tuple[int, ...], ...]]:
    texts, labels, rationales = generate(SIZES[split], SEEDS[split])
    return tuple(texts), labels, tuple(tuple(r) for r in rationales)


def load(split: SplitName, root: Path, download: bool) -> TextSplit:
    texts, labels, rationales = _cached(split)
    return TextSplit(
        texts=list(texts),
        labels=torch.from_numpy(labels.copy()),
        rationales=[list(r) for r in rationales],
    )


INFO = DatasetInfo(
    name="cues",
    modality="text",
    classes=CLASSES,
    description=(
        "Generated review-like sentences (6-14 words) whose sentiment is set by 1-3 cue words such as "
        "'great' or 'not bad'; the cue words are known for every sentence. 4,000 train / 1,000 test; "
        "works offline."
    ),
    builtin=True,
    has_rationales=True,
)

register(DatasetSource(info=INFO, loader=load, is_available=lambda root: True))
