"""Methods ranked per metric with bootstrap intervals, and whether the metrics agree on the order.

A plain function of the Compare run's per-input scores (no Streamlit): per metric, each method's mean over the
inputs with a 95% interval from resampling the inputs (seeded), its rank by the metric's declared direction
(`scoring.METRICS`), and the methods whose intervals overlap. Then Kendall's tau between the method orders of
each pair of metrics, and one sentence that says whether they disagree (LATEC, Klein et al. 2024: they often do).
It never crowns a method: one is called best on every metric only when its interval lies clear of every other
method's interval on each metric.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from xaidash.explainers.scoring import METRICS

RESAMPLES = 2000  # percentile intervals of a mean move by about 0.01 of their width between seeds at this count
LEVEL = 0.95
COLUMNS = [
    "metric",
    "method",
    "mean",
    "ci_low",
    "ci_high",
    "n",
    "rank",
    "tied_with",
    "ties_leader",
    "first_share",
]


@dataclass(frozen=True)
class Ranking:
    """`table`: one row per (metric, method) with a value, best first within a metric (see `rank_methods`);
    `agreement`: Kendall's tau per pair of metrics; `summary`: the sentence on whether the metrics agree;
    `skipped`: metric -> why it is not ranked."""

    table: pd.DataFrame
    agreement: pd.DataFrame
    summary: str
    skipped: dict[str, str] = field(default_factory=dict)
    resamples: int = RESAMPLES
    seed: int = 0
    level: float = LEVEL
    titles: dict[str, tuple[str, str]] = field(default_factory=dict)  # metric -> (title, direction), as ranked

    @property
    def metrics(self) -> list[str]:
        return list(dict.fromkeys(self.table["metric"]))


def direction(metric: str, metrics: Mapping[str, tuple[str, str]] = METRICS) -> int:
    """+1 when higher is better, -1 when lower is better, 0 when the metric declares neither (not ranked)."""
    better = metrics.get(metric, ("", ""))[1]
    return 1 if better.startswith("higher") else (-1 if better.startswith("lower") else 0)


def bootstrap_means(values: np.ndarray, *, resamples: int = RESAMPLES, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(means, resampled means) of `values` (methods x inputs, NaN where an input has no value): each resample
    draws the inputs with replacement, the same draw for every method, and takes each method's mean over its
    finite values in it -> (resamples, methods), NaN where a draw held none of a method's values.

    Written by hand rather than with `scipy.stats.bootstrap` (which `percentile_interval_scipy` keeps for the
    tests): scipy resamples each method on its own, while ranking needs the same inputs drawn for every method
    (a paired resample), so that how often each method comes first can be counted on the same draws."""
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    filled = np.where(finite, v, 0.0)
    count = finite.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(count > 0, filled.sum(axis=1) / np.maximum(count, 1), np.nan)
    n = v.shape[1]
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    sums = filled[:, idx].sum(axis=2)  # (methods, resamples)
    counts = finite[:, idx].sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).T
    return means, boot


