"""The TCAV paper's significance test: two-sided t-test against random-vs-random scores, Bonferroni-corrected."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ttest_ind

from xaidash.explainers.concepts.significance import bonferroni, judge, t_test


def test_t_test_is_scipys_two_sided_test():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.6, 0.9, 10).tolist(), rng.uniform(0.2, 0.6, 10).tolist()
    assert t_test(a, b) == pytest.approx(ttest_ind(a, b).pvalue)
    assert t_test(b, a) == pytest.approx(t_test(a, b))  # two-sided: the order does not matter


def test_constant_or_too_few_scores_are_never_significant():
    assert t_test([0.5] * 10, [0.5] * 10) == 1.0  # scipy gives nan
    assert t_test([0.9], [0.1, 0.2]) == 1.0
    assert not judge("c", "l", [0.5] * 5, [0.5] * 5, tests=1, cav_accuracy=0.5).significant


def test_bonferroni_multiplies_by_the_number_of_tests_and_caps_at_one():
    assert bonferroni(0.01, 4) == pytest.approx(0.04)
    assert bonferroni(0.3, 4) == 1.0
    assert bonferroni(0.01, 0) == pytest.approx(0.01)


def test_a_clear_difference_is_significant_and_a_borderline_one_is_not_after_correction():
    rng = np.random.default_rng(1)
    rand = rng.uniform(0.3, 0.7, 10).tolist()
    clear = judge("red", "layer", rng.uniform(0.9, 1.0, 10).tolist(), rand, tests=2, cav_accuracy=0.8)
    assert clear.significant and clear.verdict.startswith("significant: the class uses")
    against = judge("blue", "layer", rng.uniform(0.0, 0.1, 10).tolist(), rand, tests=2, cav_accuracy=0.8)
    assert against.significant and against.verdict == "significant: against"
    # p between alpha / 20 and alpha: significant alone, not among 20 tests
    scores = [s + 0.12 for s in rand]
    p = t_test(scores, rand)
    if not 0.05 / 20 < p < 0.05:
        pytest.skip(f"p = {p:.3g} is not borderline for this draw")
    assert judge("x", "l", scores, rand, tests=1, cav_accuracy=0.6).significant
    alone_of_20 = judge("x", "l", scores, rand, tests=20, cav_accuracy=0.6)
    assert not alone_of_20.significant and alone_of_20.verdict == "not significant: no finding"


def test_json_has_the_spread_and_the_verdict():
    r = judge("c", "l", [0.2, 0.4, 0.6], [0.5, 0.5, 0.6], tests=1, cav_accuracy=0.7).to_json()
    assert r["mean"] == pytest.approx(0.4) and r["min"] == 0.2 and r["max"] == 0.6
    assert r["std"] == pytest.approx(np.std([0.2, 0.4, 0.6]))
    assert r["verdict"] == "not significant: no finding" and r["significant"] is False
