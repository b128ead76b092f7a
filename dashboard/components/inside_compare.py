"""The Compare page's tables and charts: means with their spread over the inputs, n/a with reasons, the best
method per metric marked, and the sanity check's correlation per step with a band."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import pandas as pd

BEST_MARK = "★"
BEST_BACKGROUND = "background-color: rgba(44, 160, 44, 0.22)"


def arrow(better: str) -> str:
    """↓ for 'lower is better', ↑ for 'higher is better', '' otherwise."""
    return "↓" if better.startswith("lower") else ("↑" if better.startswith("higher") else "")


def _fmt(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}f}"


def metric_cell(row: Mapping[str, Any], metric: str) -> str:
    """One cell of the metrics table: 'mean ± half-width of the 95% interval', the runtime as seconds, or the
    reason the cell is n/a."""
    mean = float(row["mean"])
    if math.isnan(mean):
        return str(row.get("reason") or "n/a")
    if metric == "seconds":
        return f"{mean:.2f} s"
    low, high = float(row["low"]), float(row["high"])
    text = _fmt(mean) if math.isnan(low) else f"{_fmt(mean)} ± {_fmt((high - low) / 2)}"
    if int(row.get("undefined", 0) or 0):
        text += f" (of {int(row['valid'])})"
    return text


def metrics_table(
    summary: pd.DataFrame,
    methods: Sequence[str],
    columns: Sequence[str],
    titles: Mapping[str, tuple[str, str]],
    best: Mapping[str, Sequence[str]],
    labels: Mapping[str, str],
    constant_maps: Mapping[str, int] | None = None,
    n_inputs: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(text table, style table) with methods (labels) as rows and '<title> <arrow>' as columns; the best
    cell of each column starts with ★ and its style is a green background. A 'Constant maps' column says
    how many of each method's maps had a single value (ranking nothing)."""
    index = [labels.get(m, m) for m in methods]
    text: dict[str, list[str]] = {}
    style: dict[str, list[str]] = {}
    for c in columns:
        title, better = titles.get(c, (c, ""))
        name = f"{title} {arrow(better)}".strip()
        cells, styles = [], []
        for m in methods:
            hit = summary[(summary.method == m) & (summary.metric == c)]
            if not len(hit):
                cells.append("n/a: not computed")
                styles.append("")
                continue
            cell = metric_cell(hit.iloc[0], c)
            is_best = m in best.get(c, ())
            cells.append(f"{BEST_MARK} {cell}" if is_best else cell)
            styles.append(BEST_BACKGROUND if is_best else "")
        text[name], style[name] = cells, styles
    if constant_maps is not None:
        total = f" of {n_inputs}" if n_inputs else ""
        text["Constant maps"] = [f"{int(constant_maps.get(m, 0))}{total}" for m in methods]
        style["Constant maps"] = [
            "background-color: rgba(214, 39, 40, 0.18)" if constant_maps.get(m, 0) else "" for m in methods
        ]
    t = pd.DataFrame(text, index=pd.Index(index, name="method"))
    s = pd.DataFrame(style, index=t.index)
    return t, s


