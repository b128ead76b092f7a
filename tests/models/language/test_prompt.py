"""Prompts: the chat template around the user's text, the features (the user's own tokens only), raw mode, words,
and the bound on a prompt's length."""

from __future__ import annotations

import pytest
from smollm2_run import smollm2_lm
from tiny_lm import tiny_lm

from xaidash.models.language.prompt import MAX_NEW_TOKENS, MAX_PROMPT_TOKENS, Prompt, build_prompt, word_groups
from xaidash.models.registry import ModelError

QUESTION = "what is the capital of france ?"


@pytest.fixture(scope="module")
def lm():
    return tiny_lm("llama")


def _template_tokens(prompt: Prompt) -> list[str]:
    return [t for i, t in enumerate(prompt.tokens) if i not in prompt.features]


def test_chat_features_are_the_users_tokens_only(lm):
    prompt = build_prompt(lm, QUESTION)
    assert prompt.chat and prompt.rendered == lm.tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True
    )
    assert list(prompt.ids) == lm.tokenizer(prompt.rendered, add_special_tokens=False)["input_ids"]
    assert prompt.feature_tokens() == QUESTION.split()
    assert not {prompt.ids[p] for p in prompt.features} & lm.special_ids()
    assert {"<|im_start|>", "<|im_end|>", "user", "assistant"} == set(_template_tokens(prompt))  # (no newline token)
    assert prompt.features == tuple(range(prompt.features[0], prompt.features[-1] + 1))  # one run, in order
    assert prompt.truncated == 0 and prompt.notice == "" and prompt.original_tokens == len(QUESTION.split())


def test_template_words_typed_by_the_user_are_features(lm):
    """The user's own "user" and "assistant" count; the template's copies of them do not."""
    prompt = build_prompt(lm, "the assistant is a user")
    assert prompt.feature_tokens() == ["the", "assistant", "is", "a", "user"]
    assert prompt.tokens.count("assistant") == 2 and prompt.tokens.count("user") == 2
    first, last = prompt.features[0], prompt.features[-1]
    assert prompt.tokens[first - 2 : first] == ("<|im_start|>", "user") and prompt.tokens[last + 1] == "<|im_end|>"


def test_raw_mode_reads_the_text_alone(lm):
    prompt = build_prompt(lm, QUESTION, chat=False)
    assert not prompt.chat and prompt.rendered == QUESTION
    assert prompt.features == tuple(range(len(QUESTION.split()))) and prompt.feature_tokens() == QUESTION.split()


def test_a_model_without_a_template_is_read_raw():
    bare = tiny_lm("gpt2")
    bare.tokenizer.chat_template = None
    prompt = build_prompt(bare, QUESTION, chat=True)
    assert not prompt.chat and prompt.rendered == QUESTION and len(prompt.features) == len(prompt)


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_an_empty_prompt_is_refused(lm, text):
    with pytest.raises(ModelError, match="The prompt is empty"):
        build_prompt(lm, text)


def test_a_prompt_of_template_tokens_only_is_refused(lm):
    with pytest.raises(ModelError, match="only template or special tokens"):
        build_prompt(lm, "<|im_end|>", chat=False)


def test_a_long_prompt_is_cut_with_a_notice(lm):
    overhead = len(build_prompt(lm, "cat")) - 1  # the template's tokens around one word
    words = QUESTION.split()
    prompt = build_prompt(lm, QUESTION, max_tokens=overhead + 4)
    assert len(prompt) == overhead + 4 and prompt.feature_tokens() == words[:4]
    assert prompt.text == " ".join(words[:4]) and prompt.truncated == len(words) - 4
    assert prompt.original_tokens == len(words)
    assert "first 4 of 7 tokens" in prompt.notice
    raw = build_prompt(lm, QUESTION, chat=False, max_tokens=3)
    assert raw.feature_tokens() == words[:3] and raw.truncated == 4 and "3 of 7" in raw.notice


def test_the_default_bound_and_the_models_context(lm):
    long_text = " ".join(["cat dog"] * MAX_PROMPT_TOKENS)
    prompt = build_prompt(lm, long_text, chat=False)  # context 512: room is left for the answer
    assert len(prompt) == lm.context - MAX_NEW_TOKENS and prompt.truncated == 2 * MAX_PROMPT_TOKENS - len(prompt)
    assert prompt.notice
    with pytest.raises(ModelError, match="chat template alone takes"):
        build_prompt(lm, "cat", max_tokens=3)


def _bpe_prompt(tokens: list[str], features: tuple[int, ...] | None = None) -> Prompt:
    return Prompt(
        text="".join(tokens),
        rendered="".join(tokens),
        ids=tuple(range(len(tokens))),
        tokens=tuple(tokens),
        features=tuple(range(len(tokens))) if features is None else features,
        chat=False,
    )


def test_word_groups_of_bpe_tokens():
    tokens = ["Hello", ",", " world", "!", " ", "1", "2", "3", " don", "'t", "\n", "Sm", "ol", "LM"]
    assert word_groups(_bpe_prompt(tokens)) == [[0, 1], [2, 3], [4, 5, 6, 7], [8, 9], [10, 11, 12, 13]]
    # template tokens in between (not features) always end a word
    assert word_groups(_bpe_prompt(tokens, (0, 1, 2, 5, 6, 11, 12))) == [[0, 1], [2], [5, 6], [11, 12]]


def test_word_groups_cover_the_features_in_order(lm):
    prompt = build_prompt(lm, QUESTION)
    groups = word_groups(prompt)
    assert [p for g in groups for p in g] == list(prompt.features)


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    return smollm2_lm(tmp_path_factory)


@pytest.mark.slow
def test_smollm2_template_and_system_prompt_are_not_features(smollm2):
    question = "What is the capital of France? Ask the assistant, not the system."
    prompt = build_prompt(smollm2, question)
    assert prompt.chat and "<|im_start|>system" in prompt.rendered  # SmolLM2's template adds a system prompt
    assert "".join(prompt.feature_tokens()) == question
    system_end = prompt.rendered.index("<|im_end|>")
    assert (
        len(smollm2.tokenizer(prompt.rendered[:system_end], add_special_tokens=False)["input_ids"]) < prompt.features[0]
    )
    assert prompt.tokens[prompt.features[-1] + 1] == "<|im_end|>" and prompt.tokens[-2:] == ("istant", "\n")
    assert not {prompt.ids[p] for p in prompt.features} & smollm2.special_ids()
    words = ["".join(prompt.tokens[p] for p in g).strip() for g in word_groups(prompt)]
    assert words == [
        "What",
        "is",
        "the",
        "capital",
        "of",
        "France?",
        "Ask",
        "the",
        "assistant,",
        "not",
        "the",
        "system.",
    ]
    raw = build_prompt(smollm2, question, chat=False)
    assert raw.rendered == question and len(raw.features) == len(raw) == len(prompt.features)
