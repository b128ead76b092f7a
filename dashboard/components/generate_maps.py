"""Which prompt tokens produced the picked token: the model rows each method will run (before running), each
method's map side by side with its colour bar, units and caption (explainers/language/figures.py), the prompt x
generated-token matrix, and deletion / insertion per method."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from xaidash.dashboard.components.explain_maps import map_card
from xaidash.dashboard.components.generate_compute import (
    LMContext,
    Target,
    explanation_of,
    faithfulness_of,
    query_of,
)
from xaidash.dashboard.errors import guard, show_error
from xaidash.explainers.language.api import PromptExplanation, planned_extra_rows, planned_rows
from xaidash.explainers.language.faithfulness import (
    DELETION_DIRECTION,
    INSERTION_DIRECTION,
    RANDOM,
    FaithfulnessScore,
    chance_verdict,
)
from xaidash.explainers.language.figures import matrix_spec, prompt_figures, quoted, target_label, top_features
from xaidash.explainers.language.query import PromptQuery
from xaidash.explainers.language.registry import get_prompt_method
from xaidash.explainers.session import Outcome, run_session
from xaidash.models.language.prompt import Prompt

MAPS_PER_ROW = 3
CARD_WIDTH = 420


@dataclass(frozen=True)
class MapsRequest:
    """What the Run button asked for: the prompt, the answer's ids, the target and the methods with their
    parameters (kept in the session, so reruns redraw it from the cache)."""

    key: str
    prompt: Prompt
    answer_ids: tuple[int, ...]
    target: Target
    methods: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]

    @property
    def method_params(self) -> dict[str, dict[str, Any]]:
        return {m: dict(p) for m, p in self.methods}


def make_request(
    ctx: LMContext,
    prompt: Prompt,
    answer_ids: tuple[int, ...],
    target: Target,
    methods: Mapping[str, Mapping[str, Any]],
) -> MapsRequest:
    frozen = tuple((m, tuple(sorted(p.items()))) for m, p in methods.items())
    return MapsRequest(ctx.key, prompt, tuple(answer_ids), target, frozen)


def rows_sentence(query: PromptQuery, methods: Mapping[str, Mapping[str, Any]]) -> str:
    """'This will run 1,234 model rows: Feature ablation 12 · Shapley value sampling 1,200 · …'."""
    rows, extra = planned_rows(query, methods), planned_extra_rows(query, methods)

    def part(m: str) -> str:
        spec = get_prompt_method(m)
        more = f" (up to {extra[m]:,} more {spec.extra_when})" if extra.get(m) else ""
        return f"{spec.label} {rows[m]:,}{more}"

    return f"This will run {sum(rows.values()):,} model rows over {query.n_features} features: " + (
        " · ".join(part(m) for m in rows) + "."
    )


def compute_maps(ctx: LMContext, query: PromptQuery, request: MapsRequest) -> dict[str, PromptExplanation]:
    """Each method's explanation as one session (from the cache when asked before); a method that fails says why
    in one line and the others go on. A spinner, not a status box, says which method runs: nothing is left on the
    page that would shift the elements below between runs (an expander below would close)."""
    methods = request.method_params
    order = list(methods)

    def compute(m: str) -> PromptExplanation:
        with st.spinner(f"Explaining with {get_prompt_method(m).label} ({order.index(m) + 1} of {len(order)})…"):
            return explanation_of(ctx, query, m, methods[m])[0]

    def said(outcome: Outcome[PromptExplanation]) -> None:
        if outcome.exception is not None:
            show_error(outcome.exception, get_prompt_method(outcome.method).label)

    outcomes = run_session(order, compute, done=said)
    return {o.method: o.value for o in outcomes if o.value is not None}


def maps_grid(query: PromptQuery, explanations: Mapping[str, PromptExplanation], key: str) -> None:
    """The maps side by side (three to a row), each with its colour bar, units, caption and strongest features."""
    figures = prompt_figures(query, explanations)
    items = list(figures.items())
    for row in range(0, len(items), MAPS_PER_ROW):
        cols = st.columns(MAPS_PER_ROW)
        for col, (m, fig) in zip(cols, items[row : row + MAPS_PER_ROW], strict=False):
            with col:
                map_card(fig, key=f"{key}_{m}", width=CARD_WIDTH, warn=False, enlarge=False)
                e = explanations[m]
                top = ", ".join(f"{quoted(t)} {v:+.3g}" for _, t, v in top_features(e.labels, e.attributions, 3))
                st.caption(f"strongest: {top}")


def readable(spec: dict[str, Any]) -> dict[str, Any]:
    """The matrix drawn large enough to read: every axis label shown, cells of 30 px, the legend's long title
    whole under the chart."""
    enc = spec.get("encoding", {})
    for axis in ("x", "y"):
        enc.get(axis, {}).setdefault("axis", {}).update(labelOverlap=False, labelLimit=140, labelFontSize=12)
    colour = enc.get("color")
    if isinstance(colour, dict):
        colour["legend"] = {
            "orient": "bottom",
            "direction": "horizontal",
            "titleLimit": 700,
            "gradientLength": 320,
            "titleFontSize": 12,
        }
    spec.setdefault("config", {}).setdefault("view", {})["step"] = 30
    return spec


def matrix_section(query: PromptQuery, explanations: Mapping[str, PromptExplanation], key: str) -> None:
    """The prompt x generated-token matrix of one method (those that made per-step rows)."""
    st.markdown("**Every generated token at once**")
    with_rows = [m for m, e in explanations.items() if e.per_step is not None]
    if not with_rows:
        st.caption(
            "None of these maps came with a row per generated token. Methods whose passes give them at no extra "
            "cost make them always; gradient methods make them with 'per step' on in Method settings."
        )
        return
    m = st.columns([1, 2])[0].selectbox(
        "Method of the matrix",
        with_rows,
        format_func=lambda i: get_prompt_method(i).label,
        key=f"{key}_matrix_method",
    )
    spec = matrix_spec(query, explanations[m])
    if spec is not None:
        st.vega_lite_chart(readable(spec), width="content")
        st.caption(
            "Rows: each generated token's own log-probability; columns: the prompt's features. Hover a cell for "
            "its value."
        )


def method_label(name: str) -> str:
    if name == RANDOM:
        return "random order (baseline)"
    return get_prompt_method(name).label


def faithfulness_table(scores: Mapping[str, FaithfulnessScore]) -> pd.DataFrame:
    """One row per method (the random baseline last) with its deletion and insertion AUCs."""
    rows = []
    for name, score in scores.items():
        spread = name == RANDOM
        rows.append(
            {
                "method": method_label(name),
                "deletion AUC": score.deletion_auc,
                "insertion AUC": score.insertion_auc,
                "± (random orders)": f"{score.deletion_auc_std:.3g} / {score.insertion_auc_std:.3g}" if spread else "",
            }
        )
    return pd.DataFrame(rows)


def curves_chart(scores: Mapping[str, FaithfulnessScore]) -> alt.FacetChart:
    """Deletion and insertion curves side by side: the explained output after moving each share of features."""
    rows = [
        {"method": method_label(name), "curve": curve, "fraction": float(f), "output": float(v)}
        for name, score in scores.items()
        for curve, values in (("deletion", score.deletion), ("insertion", score.insertion))
        for f, v in zip(score.fractions, values, strict=True)
    ]
    frame = pd.DataFrame(rows)
    names = [method_label(n) for n in scores if n != RANDOM]
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
    colours = [palette[i % len(palette)] for i in range(len(names))] + ["#7f7f7f"]
    dashed = alt.condition(f"datum.method == '{method_label(RANDOM)}'", alt.value([4, 3]), alt.value([1, 0]))
    return (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("fraction:Q", title="share of prompt features moved (strongest first)", axis=alt.Axis(format="%")),
            y=alt.Y("output:Q", title="explained log-probability (nats)"),
            color=alt.Color(
                "method:N", title="order", scale=alt.Scale(domain=[*names, method_label(RANDOM)], range=colours)
            ),
            strokeDash=dashed,
            tooltip=["method", "curve", alt.Tooltip("fraction:Q", format=".0%"), alt.Tooltip("output:Q", format=".3f")],
        )
        .properties(width=340, height=240)
        .facet(column=alt.Column("curve:N", title=None, sort=["deletion", "insertion"]))
    )


def faithfulness_section(ctx: LMContext, query: PromptQuery, explanations: Mapping[str, PromptExplanation]) -> None:
    st.markdown("**How faithful is each map**")
    st.caption(
        "Deletion: the prompt's features are hidden (replaced by the baseline token) strongest first, and the "
        "explained log-probability is read after each; a faithful map makes it fall fast (lower area under the "
        "curve is better). Insertion: they are shown one by one into the fully hidden prompt in the same order; a "
        "faithful map makes it rise fast (higher is better). A random order is the baseline to beat."
    )
    with guard("Deletion and insertion"):
        scores = faithfulness_of(ctx, query, explanations)
        table, verdict = st.columns([3, 2])
        table.dataframe(
            faithfulness_table(scores),
            hide_index=True,
            width="content",
            column_config={
                "deletion AUC": st.column_config.NumberColumn(format="%.3f", help=DELETION_DIRECTION),
                "insertion AUC": st.column_config.NumberColumn(format="%.3f", help=INSERTION_DIRECTION),
            },
        )
        sentence = chance_verdict(scores)
        if sentence:
            verdict.warning(sentence, icon=":material/casino:")
        st.altair_chart(curves_chart(scores), width="content")


def maps_section(ctx: LMContext, request: MapsRequest, key: str = "gen_maps") -> None:
    """Everything the Run button computed, drawn again on every rerun (from the cache)."""
    query = query_of(ctx, request.prompt, request.answer_ids, request.target)  # checked when Run was pressed
    explanations = compute_maps(ctx, query, request)
    if not explanations:
        return
    st.markdown(f"**Which prompt {query.unit}s produced {target_label(query)}**")
    maps_grid(query, explanations, key)
    matrix_section(query, explanations, key)
    faithfulness_section(ctx, query, explanations)
