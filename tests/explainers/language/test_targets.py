"""Which answer token is explained first (a content token the prompt does not hold, never a filler token), and the
same token found again in an edited answer (What if): same step, nearest occurrence said so, or gone."""

from __future__ import annotations

import pytest

from xaidash.explainers.language.targets import (
    FIRST_CONTENT,
    FIRST_TOKEN,
    FIRST_WORD,
    NEW_CONTENT,
    default_target,
    is_content,
    matching_span,
)
from xaidash.models.language.generate import Generation, Step
from xaidash.models.language.prompt import Prompt

EOS = 2


def _generation(question: str, tokens: list[str], stopped: bool = False) -> Generation:
    words = question.split(" ")
    prompt_tokens = tuple(w if i == 0 else " " + w for i, w in enumerate(words))
    prompt = Prompt(
        text=question,
        rendered=question,
        ids=tuple(range(10, 10 + len(words))),
        tokens=prompt_tokens,
        features=tuple(range(len(words))),
        chat=False,
    )
    steps = [Step(100 + k, t, 0.5, ()) for k, t in enumerate(tokens)]
    if stopped:
        steps.append(Step(EOS, "<|im_end|>", 0.9, ()))
    return Generation(prompt, tuple(steps), "end of text" if stopped else "max new tokens", 0.1, False, None, 1.0)


# SmolLM2's greedy answer to the issue's question, cut at 32 tokens (wrong, but what it writes): the old rule (the
# last word-like token) picked step 31, " the".
PLANET = [
    *["The", " largest", " planet", " in", " the", " solar", " system", " is", " Neptune", ",", " but", " it", "'s"],
    *[" actually", " a", " planet", " in", " its", " own", " right", ".", " Neptune", " is", " the", " eighth"],
    *[" planet", " from", " the", " Sun", " and", " is", " the"],
]


def test_the_issue_answer_defaults_to_its_new_content_word_not_a_filler() -> None:
    gen = _generation("What is the largest planet in the solar system?", PLANET)
    assert len(gen.steps) == 32 and gen.steps[31].token == " the"
    picked = default_target(gen, {EOS})
    assert (picked.step, gen.steps[picked.step].token, picked.why) == (8, " Neptune", NEW_CONTENT)


def test_paris_is_picked_in_the_capital_answer() -> None:
    gen = _generation(
        "What is the capital of France?", ["The", " capital", " of", " France", " is", " Paris", "."], True
    )
    assert gen.steps[default_target(gen, {EOS}).step].token == " Paris"


def test_every_content_word_repeated_falls_back_to_the_first_content_word() -> None:
    gen = _generation("is red a colour", ["Yes", ",", " red", " is", " a", " colour", "."], True)
    picked = default_target(gen, {EOS})
    assert (gen.steps[picked.step].token, picked.why) == (" red", FIRST_CONTENT)


def test_no_content_word_falls_back_to_the_first_non_blank_token_then_the_first() -> None:
    gen = _generation("say something", ["\n", " ", " the", ".", " of"], True)
    picked = default_target(gen, {EOS})
    assert (picked.step, picked.why) == (2, FIRST_WORD)
    only_special = default_target(_generation("say nothing", [], True), {EOS})
    assert (only_special.step, only_special.why) == (0, FIRST_TOKEN)


@pytest.mark.parametrize(
    ("token", "content"),
    [
        (" Jupiter", True),
        ("42", True),
        (" Paris", True),
        (" the", False),
        ("The", False),
        (".", False),
        (" ", False),
        ("\n", False),
        ("<|im_end|>", False),
        (" it's", False),
        ("", False),
    ],
)
def test_what_counts_as_filler(token: str, content: bool) -> None:
    assert is_content(token) is content


def test_a_special_token_is_never_the_default_when_the_answer_has_another() -> None:
    gen = _generation("name a planet", ["Mars"], True)
    assert default_target(gen, {EOS}).step == 0
    assert default_target(gen, {EOS, 100}).why == FIRST_TOKEN  # "Mars" declared special too: nothing else left


def test_same_step_when_the_text_there_is_the_same() -> None:
    original = [" the", " cat", " sat", " on", " the", " mat"]
    edited = [" the", " dog", " sat", " on", " the", " rug"]
    found = matching_span(original, (4, 5), edited)
    assert found.span == (4, 5) and found.note == ""


def test_the_issue_what_if_the_at_step_31_is_not_matched_to_the_first_the() -> None:
    """The original " the" was step 31; the edited answer has " the" at steps 4 and 29: the nearest, 29, is
    explained, and the note says so (the old rule took the first, step 4, and promised the same token)."""
    original = [f" w{k}" for k in range(31)] + [" the"]
    edited = [f" v{k}" for k in range(4)] + [" the"] + [f" v{k}" for k in range(5, 29)] + [" the", " end"]
    found = matching_span(original, (31, 32), edited)
    assert found.span == (29, 30)
    assert "' the'" in found.note and "step 29" in found.note and "step 31" in found.note
    assert "nearest" in found.note


def test_a_gone_token_is_said_and_nothing_is_matched() -> None:
    found = matching_span([" Paris", " is"], (0, 1), [" Rome", " is"])
    assert found.span is None
    assert "does not write ' Paris'" in found.note and "nothing is explained" in found.note


def test_a_span_is_matched_whole() -> None:
    original = ["A", " big", " red", " dog"]
    edited = [" big", " red", " cat", "!", " big", " red"]
    found = matching_span(original, (1, 3), edited)
    assert found.span == (0, 2) and "steps 0-1" in found.note and "steps 1-2" in found.note