def metric_spread_charts(
    per_input: Mapping[str, Mapping[str, Sequence[float]]],
    summary: pd.DataFrame,
    titles: Mapping[str, tuple[str, str]],
    labels: Mapping[str, str],
    methods: Sequence[str],
    ranges: Mapping[str, tuple[float | None, float | None]] | None = None,
) -> list[alt.LayerChart]:
    """One chart per metric (runtime left out): each input as a faint dot, the mean as a bar tick and its 95%
    interval as an error bar; one colour per method, as in the sanity chart.

    ranges: metric -> (lowest, highest) value it can take (None: open). A bounded metric's interval is clipped
    to its range and its axis spans exactly that range; the subtitle says when an interval was clipped, or that
    a metric declares no range (its interval is drawn as computed)."""
    order = [labels.get(m, m) for m in methods]
    colour = alt.Color("method:N", legend=None, scale=alt.Scale(domain=order, scheme="tableau10"))
    charts: list[alt.LayerChart] = []
    metrics = [c for c in dict.fromkeys(summary.metric) if c != "seconds"]
    for c in metrics:
        part = summary[(summary.metric == c) & summary["mean"].notna()]
        if part.empty:
            continue
        title, better = titles.get(c, (c, ""))
        dots = pd.DataFrame(
            [
                {"method": labels.get(m, m), "value": float(v)}
                for m in methods
                for v in per_input.get(m, {}).get(c, [])
                if v is not None and math.isfinite(float(v))
            ]
        )
        lowest, highest = (ranges or {}).get(c, (None, None))
        stats, clipped = _interval_stats(part, labels, lowest, highest)
        y = alt.Y("method:N", sort=order, title=None, axis=alt.Axis(labelLimit=140))
        x_scale = _x_scale(lowest, highest)
        range_note = _range_note(lowest, highest, clipped)
        layers: list[Any] = []
        if not dots.empty:
            layers.append(
                alt.Chart(dots)
                .mark_circle(size=22, opacity=0.35)
                .encode(x=alt.X("value:Q", title=None, scale=x_scale), y=y, color=colour, yOffset=alt.value(0))
            )
        tips: list[Any] = [
            "method",
            alt.Tooltip("mean:Q", format=".3f"),
            alt.Tooltip("low:Q", format=".3f", title="95% low"),
            alt.Tooltip("high:Q", format=".3f", title="95% high"),
            alt.Tooltip("minimum:Q", format=".3f", title="min over inputs"),
            alt.Tooltip("maximum:Q", format=".3f", title="max over inputs"),
            alt.Tooltip("inputs:N", title="inputs with a value"),
        ]
        base = alt.Chart(stats).encode(y=y, color=colour, tooltip=tips)
        layers.append(base.mark_rule(strokeWidth=2.5).encode(x=alt.X("low:Q", title=None, scale=x_scale), x2="high:Q"))
        layers.append(base.mark_tick(thickness=3, size=16).encode(x="mean:Q"))
        chart = alt.LayerChart(layer=layers).properties(
            title=alt.TitleParams(
                f"{title} {arrow(better)}".strip(), subtitle=[f"{better} · bar: 95% CI of the mean", range_note]
            ),
            height=alt.Step(26),
        )
        charts.append(chart)
    return charts


def _interval_stats(
    part: pd.DataFrame, labels: Mapping[str, str], lowest: float | None, highest: float | None
) -> tuple[pd.DataFrame, bool]:
    """One metric's rows of the summary as the chart draws them (the 95% interval clipped to the metric's range),
    and whether an interval was clipped."""
    raw_low = part["low"].fillna(part["mean"]).astype(float)
    raw_high = part["high"].fillna(part["mean"]).astype(float)
    ci_low, ci_high = raw_low.clip(lower=lowest, upper=highest), raw_high.clip(lower=lowest, upper=highest)
    clipped = bool(((ci_low != raw_low) | (ci_high != raw_high)).any())
    stats = pd.DataFrame(
        {
            "method": [labels.get(m, m) for m in part.method],
            "mean": part["mean"].astype(float).values,
            "low": ci_low.values,
            "high": ci_high.values,
            "minimum": part["minimum"].astype(float).values,
            "maximum": part["maximum"].astype(float).values,
            "inputs": [f"{int(v)} of {int(n)}" for v, n in zip(part["valid"], part["n"], strict=True)],
        }
    )
    return stats, clipped


def _x_scale(lowest: float | None, highest: float | None) -> alt.Scale:
    """The value axis: exactly the metric's range when it has both ends, from its lowest value when it has one."""
    if lowest is not None and highest is not None:
        return alt.Scale(domain=[lowest, highest], nice=False, clamp=True)
    return alt.Scale(domainMin=lowest, clamp=True) if lowest is not None else alt.Scale()


def _range_note(lowest: float | None, highest: float | None, clipped: bool) -> str:
    """The subtitle's second line: the metric's declared range and whether an interval was clipped to it."""
    if lowest is None and highest is None:
        return "no declared range: intervals drawn as computed"
    ends = f"[{'−∞' if lowest is None else f'{lowest:g}'}, {'∞' if highest is None else f'{highest:g}'}]"
    return f"values lie in {ends}" + ("; intervals clipped to it" if clipped else "")