def percentile_interval(boot: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of each column of resampled means (NaN draws left out)."""
    tail = (1.0 - level) / 2.0 * 100.0
    with np.errstate(invalid="ignore"):
        low = np.nanpercentile(boot, tail, axis=0) if boot.size else np.array([])
        high = np.nanpercentile(boot, 100.0 - tail, axis=0) if boot.size else np.array([])
    return np.asarray(low), np.asarray(high)


def percentile_interval_scipy(
    values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """scipy's percentile bootstrap interval of one method's mean (finite values only): the library call the
    hand-written paired resample is checked against."""
    x = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    res = stats.bootstrap(
        (x,), np.mean, confidence_level=LEVEL, n_resamples=resamples, method="percentile", random_state=seed
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def rank_metric(
    per_method: Mapping[str, Sequence[float]],
    sign: int,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> pd.DataFrame:
    """One metric's rows, best first: mean, ci_low/ci_high (percentile bootstrap over the inputs), n (inputs with
    a value), rank (1 = best mean by the direction `sign`; equal means share a rank), tied_with (the other methods
    whose intervals overlap this one's), ties_leader (its interval overlaps the leader's; the leader's too) and
    first_share (share of the resamples in which it had the best mean)."""
    methods = [m for m, v in per_method.items() if any(math.isfinite(float(x)) for x in v)]
    if not methods:
        return pd.DataFrame(columns=COLUMNS[1:])
    width = max(len(per_method[m]) for m in methods)
    values = np.full((len(methods), width), np.nan)
    for i, m in enumerate(methods):
        row = np.asarray(per_method[m], dtype=np.float64)
        values[i, : len(row)] = row
    means, boot = bootstrap_means(values, resamples=resamples, seed=seed)
    low, high = percentile_interval(boot, level)
    signed = np.where(np.isnan(boot), -np.inf, sign * boot)
    best_in_draw = signed.max(axis=1, keepdims=True)
    wins = (signed == best_in_draw) & np.isfinite(best_in_draw)
    first_share = wins.sum(axis=0) / max(1, resamples)
    score = pd.Series(sign * means, index=methods)
    ranks = score.rank(ascending=False, method="min").astype(int)
    order = sorted(range(len(methods)), key=lambda i: (ranks.iloc[i], methods[i]))
    intervals = {m: (float(low[i]), float(high[i])) for i, m in enumerate(methods)}
    leader = methods[order[0]]
    rows = []
    for i in order:
        m = methods[i]
        rows.append(
            {
                "method": m,
                "mean": float(means[i]),
                "ci_low": float(low[i]),
                "ci_high": float(high[i]),
                "n": int(np.isfinite(values[i]).sum()),
                "rank": int(ranks.iloc[i]),
                "tied_with": [o for o in methods if o != m and _overlaps(intervals[m], intervals[o])],
                "ties_leader": _overlaps(intervals[m], intervals[leader]),
                "first_share": float(first_share[i]),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS[1:])


def rank_methods(
    per_input: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    metrics: Mapping[str, tuple[str, str]] = METRICS,
    only: Sequence[str] | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
) -> pd.DataFrame:
    """The ranking table of `per_input` ({method: {metric: one value per input}}): columns metric, method, mean,
    ci_low, ci_high, n, rank, tied_with, ties_leader, first_share; metrics in `metrics`' order (those in `only`
    when given), methods best first within each. A metric with no declared direction is left out. Each metric's
    resample is seeded by `seed`, so the same scores give the same table."""
    names = [c for c in metrics if only is None or c in only]
    parts = []
    for c in names:
        sign = direction(c, metrics)
        if not sign:
            continue
        per_method = {m: v[c] for m, v in per_input.items() if c in v}
        part = rank_metric(per_method, sign, resamples=resamples, seed=seed, level=level)
        if len(part):
            parts.append(part.assign(metric=c))
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(parts, ignore_index=True)[COLUMNS]


def metric_agreement(table: pd.DataFrame, metrics: Mapping[str, tuple[str, str]] = METRICS) -> pd.DataFrame:
    """Kendall's tau (scipy's tau-b) between the method orders of each pair of metrics, on the methods both rank:
    columns metric_a, metric_b, tau, methods (how many); tau is NaN with fewer than two common methods or when a
    metric gives them all the same mean."""
    scores = {
        c: {r.method: direction(c, metrics) * r.mean for r in part.itertuples()}
        for c, part in table.groupby("metric", sort=False)
    }
    rows = []
    for a, b in combinations(scores, 2):
        common = [m for m in scores[a] if m in scores[b]]
        tau = float("nan")
        if len(common) >= 2:
            x, y = [scores[a][m] for m in common], [scores[b][m] for m in common]
            if len(set(x)) > 1 and len(set(y)) > 1:
                tau = float(stats.kendalltau(x, y).statistic)
        rows.append({"metric_a": a, "metric_b": b, "tau": tau, "methods": len(common)})
    return pd.DataFrame(rows, columns=["metric_a", "metric_b", "tau", "methods"])


def _join(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def disagreement_summary(
    table: pd.DataFrame,
    agreement: pd.DataFrame | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    metrics: Mapping[str, tuple[str, str]] = METRICS,
) -> str:
    """One paragraph on whether the metrics agree on which method comes first. A method is called best on every
    metric only when, on each, it alone has the best mean and its interval overlaps no other method's; otherwise
    the sentence names each metric's leader (with the methods its interval cannot separate from it)."""
    labels = labels or {}

    def name(m: str) -> str:
        return labels.get(m, m)

    def title(c: str) -> str:
        return metrics.get(c, (c, ""))[0]

    parts: dict[str, pd.DataFrame] = {str(c): part for c, part in table.groupby("metric", sort=False)}
    if not parts:
        return "Nothing to rank: no metric with a declared direction has a value."
    alone = {c: str(p.method.iloc[0]) for c, p in parts.items() if len(p) < 2}  # one method: it ranks nothing
    alone_text = "".join(f" {title(c)} has a value for {name(m)} only, so it ranks nothing." for c, m in alone.items())
    parts = {c: p for c, p in parts.items() if c not in alone}
    if not parts:
        return "Nothing to rank: no metric has values for two methods." + alone_text
    leaders: dict[str, list[str]] = {c: [str(m) for m in p[p["rank"] == 1].method] for c, p in parts.items()}
    clear = {c: ls[0] for c, ls in leaders.items() if len(ls) == 1 and not _leader_ties(parts[c])[1:]}
    if len(parts) == 1:
        (c,) = parts
        return (
            f"Only {title(c)} ranks the methods: nothing to compare it with; "
            + _leader_phrase(leaders[c], parts[c], name)
            + "."
            + alone_text
        )
    first = {m for ls in leaders.values() for m in ls}
    tau_text = _tau_phrase(agreement, title)
    if len(first) == 1:
        (m,) = first
        if len(clear) == len(parts):
            return (
                f"{name(m)} is best on every metric: on each of the {len(parts)} its 95% interval lies clear of "
                f"every other method's." + tau_text + alone_text
            )
        unclear = [title(c) for c in parts if c not in clear]
        return (
            f"The metrics agree on which mean is best ({name(m)} on every metric), but on {_join(unclear)} its "
            "interval overlaps another method's: these inputs do not separate them, so no method is shown best on "
            "every metric." + tau_text + alone_text
        )
    by_leader: dict[tuple[str, ...], list[str]] = {}
    for c in parts:
        by_leader.setdefault(tuple(leaders[c]), []).append(c)
    phrases = []
    for who, cs in by_leader.items():
        verb = "ranks" if len(cs) == 1 else "rank"
        if len(who) > 1:
            note = " (equal means)"
        else:
            ties = sorted({t for c in cs for t in _leader_ties(parts[c])} - set(who))
            note = f" (its interval overlaps {_join([name(t) for t in ties])}'s)" if ties and len(cs) == 1 else ""
        phrases.append(f"{_join([title(c) for c in cs])} {verb} {_join([name(m) for m in who])} first{note}")
    separated = [title(c) for c in clear]
    clear_text = (
        f" The leader's interval is clear of every other method's on {len(separated)} of {len(parts)} metrics"
        + (f" ({_join(separated)})." if separated else ".")
    )
    return (
        "Metrics disagree: "
        + "; ".join(phrases)
        + "; no method is best on every metric."
        + clear_text
        + tau_text
        + alone_text
    )


