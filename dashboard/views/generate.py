"""Generate: ask a generative language model, see each token's probability and alternatives, and which prompt
tokens produced a token of the answer by several methods side by side; what if the prompt changes; and inside
the model, the logit lens."""

from __future__ import annotations

from typing import Any

import streamlit as st

from xaidash.dashboard.components.generate_answer import answer_view
from xaidash.dashboard.components.generate_compute import (
    LMContext,
    Target,
    generation_of,
    language_model_or_stop,
    prompt_of,
    query_of,
)
from xaidash.dashboard.components.generate_features import features_panel
from xaidash.dashboard.components.generate_inside import INSIDE_KEY
from xaidash.dashboard.components.generate_maps import MapsRequest, make_request, maps_section, rows_sentence
from xaidash.dashboard.components.generate_prompt import PromptSettings, prompt_inputs, rendered_view
from xaidash.dashboard.components.generate_target import pick_methods, pick_target, picked_span, sync_target_state
from xaidash.dashboard.components.generate_whatif import whatif_section
from xaidash.dashboard.components.logit_lens_view import logit_lens_section
from xaidash.dashboard.errors import guard
from xaidash.dashboard.nav import page_path
from xaidash.data.errors import XaidashError
from xaidash.explainers.language.targets import DefaultTarget
from xaidash.models.language.generate import Generation
from xaidash.models.language.prompt import Prompt

ANSWER_KEY = "gen_answer"  # (model key, Generation) of the last Generate press
REQUEST_KEY = "gen_request"  # the last Run press's MapsRequest


def header() -> None:
    st.title("Generate")
    st.caption(
        "Ask a generative language model, see how sure it was of each token, and which words of your prompt made "
        "it write a token of its answer, by several attribution methods side by side."
    )


def live_prompt(ctx: LMContext, settings: PromptSettings) -> Prompt | None:
    """The prompt as the model will read it (None while the box is empty; errors wait for Generate)."""
    if not settings.text.strip():
        return None
    try:
        return prompt_of(ctx, settings.text, settings.chat)
    except Exception:  # noqa: BLE001 - said when Generate is pressed
        return None


def generate_button(ctx: LMContext, settings: PromptSettings) -> None:
    if not st.button("Generate", type="primary", icon=":material/play_arrow:", key="gen_go"):
        return
    with guard("Generate"):
        prompt = prompt_of(ctx, settings.text, settings.chat)
        with st.spinner("Generating…"):
            generation, _ = generation_of(
                ctx, prompt, settings.max_new_tokens, settings.sample, settings.temperature, settings.seed
            )
        st.session_state[ANSWER_KEY] = (ctx.key, generation)
        st.session_state.pop(REQUEST_KEY, None)


def current_answer(ctx: LMContext) -> Generation | None:
    stored = st.session_state.get(ANSWER_KEY)
    if not stored or stored[0] != ctx.key:
        return None
    return stored[1]


def answer_section(generation: Generation, settings: PromptSettings, marked: tuple[int, int] | None) -> None:
    st.subheader("Answer")
    if generation.prompt.text != settings.text or generation.prompt.chat != settings.chat:
        st.caption("The answer below is to the prompt as it was when Generate was pressed.")
    if generation.prompt.notice:
        st.warning(generation.prompt.notice, icon=":material/content_cut:")
    if not generation.steps:
        st.info("The model wrote nothing.")
        return
    answer_view(generation, marked)


def explain_section(
    ctx: LMContext, generation: Generation, default: DefaultTarget
) -> tuple[Target, dict[str, dict[str, Any]]]:
    """Pick the token, methods and settings; Run stores the request; its maps are drawn on every rerun."""
    st.subheader("Which prompt tokens produced it")
    target = pick_target(generation, ctx.lm, default)
    methods = pick_methods()
    ready = False
    with guard("Explanation settings"):
        query = query_of(ctx, generation.prompt, generation.ids, target)  # built once, then read from the cache
        if methods:
            st.caption(rows_sentence(query, methods))
            ready = True
    pressed = st.button("Run", type="primary", icon=":material/science:", key="gen_run", disabled=not ready)
    if pressed:
        st.session_state[REQUEST_KEY] = make_request(ctx, generation.prompt, generation.ids, target, methods)
    request = st.session_state.get(REQUEST_KEY)
    if isinstance(request, MapsRequest) and request.key == ctx.key and request.prompt == generation.prompt:
        if request.target != target or request.method_params != methods:
            st.caption("The settings changed since these maps were made: press Run to update them.")
        maps_section(ctx, request)
        return request.target, request.method_params
    return target, methods


def features_section(ctx: LMContext, generation: Generation, target: Target) -> None:
    """Which SAE features at a layer drove the same target (a target that cannot be explained is said above)."""
    try:
        query = query_of(ctx, generation.prompt, generation.ids, target)
    except XaidashError:
        return
    features_panel(ctx, query)


def inside_section(ctx: LMContext, generation: Generation) -> None:
    st.subheader("Inside the model")
    # An answer that ended with the end-of-text token is read without it: nothing is predicted after it.
    answer = generation.ids[:-1] if generation.stopped == "end of text" else generation.ids
    ids = tuple(generation.prompt.ids) + tuple(answer)
    st.session_state[INSIDE_KEY] = (ctx.key, generation.prompt, tuple(answer))
    st.page_link(
        page_path("attention"),
        label="Attention heads for this prompt and answer (every layer and head, head view, rollout)",
        icon=":material/visibility:",
        query_params={"run": ctx.run.id},
    )
    logit_lens_section(ctx, ids, generation.prompt, key="gen_lens")


def main() -> None:
    header()
    ctx = language_model_or_stop()
    settings = prompt_inputs(ctx.lm)
    prompt = live_prompt(ctx, settings)
    if prompt is not None and prompt.notice:
        st.warning(prompt.notice, icon=":material/content_cut:")
    if settings.show_rendered and prompt is not None:
        rendered_view(prompt)
    generate_button(ctx, settings)
    generation = current_answer(ctx)
    if generation is None:
        st.info("Type a prompt and press Generate.", icon=":material/edit:")
        return
    if not generation.steps:
        answer_section(generation, settings, None)
        return
    default = sync_target_state(generation, ctx.lm)  # before the answer, which outlines the picked token
    answer_section(generation, settings, picked_span(generation))
    target, methods = explain_section(ctx, generation, default)
    features_section(ctx, generation, target)
    st.subheader("What if the prompt changes")
    whatif_section(ctx, settings, generation, target, methods)
    inside_section(ctx, generation)


main()
