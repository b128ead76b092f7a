"""The out-of-distribution sentence says what its percentile means: the share of training samples that lie nearer
to the training data than the input does. Low, middle and high percentiles, and a flagged input, each read true."""

from __future__ import annotations

import re

import pytest

from xaidash.explainers.inspection import ood


def _score(percentile: float, flagged: bool = False) -> ood.OODScore:
    return ood.OODScore(
        distance=0.2,
        threshold=0.33,
        percentile=percentile,
        entropy=0.01,
        entropy_percentile=84.0,
        max_entropy=0.69,
        flagged=flagged,
        k=5,
    )


@pytest.mark.parametrize(
    "percentile,flagged,starts,share",
    [
        (3.0, False, "Close to the training data: nearer to it than 97% of training samples are", 97),
        (30.0, False, "Close to the training data: nearer to it than 70% of training samples are", 70),
        (60.0, False, "Within the training data's usual range: farther from it than 60% of training samples are", 60),
        (90.8, False, "At the edge of the training data: farther from it than 91% of training samples are", 91),
        (96.0, False, "At the edge of the training data: farther from it than 96% of training samples are", 96),
        (
            99.6,
            True,
            "Looks out of distribution: farther from the training data than 99.6% of training samples are",
            99.6,
        ),
    ],
)
def test_the_words_match_the_percentile(percentile: float, flagged: bool, starts: str, share: float) -> None:
    text = _score(percentile, flagged).summary()
    assert text.startswith(starts), text
    first = re.search(r"(nearer|farther)[^%]*? than ([\d.]+)%", text)
    assert first is not None
    # "nearer than X%" says the input beats X% of samples; "farther than X%" that X% beat it: X is the percentile's
    # complement or the percentile itself, never the other way round
    said = float(first.group(2))
    assert said == pytest.approx(share, abs=0.05)
    assert (first.group(1) == "nearer") == (percentile < 50)


def test_a_96th_percentile_input_is_never_called_close() -> None:
    text = _score(96.0).summary()
    assert "Close" not in text and "nearer than 4" not in text


def test_shares_near_the_ends_keep_a_decimal() -> None:
    assert "99.6%" in _score(99.6).summary() and "100%" not in _score(99.6).summary()
    assert "99.5%" in _score(0.5).summary()


def test_the_score_writes_and_reads_its_own_json() -> None:
    """The report keeps the score as the score writes it (docs/report-format.md `out_of_distribution`)."""
    score = _score(99.6, flagged=True)
    data = score.to_json()
    assert list(data) == [
        "flagged",
        "distance",
        "threshold",
        "percentile",
        "entropy",
        "entropy_percentile",
        "max_entropy",
        "k",
        "summary",
    ]
    assert data["summary"] == score.summary()
    assert ood.OODScore.from_json(data) == score
