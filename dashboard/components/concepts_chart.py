"""The Concepts page's results: an altair chart of TCAV scores (each random set's score as a dot, the mean with
a ±1 std bar, random-vs-random beside each layer, a rule at 0.5) and the results table."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from xaidash.explainers.concepts.flags import flag_kind

RANDOM_LABEL = "random vs random"


def _state(r: dict[str, Any]) -> str:
    """A result's state in two words: a flag outranks the test (a flagged result is no finding)."""
    if r.get("flags"):
        return "flagged"
    return "significant" if r["significant"] else "not significant"


def score_frame(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (layer, concept, random set) score, random-vs-random rows once per layer."""
    rows: list[dict[str, Any]] = []
    randoms: dict[str, list[float]] = {}
    for r in results:
        label = f"{r['concept']} ({_state(r)})"
        rows += [{"layer": r["layer"], "concept": label, "score": s, "kind": "concept"} for s in r["scores"]]
        randoms.setdefault(r["layer"], list(r["random_scores"]))
    for layer, scores in randoms.items():  # once per layer, after its concepts
        rows += [{"layer": layer, "concept": RANDOM_LABEL, "score": s, "kind": "random"} for s in scores]
    return pd.DataFrame(rows)


def score_chart(results: list[dict[str, Any]]) -> alt.LayerChart | alt.FacetChart:
    frame = score_frame(results)
    y = alt.Y("score:Q", title="TCAV score (share of the class's inputs, 0–1)", scale=alt.Scale(domain=[0, 1]))
    x = alt.X(
        "concept:N",
        title=None,
        sort=None,
        axis=alt.Axis(labelAngle=0, labelLimit=170, labelOverlap=False, labelFlush=False),
    )
    colour = alt.Color(
        "kind:N",
        title="scores of",
        scale=alt.Scale(domain=["concept", "random"], range=["#1f77b4", "#9e9e9e"]),
        legend=alt.Legend(
            orient="bottom",
            labelLimit=320,
            labelExpr="datum.label == 'random' ? 'random sets vs each other' : 'the concept vs each random set'",
        ),
    )
    base = alt.Chart(frame)
    dots = base.mark_circle(size=45, opacity=0.55).encode(
        x=x,
        y=y,
        color=colour,
        tooltip=["layer", "concept", alt.Tooltip("score:Q", format=".2f")],
    )
    bars = base.mark_errorbar(extent="stdev", thickness=2, color="black").encode(x=x, y=alt.Y("score:Q", title=""))
    means = base.mark_tick(color="black", thickness=3, size=26).encode(x=x, y="mean(score):Q")
    half = alt.Chart(pd.DataFrame({"score": [0.5]})).mark_rule(strokeDash=[5, 4], color="#d62728").encode(y="score:Q")
    return (
        alt.layer(dots, bars, means, half, data=frame)
        .properties(width=alt.Step(170), height=300)
        .facet(column=alt.Column("layer:N", title="layer"), data=frame)
    )


def results_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "layer": r["layer"],
                "concept": r["concept"],
                "TCAV score (mean ± std)": f"{r['mean']:.2f} ± {r['std']:.2f}",
                "range over random sets": f"{r['min']:.2f}–{r['max']:.2f}",
                "random vs random": f"{r['random_mean']:.2f} ± {r['random_std']:.2f}",
                "p (Bonferroni)": f"{r['p_adjusted']:.2g}",
                "CAV accuracy": f"{r['cav_accuracy']:.2f}" if r.get("cav_accuracy") is not None else "–",
                "result": r["verdict"],
                "flags": "; ".join(flag_kind(f) for f in r.get("flags", [])) or "–",
            }
            for r in results
        ]
    )


HOW_TO_READ = (
    "How to read: each dot is one TCAV score, the share of the class's test inputs whose class score rises when "
    "their activations at that layer move towards the concept (the concept's CAV, learnt against one random set). "
    "The black tick and bar are the mean ± 1 std over the random sets; grey dots are random sets scored against "
    "each other, what chance gives. A concept is a finding only if the two-sided t-test against the random "
    "scores is significant after the Bonferroni correction (p < α); then a mean above the random ones says the "
    "class uses it, below says it counts against the class. 'Not significant' means no finding, whatever the mean. "
    "'Flagged' means no finding either, whatever p: the concept is made of the tested class itself (circular), or "
    "its CAV barely tells the concept from random examples (near chance)."
)


def show_results(report: dict[str, Any]) -> None:
    results = report["results"]
    findings = [r for r in results if r.get("finding", r["significant"])]
    st.subheader(f"Class “{report['target']}”")
    for r in results:
        text = f"**{r['concept']}** at `{r['layer']}`: "
        if r.get("flags"):
            test = "significant" if r["significant"] else "not significant"
            reasons = "\n".join(f"- {f[0].upper()}{f[1:]}" for f in r["flags"])
            st.warning(
                text + f"flagged: no finding (the test alone: {test}, score {r['mean']:.2f} vs random "
                f"{r['random_mean']:.2f}, p = {r['p_adjusted']:.2g}).\n{reasons}",
                icon=":material/flag:",
            )
        elif r["significant"]:
            st.success(
                text
                + f"{r['verdict']} (score {r['mean']:.2f} vs random {r['random_mean']:.2f}, p = {r['p_adjusted']:.2g})",
                icon=":material/check_circle:",
            )
        else:
            st.warning(
                text + f"not significant: no finding (p = {r['p_adjusted']:.2g} ≥ {r['alpha']})",
                icon=":material/remove_circle:",
            )
    st.altair_chart(score_chart(results), width="content")
    st.caption(HOW_TO_READ)
    st.dataframe(results_table(results), hide_index=True, width="stretch")
    st.caption(
        f"{report['examples']} examples per concept and per random set, {report['random_sets']} random sets, "
        f"{report['inputs']} test inputs of the class, seed {report['seed']}; {len(results)} tests "
        f"(Bonferroni); CAVs {report['cavs_cached']} from the cache, {report['cavs_trained']} trained; "
        f"{report['seconds']:.1f} s. {len(findings)} finding{'s' if len(findings) != 1 else ''}."
    )
    for note in report.get("notes", []):
        st.caption(f"Note: {note}")
