"""What if: edit the prompt, regenerate, and see the two answers and one method's attributions side by side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from xaidash.dashboard.components.generate_answer import answer_view, shown_token
from xaidash.dashboard.components.generate_compute import (
    LMContext,
    Target,
    explanation_of,
    generation_of,
    prompt_of,
    query_of,
)
from xaidash.dashboard.components.generate_prompt import PromptSettings
from xaidash.dashboard.errors import guard
from xaidash.explainers.language.figures import prompt_figures, target_label
from xaidash.explainers.language.registry import get_prompt_method
from xaidash.explainers.language.targets import matching_span
from xaidash.models.language.generate import Generation

WHATIF_KEY = "gen_whatif"


@dataclass(frozen=True)
class WhatIf:
    key: str
    text: str
    method: str
    params: tuple[tuple[str, Any], ...]


def matching_target(original: Generation, target: Target, edited: Generation) -> tuple[Target | None, str]:
    """The original's explained token in the edited answer (`targets.matching_span`: the same steps when the text
    there is the same, else its nearest occurrence, else none) and what to tell the reader; a contrast is kept
    when it still differs from the token."""
    found = matching_span([s.token for s in original.steps], target.span, [s.token for s in edited.steps])
    if found.span is None:
        return None, found.note
    start, stop = found.span
    contrast = target.contrast if stop - start == 1 and target.contrast != edited.ids[start] else None
    return Target((start, stop), contrast, target.unit, target.include_template), found.note


def _side(
    ctx: LMContext,
    generation: Generation,
    target: Target | None,
    method: str,
    params: dict[str, Any],
    title: str,
    note: str = "",
) -> None:
    st.markdown(f"**{title}**")
    st.caption(f"Prompt: {generation.prompt.text}")
    answer_view(generation, marked=None if target is None else target.span)
    if note:
        st.info(note, icon=":material/compare_arrows:" if target is not None else ":material/block:")
    if target is None:
        return
    with guard(get_prompt_method(method).label):
        query = query_of(ctx, generation.prompt, generation.ids, target)
        explanation, _ = explanation_of(ctx, query, method, params)
        fig = prompt_figures(query, {method: explanation})[method]
        st.caption(f"{fig.label}: which prompt {query.unit}s produced {target_label(query)}")
        st.markdown(fig.tokens_html or "", unsafe_allow_html=True)
        st.markdown(fig.colorbar_html(), unsafe_allow_html=True)
        st.caption(fig.caption.text())


def whatif_section(
    ctx: LMContext,
    settings: PromptSettings,
    generation: Generation,
    target: Target,
    methods: dict[str, dict[str, Any]],
) -> None:
    """Edit the prompt; the Regenerate button answers it with the same settings and explains the same token (where
    the new answer has it) with one method, beside the original."""
    st.caption(
        "Change a word of the prompt and see whether the answer, and what produced it, change. The edited answer "
        f"is explained at the same token, {shown_token(generation.span_text(*target.span))!r}: at the same step "
        "when it writes it there, else where it writes it nearest (said so); when it does not write it at all, "
        "nothing is explained for it. Each side has its own colour scale."
    )
    if st.session_state.get(f"{WHATIF_KEY}_seed") != generation.prompt.text:  # a new answer: start from its prompt
        st.session_state[f"{WHATIF_KEY}_seed"] = generation.prompt.text
        st.session_state[f"{WHATIF_KEY}_text"] = generation.prompt.text
    edited = st.text_area("Edited prompt", key=f"{WHATIF_KEY}_text", height=90)
    choices = list(methods) or []
    if not choices:
        st.caption("Pick a method above first.")
        return
    method = st.selectbox(
        "Method", choices, format_func=lambda m: get_prompt_method(m).label, key=f"{WHATIF_KEY}_method"
    )
    if st.button("Regenerate and compare", icon=":material/difference:", key=f"{WHATIF_KEY}_run"):
        st.session_state[WHATIF_KEY] = WhatIf(ctx.key, edited, method, tuple(sorted(methods[method].items())))
    asked = st.session_state.get(WHATIF_KEY)
    if not isinstance(asked, WhatIf) or asked.key != ctx.key:
        return
    with guard("What if"):
        prompt = prompt_of(ctx, asked.text, settings.chat)
        other, _ = generation_of(
            ctx, prompt, settings.max_new_tokens, settings.sample, settings.temperature, settings.seed
        )
        if not other.steps:
            st.info("The edited prompt got an empty answer.")
            return
        left, right = st.columns(2)
        with left:
            _side(ctx, generation, target, asked.method, dict(asked.params), "Original")
        with right:
            matched, note = matching_target(generation, target, other)
            _side(ctx, other, matched, asked.method, dict(asked.params), "Edited", note)
