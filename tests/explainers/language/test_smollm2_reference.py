"""The real SmolLM2-135M-Instruct (imported once per session, tests/support/smollm2_run.py): asked "What is the capital
of France?", it answers with " Paris"; the prompt methods' attributions of that token equal captum's own
`LLMAttribution` call on the same features (feature ablation exactly, the sampling methods with the same draws),
the prompt's " France" produced the answer's " France", the chat template is not among the features, and a contrast with " London" is the
difference of the two tokens' attributions."""

from __future__ import annotations

import numpy as np
import pytest
from smollm2_run import smollm2_lm

from xaidash.explainers.language.api import explain_prompt
from xaidash.explainers.language.query import PromptQuery, make_query
from xaidash.explainers.language.reference import reference_attributions
from xaidash.models.language.generate import generate
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import build_prompt

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"
ATOL = 1e-4


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> LanguageModel:
    return smollm2_lm(tmp_path_factory)


@pytest.fixture(scope="module")
def paris(lm: LanguageModel) -> PromptQuery:
    """The query explaining the answer's " Paris" (the steps before it read teacher-forced)."""
    prompt = build_prompt(lm, QUESTION)
    answer = generate(lm, prompt, max_new_tokens=8)
    assert " Paris" in answer.text
    step = next(i for i, s in enumerate(answer.steps) if s.token == " Paris")
    return make_query(lm, prompt, answer.ids, span=(step, step + 1))


def test_feature_ablation_of_paris_equals_captums_and_france_produced_the_answers_france(
    lm: LanguageModel, paris: PromptQuery
) -> None:
    ours = explain_prompt(lm, paris, {"feature_ablation": {}})["feature_ablation"]
    ref = reference_attributions(lm, paris, "feature_ablation")
    assert np.abs(ref).max() > 0.1
    np.testing.assert_allclose(ours.attributions, ref, atol=ATOL)
    assert ours.rows == paris.n_features + 1
    # The answer "The capital of France is Paris." already names France before " Paris" (read teacher-forced), so
    # the prompt's " France" shows on the answer's own " France" (the same rows give every step's values).
    france = lm.token_text(paris.target_ids).index(" France")
    assert ours.per_step is not None
    assert paris.labels[int(np.argmax(ours.per_step[france]))] == " France"


def test_the_chat_template_is_not_among_the_features(paris: PromptQuery) -> None:
    assert "".join(paris.labels) == QUESTION  # the user's tokens, nothing of the template around them
    assert "assistant" in paris.prompt.rendered and len(paris.prompt) > 2 * paris.n_features


@pytest.mark.parametrize(
    ("method", "params"),
    [("shapley_sampling", {"n_samples": 2}), ("kernel_shap", {"n_samples": 10}), ("lime", {"n_samples": 10})],
)
def test_sampling_methods_equal_captums_with_the_same_draws(
    lm: LanguageModel, paris: PromptQuery, method: str, params: dict
) -> None:
    ours = explain_prompt(lm, paris, {method: params})[method]
    ref = reference_attributions(lm, paris, method, params)
    assert np.abs(ref).max() > 0.1
    np.testing.assert_allclose(ours.attributions, ref, atol=ATOL)


def test_paris_rather_than_london_is_the_difference_of_their_attributions(
    lm: LanguageModel, paris: PromptQuery
) -> None:
    step = paris.span[0]
    london = lm.tokenizer(" London", add_special_tokens=False)["input_ids"]
    assert len(london) == 1
    other = list(paris.target_ids)
    other[step] = london[0]
    contrast = make_query(lm, paris.prompt, paris.target_ids, span=paris.span, contrast=london[0])
    got = explain_prompt(lm, contrast, {"feature_ablation": {}})["feature_ablation"].attributions
    own = explain_prompt(lm, paris, {"feature_ablation": {}})["feature_ablation"].attributions
    theirs = explain_prompt(lm, make_query(lm, paris.prompt, other, span=paris.span), {"feature_ablation": {}})
    expected = own - theirs["feature_ablation"].attributions
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(got, expected, atol=ATOL)
