"""Feature ablation, Shapley value sampling, LIME and KernelSHAP on prompts (explainers/language/methods) against
captum's own `LLMAttribution` call on the same features and target (explainers/language/reference.py), on tiny
random Llama and GPT-2 models: feature ablation exactly, the sampling methods with the same draws (same seed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from tiny_lm import tiny_lm

from xaidash.explainers.language.api import explain_prompt, planned_rows
from xaidash.explainers.language.query import PromptQuery, make_query
from xaidash.explainers.language.reference import captum_input, reference_attributions, reference_per_step
from xaidash.explainers.language.registry import featured_prompt_methods, get_prompt_method, total_of
from xaidash.explainers.registry import OUTPUT_CHANGE
from xaidash.models.language.generate import generate
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import build_prompt

TEXT = "what is the capital of france ? it is a city"
METHODS = {
    "feature_ablation": {},
    "shapley_sampling": {"n_samples": 3},
    "lime": {"n_samples": 40},
    "kernel_shap": {"n_samples": 30},
}
ATOL = 1e-4


def sensitive(lm: LanguageModel, seed: int) -> LanguageModel:
    """The tiny model with weights drawn 5x wider than transformers' init: its log-probabilities then move by tenths
    when a prompt token is hidden (at the default init they move by hundredths, and LIME's Lasso keeps none)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in lm.model.modules():
            if isinstance(m, torch.nn.Linear | torch.nn.Embedding) or type(m).__name__ == "Conv1D":
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * 0.1)
    return lm


Case = tuple[LanguageModel, PromptQuery]


def task_for(kind: str, seed: int = 0, **kw) -> Case:
    lm = sensitive(tiny_lm(kind, seed=seed), seed)
    prompt = build_prompt(lm, TEXT)
    answer = generate(lm, prompt, max_new_tokens=4)
    return lm, make_query(lm, prompt, answer.ids, batch_size=8, seed=7, **kw)


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def case(request: pytest.FixtureRequest) -> Case:
    return task_for(request.param, seed=3)


@pytest.mark.parametrize("method", list(METHODS))
def test_each_method_equals_captums_call(case: Case, method: str) -> None:
    lm, task = case
    params = METHODS[method]
    ours = explain_prompt(lm, task, {method: params})[method]
    ref = reference_attributions(lm, task, method, params)
    assert np.abs(ref).max() > 0.05  # a comparison of zeros would say nothing
    np.testing.assert_allclose(ours.attributions, ref, atol=ATOL)
    steps = reference_per_step(lm, task, method, params)
    assert ours.per_step is not None and ours.per_step.shape == (task.n_steps, task.n_features)
    assert (np.abs(steps).max(axis=1) > 0.01).all()
    np.testing.assert_allclose(ours.per_step, steps, atol=ATOL)
    if method != "lime":  # the other three are linear in the output: a span's values are its steps' summed
        np.testing.assert_allclose(total_of(ours.per_step, task.span), ours.attributions, atol=ATOL)
    assert 0 < ours.rows <= planned_rows(task, {method: params})[method] and 1 <= ours.batch <= 8


@pytest.mark.parametrize("method", ["feature_ablation", "kernel_shap"])
def test_a_later_span_equals_captum_with_the_steps_before_it_read_first(method: str) -> None:
    lm, task = task_for("llama", span=(1, 3))
    ours = explain_prompt(lm, task, {method: METHODS[method]})[method]
    ref = reference_attributions(lm, task, method, METHODS[method])
    assert np.abs(ref).max() > 0.05
    np.testing.assert_allclose(ours.attributions, ref, atol=ATOL)


def test_token_by_token_captum_agrees_too() -> None:
    lm, task = task_for("gpt2")
    ours = explain_prompt(lm, task, {"feature_ablation": {}})["feature_ablation"]
    ref = reference_attributions(lm, task, "feature_ablation", forward_in_tokens=True, use_cached_outputs=False)
    np.testing.assert_allclose(ours.attributions, ref, atol=ATOL)


def test_word_groups_are_hidden_together_as_captum_hides_a_feature() -> None:
    lm, base = task_for("llama")
    f = base.features
    groups = (f[0] + f[1], f[2], f[3] + f[4] + f[5], *f[6:])
    task = dataclasses.replace(base, features=groups, labels=tuple(str(list(g)) for g in groups), unit="word")
    for method in ("feature_ablation", "shapley_sampling"):
        ours = explain_prompt(lm, task, {method: METHODS[method]})[method]
        assert ours.attributions.shape == (len(groups),)
        reference = reference_attributions(lm, task, method, METHODS[method])
        np.testing.assert_allclose(ours.attributions, reference, atol=ATOL)
    hidden = captum_input(lm, task).to_model_input(torch.tensor([[1, 0, 1, 0, *[1] * (len(groups) - 4)]]))[0]
    changed = (hidden != torch.tensor(task.prompt.ids)).nonzero()[:, 0].tolist()
    assert changed == list(groups[1] + groups[3])


