"""The Generate and Attention pages' computations on a language model, each cached per model weights and inputs
(`services.lm_cache`, shared by every session: a rerun, or another session asking the same, is instant) and run
on a leased replica of the model (`services.lease_lm`), the queue shown while every replica is busy.

Nothing is computed here: every call is a lower-layer function (models.language, explainers.language)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import streamlit as st

from xaidash.dashboard import services
from xaidash.dashboard.components.model_queue import queued
from xaidash.dashboard.errors import show_error
from xaidash.dashboard.nav import page_path
from xaidash.dashboard.state import LAST_KIND_KEY, selected_run
from xaidash.explainers.inspection.attention_view import AttentionView
from xaidash.explainers.language.api import PromptExplanation, run_method
from xaidash.explainers.language.faithfulness import FaithfulnessScore, deletion_insertion
from xaidash.explainers.language.inside import decoder_view
from xaidash.explainers.language.logit_lens import LogitLens, logit_lens
from xaidash.explainers.language.query import FeatureUnit, PromptQuery, make_query
from xaidash.models.language.convert import convert_time_text
from xaidash.models.language.generate import Generation, generate
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import Prompt, build_prompt
from xaidash.models.runs.store import Run

T = TypeVar("T")


@dataclass(frozen=True)
class Target:
    """What to explain in an answer: steps [start, stop), an optional contrast token, the feature unit, whether
    template tokens are features too."""

    span: tuple[int, int]
    contrast: int | None = None
    unit: FeatureUnit = "token"
    include_template: bool = False


@dataclass(frozen=True)
class LMContext:
    """The run and its loaded model (the first replica), and the key of its weights for the caches."""

    run: Run
    lm: LanguageModel
    key: str


def context_of(run: Run) -> LMContext:
    return LMContext(run, services.language_model_for(run), services.lm_key(run))


def loaded_or_stop(run: Run) -> LMContext:
    """The run's model loaded (with a spinner), or its error shown and the page stopped."""
    try:
        with st.spinner("Loading the model…"):
            return context_of(run)
    except Exception as e:  # noqa: BLE001  (shown with its cause; the app keeps running)
        show_error(e, f"Could not load run {run.id}")
        st.stop()
    raise AssertionError("unreachable")


def language_model_or_stop() -> LMContext:
    """The selected language model's run and model (every language-model page starts here), or what to do, and
    the page stops."""
    run = selected_run("language")
    if run is None:
        st.info(
            "No generative language model yet. Press “Get SmolLM2” in Home's quick start (a 135M-parameter chat "
            f"model shipped offline, converted once: {convert_time_text()}), or import one: "
            "`xaidash import hf:FOLDER` or `xaidash import gguf:FILE`.",
            icon=":material/info:",
        )
        st.page_link(page_path("home"), label="Go to Home", icon=":material/home:")
        st.stop()
    st.session_state[LAST_KIND_KEY] = "language"  # the Attention page follows the kind worked with last
    return loaded_or_stop(run)


@contextmanager
def leased(ctx: LMContext) -> Iterator[LanguageModel]:
    """`services.lease_lm` with the queue shown on the page while every replica is busy."""
    with queued(partial(services.lease_lm, ctx.run, ctx.lm)) as lm:
        yield lm


def cached(key: tuple[Any, ...], compute: Callable[[], T]) -> tuple[T, bool]:
    """(value, whether it was reused) from the shared cache."""
    return services.lm_cache().get_or_compute(key, compute)


def prompt_of(ctx: LMContext, text: str, chat: bool) -> Prompt:
    """The prompt as the model reads it (the tokenizer alone: no replica needed)."""
    value, _ = cached(("prompt", ctx.key, text, bool(chat)), lambda: build_prompt(ctx.lm, text, chat=chat))
    return value


def generation_of(
    ctx: LMContext, prompt: Prompt, max_new_tokens: int, sample: bool, temperature: float, seed: int
) -> tuple[Generation, bool]:
    """The answer (greedy, or sampled with `seed` and `temperature`)."""
    settings = (int(max_new_tokens), True, float(temperature), int(seed)) if sample else (int(max_new_tokens), False)

    def compute() -> Generation:
        with leased(ctx) as lm:
            return generate(
                lm, prompt, max_new_tokens=int(max_new_tokens), sample=sample, temperature=temperature, seed=seed
            )

    return cached(("generate", ctx.key, prompt, settings), compute)


def query_of(ctx: LMContext, prompt: Prompt, answer_ids: tuple[int, ...], target: Target) -> PromptQuery:
    """What to explain in the answer, built once (the tokenizer alone: no replica needed) and cached: the key of
    every method's maps and of the faithfulness curves. Only the steps up to the explained one are read, so a
    longer answer with the same start asks the same."""
    stop = target.span[1]

    def compute() -> PromptQuery:
        return make_query(
            ctx.lm,
            prompt,
            answer_ids,
            span=target.span,
            contrast=target.contrast,
            unit=target.unit,
            include_template=target.include_template,
        )

    value, _ = cached(("query", ctx.key, prompt, tuple(answer_ids[:stop]), target), compute)
    return value


def _frozen(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


def explanation_of(
    ctx: LMContext, query: PromptQuery, method: str, params: Mapping[str, Any]
) -> tuple[PromptExplanation, bool]:
    """One method's attributions of the query's target to the prompt's features, on a leased replica."""

    def compute() -> PromptExplanation:
        with leased(ctx) as lm:
            return run_method(lm, query, method, params)

    return cached(("explain", ctx.key, query, method, _frozen(params)), compute)


def faithfulness_of(
    ctx: LMContext, query: PromptQuery, explanations: Mapping[str, PromptExplanation]
) -> dict[str, FaithfulnessScore]:
    """Deletion and insertion of the prompt's features in each method's order (and random orders), against the
    explained output."""
    methods = tuple((m, _frozen(e.params)) for m, e in explanations.items())

    def compute() -> dict[str, FaithfulnessScore]:
        with leased(ctx) as lm:
            return deletion_insertion(lm, query, dict(explanations))

    value, _ = cached(("faithfulness", ctx.key, query, methods), compute)
    return value


def logit_lens_of(ctx: LMContext, ids: tuple[int, ...]) -> LogitLens:
    """The residual stream after every layer, decoded through the final norm and the unembedding: the top token
    and its probability per layer and position."""

    def compute() -> LogitLens:
        with leased(ctx) as lm:
            return logit_lens(lm, list(ids))

    value, _ = cached(("logit_lens", ctx.key, ids), compute)
    return value


def attention_of(ctx: LMContext, ids: tuple[int, ...], tokens: tuple[str, ...]) -> AttentionView:
    """Every layer's and head's attention over `ids` (causal: zero above the diagonal), labelled with `tokens`."""

    def compute() -> AttentionView:
        with leased(ctx) as lm:
            return decoder_view(lm, list(ids), list(tokens))

    value, _ = cached(("attention", ctx.key, ids, tokens), compute)
    return value
