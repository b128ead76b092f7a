"""The input of the Attention page for a generative language model: the Generate page's last prompt and answer, or a
prompt typed here, and the decoder's attention over it as an `AttentionView` (the page's grid, head view and
rollout draw it as for any transformer)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from xaidash.dashboard.components.generate_answer import shown_token
from xaidash.dashboard.components.generate_compute import LMContext, attention_of, loaded_or_stop, prompt_of
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.nav import page_path
from xaidash.dashboard.state import selected_run
from xaidash.explainers.inspection.attention_view import AttentionView
from xaidash.models.language.prompt import Prompt

INSIDE_KEY = "gen_inside"  # written by the Generate page: (model key, prompt, answer ids)
TEXT_KEY = "attention_lm_prompt"
DEFAULT_TEXT = "What is the capital of France?"


@dataclass(frozen=True)
class LanguageInput:
    ctx: LMContext
    prompt: Prompt
    ids: tuple[int, ...]  # prompt, then answer
    view: AttentionView

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt)


def _context() -> LMContext:
    run = selected_run("language")
    if run is None:
        st.stop()
    return loaded_or_stop(run)


def _from_generate(ctx: LMContext) -> tuple[Prompt, tuple[int, ...]] | None:
    stored = st.session_state.get(INSIDE_KEY)
    if not stored or stored[0] != ctx.key:
        return None
    return stored[1], tuple(stored[2])


def language_attention_input() -> LanguageInput:
    """The prompt and answer to look inside (the page stops until there is one)."""
    ctx = _context()
    from_generate = _from_generate(ctx)
    options = ["generate", "typed"] if from_generate else ["typed"]
    source = st.radio(
        "Text",
        options,
        horizontal=True,
        key="attention_lm_source",
        format_func=lambda o: {"generate": "the Generate page's prompt and answer", "typed": "a prompt typed here"}[o],
    )
    if source == "generate" and from_generate is not None:
        prompt, answer = from_generate
        st.caption(f"Prompt: {prompt.text}")
    else:
        st.session_state.setdefault(TEXT_KEY, DEFAULT_TEXT)
        text = st.text_area("Prompt", key=TEXT_KEY, height=80)
        chat = st.toggle("Chat template", value=ctx.lm.has_chat_template, disabled=not ctx.lm.has_chat_template)
        try:
            prompt = prompt_of(ctx, text, chat)
        except Exception as e:  # noqa: BLE001 - an empty prompt, for instance: one line, then stop
            show_error(e, "Prompt")
            st.stop()
        answer = ()
        st.page_link(page_path("generate"), label="Generate an answer first to see it here too", icon=":material/chat:")
    if prompt.notice:
        st.warning(prompt.notice, icon=":material/content_cut:")
    ids = tuple(prompt.ids) + tuple(answer)
    tokens = tuple(shown_token(t) for t in ctx.lm.token_text(list(ids)))
    with st.spinner("Reading the attention of every layer…"):
        try:
            view = attention_of(ctx, ids, tokens)
        except Exception as e:  # noqa: BLE001 - too many tokens, for instance: one line, then stop
            show_error(e, "Attention")
            st.stop()
    return LanguageInput(ctx, prompt, ids, view)