def test_template_tokens_are_left_out_unless_asked_and_then_captums_own_input_agrees() -> None:
    lm, task = task_for("llama")
    user = set(task.prompt.features)
    assert all(p in user for g in task.features for p in g) and len(task.prompt) > task.n_features
    whole = make_query(lm, task.prompt, task.target_ids, include_template=True, seed=7)
    assert whole.n_features == len(task.prompt)
    ours = explain_prompt(lm, whole, {"feature_ablation": {}})["feature_ablation"]
    from captum.attr import FeatureAblation, LLMAttribution, TextTokenInput

    inp = TextTokenInput(task.prompt.rendered, lm.tokenizer)  # captum's own input: every token a feature
    assert inp.inp_tensor[0].tolist() == list(task.prompt.ids)
    result = LLMAttribution(FeatureAblation(lm.model), lm.tokenizer).attribute(
        inp, target=torch.tensor(task.target_ids), forward_in_tokens=False
    )
    np.testing.assert_allclose(ours.attributions, result.seq_attr.numpy(), atol=ATOL)


@pytest.mark.parametrize("method", ["feature_ablation", "shapley_sampling"])
def test_a_contrast_is_the_difference_of_the_two_targets_attributions(method: str) -> None:
    lm, base = task_for("llama", span=(2, 3))
    prompt, ids = base.prompt, base.target_ids
    contrast = next(t for t in range(5, lm.vocab_size) if t != ids[2])
    other = list(ids)
    other[2] = contrast
    against = make_query(lm, prompt, ids, span=(2, 3), contrast=contrast, seed=7)
    got = explain_prompt(lm, against, {method: METHODS[method]})
    own = explain_prompt(lm, base, {method: METHODS[method]})
    theirs = explain_prompt(lm, make_query(lm, prompt, other, span=(2, 3), seed=7), {method: METHODS[method]})
    expected = own[method].attributions - theirs[method].attributions
    assert np.abs(expected).max() > 0.05
    np.testing.assert_allclose(got[method].attributions, expected, atol=ATOL)


@pytest.mark.parametrize("method", ["shapley_sampling", "kernel_shap"])
def test_shapley_values_add_up_to_the_change_from_the_masked_prompt(case: Case, method: str) -> None:
    lm, task = case
    spec = get_prompt_method(method)
    assert spec.completeness is not None and spec.completeness.reference == "masked_prompt"
    e = explain_prompt(lm, task, {method: METHODS[method]})[method]
    gap, change = e.diagnostics[spec.completeness.diagnostic or ""], e.diagnostics[OUTPUT_CHANGE]
    assert abs(change) > 1e-3 and gap <= 1e-3 * abs(change) + 1e-5
    assert abs(float(e.attributions.sum()) - change) == pytest.approx(gap, abs=1e-6)
    masked = make_query(lm, task.prompt, task.target_ids, baseline_id=task.baseline_id)
    rows = torch.tensor([task.prompt.ids, task.prompt.ids])
    rows[1, [p for g in masked.features for p in g]] = task.baseline_id
    from xaidash.explainers.language.scoring import explained, score_rows

    full, hidden = explained(task, score_rows(lm, task, rows)[0]).tolist()
    assert change == pytest.approx(full - hidden, abs=1e-5)


def test_the_seed_decides_the_draws() -> None:
    lm, task = task_for("llama")
    again = explain_prompt(lm, task, {"shapley_sampling": {"n_samples": 2}})["shapley_sampling"].attributions
    first = explain_prompt(lm, task, {"shapley_sampling": {"n_samples": 2}})["shapley_sampling"].attributions
    other = explain_prompt(lm, dataclasses.replace(task, seed=8), {"shapley_sampling": {"n_samples": 2}})
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other["shapley_sampling"].attributions)


def test_specs_declare_what_the_page_needs() -> None:
    # The page's default three: one perturbation, one Shapley and one gradient method.
    assert featured_prompt_methods(limit=3) == ["feature_ablation", "shapley_sampling", "layer_ig"]
    for method in METHODS:
        spec = get_prompt_method(method)
        assert spec.output == "log_probability" and spec.per_step and spec.reference.startswith("captum LLMAttribution")
        assert spec.rows_for(spec.resolve_params({}), 10, 30, 4) > 0
    assert get_prompt_method("feature_ablation").rows_for({}, 10, 30, 4) == 11
    assert get_prompt_method("shapley_sampling").resolve_params({}) == {"n_samples": 25}  # captum's default
