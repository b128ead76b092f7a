"""The ranking of methods per metric: direction respected, intervals around the mean, seeded resamples, ties from
overlapping intervals, Kendall's tau between metrics, and the sentence on whether the metrics disagree."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from xaidash.explainers.comparison.ranking import (
    bootstrap_means,
    comparison_ranking,
    disagreement_summary,
    metric_agreement,
    percentile_interval,
    percentile_interval_scipy,
    rank_methods,
    ranking_notes,
)

METRICS = {
    "low_metric": ("Low metric", "lower is better"),
    "high_metric": ("High metric", "higher is better"),
    "plain": ("Plain", "the number of pixels"),  # no direction: never ranked
}


def _values(centre: float, spread: float = 0.01, n: int = 12) -> list[float]:
    """n values evenly spread around `centre` (mean exactly `centre`)."""
    return list(centre + spread * np.linspace(-1, 1, n))


def test_lower_is_better_puts_the_smallest_mean_first_and_higher_the_largest() -> None:
    per = {
        "a": {"low_metric": _values(0.1), "high_metric": _values(0.1)},
        "b": {"low_metric": _values(0.5), "high_metric": _values(0.5)},
        "c": {"low_metric": _values(0.9), "high_metric": _values(0.9)},
    }
    t = rank_methods(per, metrics=METRICS)
    low = t[t.metric == "low_metric"]
    high = t[t.metric == "high_metric"]
    assert list(low.method) == ["a", "b", "c"] and list(low["rank"]) == [1, 2, 3]
    assert list(high.method) == ["c", "b", "a"] and list(high["rank"]) == [1, 2, 3]
    assert all(t.tied_with.map(len) == 0)  # intervals 0.4 apart, each at most 0.02 wide
    assert list(low.ties_leader) == [True, False, False]
    assert low.first_share.iloc[0] == 1.0


def test_intervals_cover_the_mean_and_count_the_inputs_with_a_value() -> None:
    rng = np.random.default_rng(3)
    per = {m: {"high_metric": list(rng.normal(0.5, 0.2, 20))} for m in "abcd"}
    per["d"]["high_metric"][:5] = [float("nan")] * 5
    t = rank_methods(per, metrics=METRICS)
    assert ((t.ci_low <= t["mean"]) & (t["mean"] <= t.ci_high)).all()
    assert (t.ci_high > t.ci_low).all()
    assert dict(zip(t.method, t.n, strict=True))["d"] == 15
    assert math.isclose(t[t.method == "d"]["mean"].iloc[0], float(np.nanmean(per["d"]["high_metric"])))


def test_overlapping_intervals_are_reported_as_ties_and_equal_means_share_a_rank() -> None:
    per = {
        "a": {"high_metric": _values(0.80, 0.2)},
        "b": {"high_metric": _values(0.78, 0.2)},  # overlaps a
        "c": {"high_metric": _values(0.20, 0.01)},
        "d": {"high_metric": _values(0.20, 0.01)},  # the same values as c
    }
    t = rank_methods(per, metrics=METRICS).set_index("method")
    assert t.loc["a", "rank"] == 1 and t.loc["b", "rank"] == 2
    assert t.loc["c", "rank"] == t.loc["d", "rank"] == 3
    assert t.loc["a", "tied_with"] == ["b"] and t.loc["b", "ties_leader"]
    assert not t.loc["c", "ties_leader"] and "d" in t.loc["c", "tied_with"]


def test_the_bootstrap_is_seeded() -> None:
    rng = np.random.default_rng(0)
    per = {m: {"low_metric": list(rng.normal(0.3, 0.1, 10))} for m in "ab"}
    same = [rank_methods(per, metrics=METRICS, seed=7) for _ in range(2)]
    other = rank_methods(per, metrics=METRICS, seed=8)
    pd.testing.assert_frame_equal(same[0], same[1])
    assert not np.allclose(same[0].ci_low, other.ci_low)


def test_the_paired_resample_matches_scipys_percentile_interval() -> None:
    """The hand-written paired resample against scipy.stats.bootstrap (method='percentile') on one method: the same
    interval up to the resampling noise."""
    x = list(np.random.default_rng(1).normal(0.4, 0.15, 16))
    _, boot = bootstrap_means(np.asarray([x]), resamples=4000, seed=0)
    low, high = percentile_interval(boot)
    ref_low, ref_high = percentile_interval_scipy(x, resamples=4000, seed=0)
    width = ref_high - ref_low
    assert abs(low[0] - ref_low) < 0.08 * width and abs(high[0] - ref_high) < 0.08 * width


def test_a_metric_without_direction_or_measured_once_per_batch_is_not_ranked() -> None:
    per = {m: {"low_metric": _values(v), "plain": _values(v), "high_metric": [v] * 12} for m, v in (("a", 1), ("b", 2))}
    summary = pd.DataFrame({"metric": ["low_metric", "plain", "high_metric"], "n": [12, 12, 1]})
    r = comparison_ranking(per, summary, metrics=METRICS)
    assert r.metrics == ["low_metric"]
    assert set(r.skipped) == {"plain", "high_metric"}
    assert "no direction" in r.skipped["plain"] and "once" in r.skipped["high_metric"]


def _two_metric_table(low_order: list[float], high_order: list[float]) -> pd.DataFrame:
    per = {
        m: {"low_metric": _values(lo), "high_metric": _values(hi)}
        for m, lo, hi in zip("abc", low_order, high_order, strict=True)
    }
    return rank_methods(per, metrics=METRICS)


def test_agreeing_metrics_name_the_method_best_on_every_metric() -> None:
    # a: lowest on the lower-is-better metric and highest on the higher-is-better one, clear of the others
    t = _two_metric_table([0.1, 0.5, 0.9], [0.9, 0.5, 0.1])
    agreement = metric_agreement(t, METRICS)
    assert agreement.tau.iloc[0] == pytest.approx(1.0)
    text = disagreement_summary(t, agreement, labels={"a": "Alpha"}, metrics=METRICS)
    assert text.startswith("Alpha is best on every metric"), text
    assert "disagree" not in text


def test_disagreeing_metrics_name_each_leader_and_crown_none() -> None:
    t = _two_metric_table([0.1, 0.5, 0.9], [0.1, 0.5, 0.9])  # a best on one, c best on the other
    agreement = metric_agreement(t, METRICS)
    assert agreement.tau.iloc[0] == pytest.approx(-1.0)
    text = disagreement_summary(t, agreement, labels={"a": "Alpha", "c": "Gamma"}, metrics=METRICS)
    assert text.startswith("Metrics disagree: Low metric ranks Alpha first; High metric ranks Gamma first"), text
    assert "no method is best on every metric" in text and "-1.00" in text


def test_the_same_leader_whose_interval_overlaps_another_is_not_called_best() -> None:
    per = {
        "a": {"low_metric": _values(0.10, 0.2), "high_metric": _values(0.9)},
        "b": {"low_metric": _values(0.12, 0.2), "high_metric": _values(0.5)},
    }
    t = rank_methods(per, metrics=METRICS)
    text = disagreement_summary(t, metric_agreement(t, METRICS), metrics=METRICS)
    assert "is best on every metric" not in text
    assert "do not separate" in text and "Low metric" in text, text


def test_a_metric_with_one_method_ranks_nothing_and_is_said_so() -> None:
    per = {
        "a": {"low_metric": _values(0.1), "high_metric": _values(0.1)},
        "b": {"low_metric": _values(0.9)},
    }
    t = rank_methods(per, metrics=METRICS)
    text = disagreement_summary(t, metric_agreement(t, METRICS), labels={"a": "Alpha"}, metrics=METRICS)
    assert text.startswith("Only Low metric ranks the methods"), text
    assert "High metric has a value for Alpha only, so it ranks nothing." in text
    assert "best on every metric" not in text


def test_the_report_notes_state_the_summary_and_each_metric_best_first() -> None:
    per = {
        "a": {"low_metric": _values(0.1), "high_metric": _values(0.1)},
        "b": {"low_metric": _values(0.9), "high_metric": _values(0.9)},
    }
    r = comparison_ranking(per, metrics=METRICS)
    notes = ranking_notes(r, {"a": "Alpha", "b": "Beta"})
    assert notes[0].endswith(r.summary) and "95% bootstrap intervals" in notes[0]
    low = next(n for n in notes if n.startswith("Low metric (lower is better): "))
    assert low.index("1. Alpha 0.1 [") < low.index("2. Beta 0.9 [")