def _leader_ties(part: pd.DataFrame) -> list[str]:
    """The methods whose interval overlaps the leader's, the leader first."""
    return [str(m) for m in part[part.ties_leader.astype(bool)].method]


def _leader_phrase(leaders: list[str], part: pd.DataFrame, name: Callable[[str], str]) -> str:
    ties = [t for t in _leader_ties(part) if t not in leaders]
    tail = f", its interval overlapping {_join([name(t) for t in ties])}'s" if ties else ""
    return f"it puts {_join([name(m) for m in leaders])} first{tail}"


def _tau_phrase(agreement: pd.DataFrame | None, title: Callable[[str], str]) -> str:
    if agreement is None or agreement.empty or agreement["tau"].isna().all():
        return ""
    known = agreement.dropna(subset=["tau"])
    lo, hi = known.loc[known["tau"].idxmin()], known.loc[known["tau"].idxmax()]
    if len(known) == 1:
        return f" Kendall's τ between their method orders: {lo.tau:.2f}."
    return (
        f" Kendall's τ between the metrics' method orders ranges from {lo.tau:.2f} ({title(lo.metric_a)} vs "
        f"{title(lo.metric_b)}) to {hi.tau:.2f} ({title(hi.metric_a)} vs {title(hi.metric_b)}); 1 is the same order."
    )


def per_batch_metrics(summary: pd.DataFrame | None) -> list[str]:
    """Metrics measured once for a whole batch rather than per input (every method's summary row has n <= 1 while
    other metrics have more inputs): a cost such as the runtime, which has no spread over the inputs to rank by."""
    if summary is None or summary.empty:
        return []
    most = summary.groupby("metric", sort=False)["n"].max()
    return [str(c) for c, n in most.items() if n <= 1 < most.max()]


def comparison_ranking(
    per_input: Mapping[str, Mapping[str, Sequence[float]]],
    summary: pd.DataFrame | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    metrics: Mapping[str, tuple[str, str]] = METRICS,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Ranking:
    """The Compare run's ranking: every metric it scored per input (`summary` tells which were measured once per
    batch: those are left out with the reason), the Kendall taus and the summary sentence."""
    skipped = dict.fromkeys(per_batch_metrics(summary), "measured once for the whole batch: no spread over the inputs")
    present = [c for c in metrics if any(c in v for v in per_input.values())]
    for c in present:
        if not direction(c, metrics) and c not in skipped:
            skipped[c] = "declares no direction (neither higher nor lower is better)"
    only = [c for c in present if c not in skipped]
    table = rank_methods(per_input, metrics=metrics, only=only, resamples=resamples, seed=seed)
    agreement = metric_agreement(table, metrics)
    summary_text = disagreement_summary(table, agreement, labels=labels, metrics=metrics)
    titles = {c: metrics[c] for c in only}
    return Ranking(table, agreement, summary_text, skipped, resamples, seed, titles=titles)


def ranking_notes(ranking: Ranking, labels: Mapping[str, str] | None = None) -> list[str]:
    """The ranking as the session report's notes: the summary sentence, then per metric its methods best first
    with their means and 95% intervals (the report's one place for text that is not a map or a setting)."""
    labels = labels or {}
    if ranking.table.empty:
        return []
    notes = [f"Ranking (means over the inputs, 95% bootstrap intervals, seed {ranking.seed}): {ranking.summary}"]
    for c, part in ranking.table.groupby("metric", sort=False):
        title, better = ranking.titles.get(str(c), METRICS.get(str(c), (str(c), "")))
        cells = [
            f"{int(r.rank)}. {labels.get(r.method, r.method)} {r.mean:.3g} [{r.ci_low:.3g}, {r.ci_high:.3g}]"
            for r in part.itertuples()
        ]
        notes.append(f"{title} ({better}): " + "; ".join(cells) + ".")
    return notes
