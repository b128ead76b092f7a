"""Generation on small random models: greedy and seeded sampling, each step's probability and alternatives, and
where it stops."""

from __future__ import annotations

import pytest
import torch
from tiny_lm import tiny_lm

from xaidash.models.language.generate import ALTERNATIVES, generate
from xaidash.models.language.prompt import MAX_NEW_TOKENS, Prompt, build_prompt
from xaidash.models.registry import ModelError

QUESTION = "what is the capital of france ?"


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def lm(request):
    return tiny_lm(request.param, seed=1)


@pytest.fixture(scope="module")
def prompt(lm):
    return build_prompt(lm, QUESTION)


def _probs_after(lm, ids: list[int]) -> torch.Tensor:
    """The next-token distribution from one full forward pass (no key-value cache)."""
    return torch.softmax(lm.logits(torch.tensor([ids]))[0, -1], dim=-1)


def test_greedy_is_deterministic_and_matches_full_passes(lm, prompt):
    first = generate(lm, prompt, max_new_tokens=8)
    again = generate(lm, prompt, max_new_tokens=8)
    assert first.ids == again.ids and not first.sample and first.seed is None
    ids = list(prompt.ids)
    for step in first.steps:  # the cached loop gives what a pass over the whole sequence gives
        probs = _probs_after(lm, ids)
        assert step.id == int(probs.argmax())
        assert step.prob == pytest.approx(float(probs[step.id]), abs=1e-5)
        assert step.token == lm.tokenizer.decode([step.id])
        ids.append(step.id)
    assert first.span_text(1, 3) == first.steps[1].token + first.steps[2].token
    kept = first.steps[:-1] if first.stopped == "end of text" else first.steps
    assert first.text == "".join(s.token for s in kept)
    assert first.prompt is prompt and first.seconds > 0


def test_sampling_is_reproducible_per_seed(lm, prompt):
    draws = {
        seed: generate(lm, prompt, max_new_tokens=12, sample=True, temperature=1.5, seed=seed) for seed in range(4)
    }
    assert generate(lm, prompt, max_new_tokens=12, sample=True, temperature=1.5, seed=2).ids == draws[2].ids
    assert len({g.ids for g in draws.values()}) > 1  # different seeds draw differently
    assert all(g.sample and g.seed == seed and g.temperature == 1.5 for seed, g in draws.items())
    greedy = generate(lm, prompt, max_new_tokens=12)
    assert any(g.ids != greedy.ids for g in draws.values())


def test_sampled_probabilities_are_the_unfiltered_ones(lm, prompt):
    gen = generate(lm, prompt, max_new_tokens=6, sample=True, temperature=0.5, seed=7)
    ids = list(prompt.ids)
    for step in gen.steps:  # the probability shown is the model's, not the tempered one it was drawn from
        assert step.prob == pytest.approx(float(_probs_after(lm, ids)[step.id]), abs=1e-5)
        ids.append(step.id)


def test_alternatives_are_sorted_and_hold_the_chosen_top_token(lm, prompt):
    for gen in (generate(lm, prompt, max_new_tokens=6), generate(lm, prompt, max_new_tokens=6, sample=True, seed=3)):
        for step in gen.steps:
            probs = [p for _, _, p in step.alternatives]
            assert len(step.alternatives) == ALTERNATIVES and probs == sorted(probs, reverse=True)
            assert all(text == lm.tokenizer.decode([i]) for text, i, _ in step.alternatives)
            if step.prob >= probs[-1]:  # the chosen token is in the top: it is listed, with its probability
                assert (step.token, step.id) in [(t, i) for t, i, _ in step.alternatives]
            if not gen.sample:
                assert step.alternatives[0][1] == step.id and step.alternatives[0][2] == pytest.approx(step.prob)
    assert len(generate(lm, prompt, max_new_tokens=1, alternatives=2).steps[0].alternatives) == 2


@pytest.mark.parametrize("count", [0, -1, MAX_NEW_TOKENS + 1])
def test_max_new_tokens_out_of_bounds(lm, prompt, count):
    with pytest.raises(ModelError, match=f"max new tokens must be 1-{MAX_NEW_TOKENS}"):
        generate(lm, prompt, max_new_tokens=count)


@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_sampling_temperature_must_be_positive(lm, prompt, temperature):
    with pytest.raises(ModelError, match="temperature must be above 0"):
        generate(lm, prompt, sample=True, temperature=temperature)


def test_max_new_tokens_bounds_the_answer(lm, prompt):
    for count in (1, 3, 9):
        gen = generate(lm, prompt, max_new_tokens=count)
        assert len(gen.steps) <= count
        if gen.stopped == "max new tokens":
            assert len(gen.steps) == count


def test_the_context_bounds_the_answer(lm):
    ids = tuple([9] * (lm.context - 2))
    full = Prompt("x", "x", ids, tuple(lm.token_text(ids)), (0,), chat=False)
    assert len(generate(lm, full, max_new_tokens=10).steps) <= 2
    over = Prompt("x", "x", (*ids, 9, 9), tuple(lm.token_text((*ids, 9, 9))), (0,), chat=False)
    with pytest.raises(ModelError, match="fills the model's context"):
        generate(lm, over)


def test_stops_at_the_end_of_text_token(lm, prompt):
    """The generation config's end ids stop it: the first token a seeded draw writes for the first time after its
    second step is made an end id, so the same draw ends there."""
    settings = {"max_new_tokens": 16, "sample": True, "temperature": 2.0, "seed": 5}
    drawn = generate(lm, prompt, **settings)
    stop_at = next(i for i, s in enumerate(drawn.steps) if 2 <= i < len(drawn.steps) - 1 and s.id not in drawn.ids[:i])
    config = lm.model.generation_config
    saved = config.eos_token_id
    try:
        config.eos_token_id = [drawn.ids[stop_at]]
        ended = generate(lm, prompt, **settings)
    finally:
        config.eos_token_id = saved
    assert ended.ids == drawn.ids[: stop_at + 1] and ended.stopped == "end of text"
    assert ended.text == ended.span_text(0, stop_at)  # the answer's text leaves its end token out
    assert len(ended.steps) < len(drawn.steps)
