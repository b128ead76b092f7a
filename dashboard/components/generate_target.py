"""What to explain in an answer: a generated token or a span (a select slider over the steps), a contrast token
(one of that step's alternatives, or typed), the feature unit and whether template tokens are features too; and
which methods (the registry's, featured ones by default), with their parameters built from the declared schemas."""

from __future__ import annotations

from typing import Any

import streamlit as st

from xaidash.dashboard.components.generate_answer import shown_token
from xaidash.dashboard.components.generate_compute import Target
from xaidash.dashboard.components.params import param_controls
from xaidash.explainers.language.registry import featured_prompt_methods, get_prompt_method, list_prompt_methods
from xaidash.models.language.generate import Generation
from xaidash.models.language.model import LanguageModel

DEFAULT_METHODS = 3
SPAN_KEY = "gen_target_span"  # the slider's key (the page outlines the span it picks in the answer)
NO_CONTRAST = -1
TYPED = -2


def default_step(generation: Generation, special: set[int]) -> int:
    """The step picked first: the answer's last word-like token (in "The capital of France is Paris." that is
    " Paris"), else its first."""
    for k in range(len(generation.steps) - 1, -1, -1):
        step = generation.steps[k]
        if step.id not in special and any(ch.isalnum() for ch in step.token):
            return k
    return 0


def _step_label(generation: Generation, k: int) -> str:
    return f"{k}: {shown_token(generation.steps[k].token)}"


def pick_span(generation: Generation, lm: LanguageModel, key: str) -> tuple[int, int]:
    """Steps [start, stop) to explain: one token, or a span (drag both ends of the slider)."""
    n = len(generation.steps)
    if n == 1:
        st.caption(f"Explaining the only generated token, {shown_token(generation.steps[0].token)!r}.")
        return 0, 1
    k = default_step(generation, lm.special_ids())
    start, end = st.select_slider(
        "Generated token or span to explain",
        options=list(range(n)),
        value=(k, k),
        format_func=lambda i: _step_label(generation, int(i)),
        key=key,
        help="drag one end to explain a span of tokens (their log-probabilities summed)",
    )
    return int(start), int(end) + 1


def typed_token(lm: LanguageModel, text: str) -> tuple[int | None, str]:
    """(token id, note) of a typed contrast: its first token, and a note when it is several tokens."""
    ids = list(lm.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []
    if not ids:
        return None, ""
    if len(ids) == 1:
        return int(ids[0]), ""
    pieces = " + ".join(repr(t) for t in lm.token_text(ids))
    return int(
        ids[0]
    ), f"{text!r} is {len(ids)} tokens ({pieces}): the contrast is its first, {lm.token_text(ids[:1])[0]!r}."


def pick_contrast(generation: Generation, lm: LanguageModel, span: tuple[int, int], key: str) -> int | None:
    """A token the generated one is compared with ("why ' Paris' rather than ' Lyon'"): one of the step's
    alternatives, or typed. One-token spans only."""
    if span[1] - span[0] != 1:
        st.caption("Contrast: pick a single token to compare it with another.")
        return None
    step = generation.steps[span[0]]
    alternatives = {i: (t, p) for t, i, p in step.alternatives if i != step.id}
    options = [NO_CONTRAST, *alternatives, TYPED]

    def label(i: int) -> str:
        if i == NO_CONTRAST:
            return "none: explain the token itself"
        if i == TYPED:
            return "another token (type it)"
        t, p = alternatives[i]
        return f"{shown_token(t)!r} ({p:.1%})"

    chosen = st.selectbox(
        f"Rather than… (contrast with {shown_token(step.token)!r})",
        options,
        format_func=label,
        key=f"{key}_{span[0]}",
        help="explain log p(generated) − log p(contrast): which prompt tokens made the model write this token "
        "rather than that one",
    )
    if chosen == NO_CONTRAST:
        return None
    if chosen != TYPED:
        return int(chosen)
    typed = st.text_input("Contrast token", key=f"{key}_typed", placeholder=" London")
    token_id, note = typed_token(lm, typed)
    if note:
        st.caption(note)
    return token_id


def pick_target(generation: Generation, lm: LanguageModel, key: str = "gen_target") -> Target:
    c1, c2 = st.columns([3, 2])
    with c1:
        span = pick_span(generation, lm, f"{key}_span")
    with c2:
        contrast = pick_contrast(generation, lm, span, f"{key}_contrast")
    c3, c4 = st.columns([3, 2])
    unit = c3.radio(
        "Prompt features",
        ["token", "word"],
        horizontal=True,
        key=f"{key}_unit",
        format_func=lambda u: {"token": "tokens", "word": "words (a word's tokens perturbed together)"}[u],
    )
    include = c4.toggle(
        "Include template tokens",
        value=False,
        key=f"{key}_template",
        help="off: only your own tokens are features (the template and special tokens, which matter to any "
        "answer, stay in place); on: every prompt token is one, as captum's defaults",
    )
    return Target(
        span=span, contrast=contrast, unit="word" if unit == "word" else "token", include_template=bool(include)
    )


def pick_methods(key: str = "gen_methods") -> dict[str, dict[str, Any]]:
    """The methods to run (the featured ones by default) and each one's parameters: {method id: params}."""
    specs = {s.id: s for s in list_prompt_methods()}
    if not specs:
        st.info("No prompt attribution method is registered.", icon=":material/info:")
        return {}
    chosen = st.multiselect(
        "Methods",
        list(specs),
        default=featured_prompt_methods(limit=DEFAULT_METHODS) or list(specs)[:DEFAULT_METHODS],
        format_func=lambda m: specs[m].label,
        key=key,
        help="each method's map is drawn side by side, on its own colour scale",
    )
    out: dict[str, dict[str, Any]] = {}
    with st.expander("Method settings"):
        if not chosen:
            st.caption("No method chosen.")
        for m in chosen:
            spec = get_prompt_method(m)
            st.markdown(f"**{spec.label}**")
            out[m] = param_controls(spec, key)
    return out
