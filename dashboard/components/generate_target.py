"""What to explain in an answer: a generated token (the answer's tokens as pills: click one) or a span (a select
slider over the steps, kept in step with the pills), starting at the answer's default target, a contrast token
(one of that step's alternatives, or typed), the feature unit and whether template tokens are features too; and
which methods (the registry's, featured ones by default), with their parameters built from the declared schemas."""

from __future__ import annotations

import re
from typing import Any

import streamlit as st

from xaidash.dashboard.components.generate_answer import shown_token
from xaidash.dashboard.components.generate_compute import Target
from xaidash.dashboard.components.params import param_controls
from xaidash.explainers.language.registry import featured_prompt_methods, get_prompt_method, list_prompt_methods
from xaidash.explainers.language.targets import DefaultTarget, default_target
from xaidash.models.language.generate import Generation
from xaidash.models.language.model import LanguageModel

DEFAULT_METHODS = 3
SPAN_KEY = "gen_target_span"  # the slider's key (the page outlines the span it picks in the answer)
PICK_KEY = "gen_target_pick"  # the answer's tokens as pills: a click picks the token to explain
FOR_KEY = "gen_target_for"  # the answer the two widgets' state belongs to (a new answer starts at its default)
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$:])")
ZERO_WIDTH = "\u200b"
NO_CONTRAST = -1
TYPED = -2


def _stored_span(n: int | None = None) -> tuple[int, int] | None:
    """The slider's state as (first, last) step, None when unset or not a span of an answer of n steps."""
    value = st.session_state.get(SPAN_KEY)
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not all(isinstance(v, int) for v in value):
        return None
    first, last = int(value[0]), int(value[1])
    return (first, last) if 0 <= first <= last and (n is None or last < n) else None


def sync_target_state(generation: Generation, lm: LanguageModel) -> DefaultTarget:
    """The answer's default target (`explainers.language.targets`); a new answer starts the token pills and the
    slider at it, the same answer keeps what the user picked. Set here, before either widget is drawn, so neither
    is given a default of its own."""
    default = default_target(generation, lm.special_ids())
    identity = (generation.prompt, generation.ids)
    if st.session_state.get(FOR_KEY) != identity or _stored_span(len(generation.steps)) is None:
        st.session_state[FOR_KEY] = identity
        st.session_state[SPAN_KEY] = (default.step, default.step)
        st.session_state[PICK_KEY] = default.step
    return default


def picked_span(generation: Generation) -> tuple[int, int]:
    """Steps [start, stop) the widgets pick (read from their state: the answer above them outlines it)."""
    span = _stored_span(len(generation.steps))
    return (0, 1) if span is None else (span[0], span[1] + 1)


def _token_clicked() -> None:
    """A token pill was clicked: the slider follows (one token); clicking the picked pill again keeps it picked."""
    k = st.session_state.get(PICK_KEY)
    if k is None:
        span = _stored_span()
        st.session_state[PICK_KEY] = span[0] if span is not None and span[0] == span[1] else None
        return
    st.session_state[SPAN_KEY] = (int(k), int(k))


def _slider_moved() -> None:
    """The slider moved: the pills show its token, or none for a span."""
    span = _stored_span()
    st.session_state[PICK_KEY] = span[0] if span is not None and span[0] == span[1] else None


def _step_label(generation: Generation, k: int) -> str:
    return f"{k}: {shown_token(generation.steps[k].token)}"


def pill_labels(tokens: list[str]) -> list[str]:
    """Each token as its pill shows it: markdown characters escaped (a pill's label is markdown), and a repeated
    token made unique with zero-width spaces (Streamlit maps a clicked label back to its option by its text, so two
    " the" pills would both pick the last)."""
    seen: dict[str, int] = {}
    out = []
    for token in tokens:
        text = MARKDOWN_SPECIAL.sub(r"\\\1", shown_token(token).strip())
        repeats = seen.get(text, 0)
        seen[text] = repeats + 1
        out.append(text + ZERO_WIDTH * repeats)
    return out


def pick_token(generation: Generation, default: DefaultTarget) -> None:
    """The answer's tokens as pills: a click explains that token (the slider below follows)."""
    steps = generation.steps
    labels = pill_labels([s.token for s in steps])
    st.pills(
        "Token to explain: click one of the answer",
        list(range(len(steps))),
        format_func=lambda k: labels[int(k)],
        key=PICK_KEY,
        on_change=_token_clicked,
        help="the slider below picks the same token, or a span of several",
    )
    st.caption(
        f"Picked first: {shown_token(steps[default.step].token)!r} (step {default.step}), {default.why}. Click "
        "another token to explain it instead."
    )


def pick_span(generation: Generation) -> tuple[int, int]:
    """Steps [start, stop) to explain: one token, or a span (drag both ends of the slider)."""
    n = len(generation.steps)
    if n == 1:
        st.caption(f"Explaining the only generated token, {shown_token(generation.steps[0].token)!r}.")
        return 0, 1
    lo, hi = picked_span(generation)
    start, end = st.select_slider(
        "Generated token or span to explain",
        options=list(range(n)),
        value=(lo, hi - 1),  # a tuple makes it a range slider; its state (set above) is what it shows
        format_func=lambda i: _step_label(generation, int(i)),
        key=SPAN_KEY,
        on_change=_slider_moved,
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


def pick_target(generation: Generation, lm: LanguageModel, default: DefaultTarget, key: str = "gen_target") -> Target:
    pick_token(generation, default)
    c1, c2 = st.columns([3, 2])
    with c1:
        span = pick_span(generation)
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
