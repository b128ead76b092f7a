"""Compare's ranking view: per metric, the methods best first with their bootstrap 95% intervals, and whether the
metrics agree on the order (`explainers/comparison/ranking.py` computes it all; this only draws)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import altair as alt
import pandas as pd
import streamlit as st

from xaidash.dashboard.components.charts import matrix_heatmap
from xaidash.explainers.comparison.compare import Comparison, metric_range
from xaidash.explainers.comparison.ranking import Ranking, comparison_ranking
from xaidash.explainers.scoring import METRICS, metric_meaning

LEADER_GROUP = "best, or its interval overlaps the best's"
BELOW_GROUP = "interval clear of the best's"
SUBTITLE_CHARS = 78  # a metric's meaning wrapped to lines that fit half the page at 1024 px


def ranking_chart(
    part: pd.DataFrame,
    metric: str,
    labels: Mapping[str, str],
    modality: str,
    ranking: Ranking,
) -> alt.LayerChart:
    """One metric: each method's mean (point) and 95% bootstrap interval (bar), methods best first from the top,
    coloured by whether the data separate them from the best; the direction in the title."""
    title, better = METRICS.get(metric, (metric, ""))
    rows = pd.DataFrame(
        {
            "method": [f"{int(r.rank)}. {labels.get(r.method, r.method)}" for r in part.itertuples()],
            "mean": part["mean"].astype(float).values,
            "ci_low": part["ci_low"].astype(float).values,
            "ci_high": part["ci_high"].astype(float).values,
            "inputs": part["n"].astype(int).values,
            "first": part["first_share"].astype(float).values,
            "group": [LEADER_GROUP if t else BELOW_GROUP for t in part["ties_leader"]],
        }
    )
    order = list(rows["method"])
    n = int(rows["inputs"].max()) if len(rows) else 0
    y = alt.Y("method:N", sort=order, title="method (best first)", axis=alt.Axis(labelLimit=180))
    axis_title = f"{title}: mean over {n} inputs"
    scale = alt.Scale(domain=value_domain(rows, metric_range(metric)), nice=False)
    colour = alt.Color(
        "group:N",
        scale=alt.Scale(domain=[LEADER_GROUP, BELOW_GROUP], range=["#2ca02c", "#7f7f7f"]),
        legend=alt.Legend(title=None, orient="bottom", labelLimit=0, direction="vertical"),
    )
    tips = [
        alt.Tooltip("method:N"),
        alt.Tooltip("mean:Q", format=".3f"),
        alt.Tooltip("ci_low:Q", format=".3f", title="95% low"),
        alt.Tooltip("ci_high:Q", format=".3f", title="95% high"),
        alt.Tooltip("inputs:Q", title="inputs with a value"),
        alt.Tooltip("first:Q", format=".0%", title="first in resamples"),
    ]
    base = alt.Chart(rows).encode(y=y, color=colour, tooltip=tips)
    bars = base.mark_rule(strokeWidth=2.5).encode(x=alt.X("ci_low:Q", title=axis_title, scale=scale), x2="ci_high:Q")
    points = base.mark_point(filled=True, size=70).encode(x=alt.X("mean:Q", title=axis_title, scale=scale))
    return alt.LayerChart(layer=[bars, points]).properties(
        title=alt.TitleParams(
            f"{title}: {better}",
            subtitle=[
                *textwrap.wrap(metric_meaning(metric, modality), SUBTITLE_CHARS),
                f"point: mean · bar: 95% bootstrap interval ({ranking.resamples} resamples of the inputs, "
                f"seed {ranking.seed})",
            ],
        ),
        height=alt.Step(28),
    )


def value_domain(rows: pd.DataFrame, bounds: tuple[float | None, float | None]) -> list[float]:
    """The x axis: the intervals with a little room either side, never past the values the metric can take."""
    low, high = float(rows["ci_low"].min()), float(rows["ci_high"].max())
    pad = 0.06 * ((high - low) or abs(high) or 1.0)
    lowest, highest = bounds
    return [
        low - pad if lowest is None else max(lowest, low - pad),
        high + pad if highest is None else min(highest, high + pad),
    ]


def agreement_frame(ranking: Ranking) -> pd.DataFrame:
    """Kendall's tau between the metrics' method orders as a symmetric matrix of metric titles (1 on the diagonal)."""
    counts = ranking.table.groupby("metric", sort=False).size()
    names = [c for c in ranking.metrics if counts[c] >= 2]  # a metric one method has ranks nothing
    titles = [METRICS.get(c, (c, ""))[0] for c in names]
    m = pd.DataFrame(float("nan"), index=titles, columns=titles)
    for t in titles:
        m.loc[t, t] = 1.0
    for r in ranking.agreement.itertuples():
        if r.metric_a not in names or r.metric_b not in names:
            continue
        a, b = METRICS.get(r.metric_a, (r.metric_a, ""))[0], METRICS.get(r.metric_b, (r.metric_b, ""))[0]
        m.loc[a, b] = m.loc[b, a] = r.tau
    return m


def ranking_table(ranking: Ranking, labels: Mapping[str, str]) -> pd.DataFrame:
    """The ranking as a readable table: metric, rank, method, mean [95% interval], inputs, overlapping methods."""
    t = ranking.table
    return pd.DataFrame(
        {
            "metric": [f"{METRICS.get(c, (c, ''))[0]} ({METRICS.get(c, ('', ''))[1]})" for c in t["metric"]],
            "rank": t["rank"].astype(int),
            "method": [labels.get(m, m) for m in t["method"]],
            "mean [95% interval]": [f"{r.mean:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]" for r in t.itertuples()],
            "inputs": t["n"].astype(int),
            "interval overlaps": [", ".join(labels.get(o, o) for o in ts) or "none" for ts in t["tied_with"]],
            "first in resamples": [f"{v:.0%}" for v in t["first_share"]],
        }
    )


def ranking_view(result: Comparison, labels: Mapping[str, str], modality: str) -> None:
    """The Ranking section of Compare: the agreement summary, one chart per ranked metric, Kendall's tau between
    the metrics' orders, and the table."""
    st.subheader("Ranking")
    ranking = comparison_ranking(result.per_input, result.summary, labels=labels, seed=result.seed)
    if ranking.table.empty:
        st.caption("No metric with a declared direction has values to rank the methods by.")
        return
    st.info(ranking.summary, icon=":material/balance:")
    st.caption(
        f"Per metric, the methods ordered by their mean over the {len(result.sample)} inputs, best first, with a 95% "
        "interval from resampling the inputs. Green: the best mean and every method whose interval overlaps it, "
        "which these inputs do not separate from it; overlapping intervals are not proof of a tie, and separate "
        "ones hold for these inputs and this model only."
        + "".join(f" {METRICS.get(c, (c, ''))[0]} is not ranked: {why}." for c, why in ranking.skipped.items())
    )
    charts = [
        ranking_chart(part, str(c), labels, modality, ranking)
        for c, part in ranking.table.groupby("metric", sort=False)
        if len(part) >= 2  # one method ranks nothing (the summary says so)
    ]
    for start in range(0, len(charts), 2):
        for col, chart in zip(st.columns(2), charts[start : start + 2], strict=False):  # the last row may be short
            col.altair_chart(chart, width="stretch")
    agreement = agreement_frame(ranking)
    if len(agreement) >= 2:
        st.altair_chart(
            matrix_heatmap(
                agreement,
                "Kendall's τ between the metrics' method orders (1: same order, −1: reversed)",
                value_title="Kendall τ",
            ),
            width="content",
        )
    with st.expander("Ranking table"):
        st.dataframe(ranking_table(ranking, labels), hide_index=True, width="stretch")