def sanity_band_chart(rows: Sequence[Mapping[str, Any]], methods: Sequence[str], band: str = "ci") -> alt.Chart:
    """Mean rank correlation with the trained model's maps per randomisation step, one line per method, with a
    band: the 95% interval of the mean (band='ci') or the range over the inputs (band='range')."""
    lo, hi = ("spearman_low", "spearman_high") if band == "ci" else ("spearman_min", "spearman_max")
    df = pd.DataFrame(
        [
            {
                "method": r["method"],
                "step": int(r["step"]),
                "label": f"{int(r['step'])}: {r['layer']}",
                "spearman": r["spearman"],
                "low": r.get(lo, r["spearman"]),
                "high": r.get(hi, r["spearman"]),
                "constant": f"{int(r.get('constant', 0))} of {int(r.get('n', 0))}",
            }
            for r in rows
        ]
    )
    for c in ("spearman", "low", "high"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["low"] = df["low"].fillna(df["spearman"])
    df["high"] = df["high"].fillna(df["spearman"])
    order = list(dict.fromkeys(df.sort_values("step")["label"]))
    colour = alt.Color(
        "method:N",
        scale=alt.Scale(domain=list(methods or dict.fromkeys(df["method"])), scheme="tableau10"),
        legend=alt.Legend(symbolOpacity=1.0, symbolType="circle"),
    )
    x = alt.X("label:N", sort=order, title="layers randomised (top down), last one named", axis=alt.Axis(labelAngle=0))
    tips: list[Any] = [
        "method",
        "step",
        alt.Tooltip("spearman:Q", format=".3f", title="mean ρ"),
        alt.Tooltip("low:Q", format=".3f", title="band low"),
        alt.Tooltip("high:Q", format=".3f", title="band high"),
        alt.Tooltip("constant:N", title="constant maps"),
    ]
    base = alt.Chart(df).encode(x=x, color=colour, tooltip=tips)
    area = base.mark_area(opacity=0.15).encode(
        y=alt.Y("low:Q", scale=alt.Scale(domain=[-1, 1]), title="Spearman ρ with trained maps"), y2="high:Q"
    )
    line = base.mark_line().encode(y="spearman:Q")
    points = base.mark_point(filled=True, size=50).encode(y="spearman:Q")
    return (area + line + points).properties(height=300)


def sanity_table(rows: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> pd.DataFrame:
    """Methods as rows, steps as columns: 'mean ρ ± half-width [min, max]', with how many maps were constant."""
    by: dict[str, dict[str, str]] = {}
    steps: dict[int, str] = {}
    for r in sorted(rows, key=lambda r: int(r["step"])):
        step = int(r["step"])
        name = "0: trained" if step == 0 else f"{step}: {r['layer']}"
        steps[step] = name
        mean = float(r["spearman"]) if r["spearman"] is not None else float("nan")
        n, constant = int(r.get("n", 0)), int(r.get("constant", 0))
        if math.isnan(mean):
            cell = f"n/a: all {n} maps constant" if constant == n and n else "n/a: no correlation defined"
        else:
            low, high = r.get("spearman_low"), r.get("spearman_high")
            cell = _fmt(mean, 2)
            if low is not None and high is not None and not math.isnan(float(low)):
                cell += f" ± {_fmt((float(high) - float(low)) / 2, 2)}"
            lo_, hi_ = r.get("spearman_min"), r.get("spearman_max")
            if lo_ is not None and hi_ is not None and not math.isnan(float(lo_)) and step > 0:
                cell += f" [{_fmt(float(lo_), 2)}, {_fmt(float(hi_), 2)}]"
            if constant:
                cell += f"; {constant} of {n} constant"
        by.setdefault(labels.get(r["method"], r["method"]), {})[name] = cell
    frame = pd.DataFrame.from_dict(by, orient="index")
    frame = frame[[steps[k] for k in sorted(steps)]]
    frame.index.name = "method"
    return frame
