"""Which SAE features drove a generated token: each feature's activation x gradient, the bias and error terms add up
to the site's gradient x activation (captum's LayerGradientXActivation), position by position; a lossless SAE gives
captum's per-dimension values back; the explained output is the scorer's; and on SmolLM2 with a trained SAE,
switching a feature off changes the target's log-probability as its attribution predicts, to first order."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from captum.attr import LayerGradientXActivation
from random_sae import randomised, topk_sae, write_sae
from tiny_lm import save_tiny_folder, tiny_lm

from xaidash.explainers.language.methods.gradients import sequence_ids
from xaidash.explainers.language.query import make_query
from xaidash.explainers.language.sae_attribution import check_sae, counted_positions, sae_attribution
from xaidash.explainers.language.scoring import explained, score_rows, step_log_probs
from xaidash.explainers.params import ExplainError
from xaidash.models.language.convert import import_language_model
from xaidash.models.language.generate import generate
from xaidash.models.language.loading import load_language_model
from xaidash.models.language.prompt import build_prompt
from xaidash.models.language.sites import SITES, editing, reading, site_module
from xaidash.models.registry import ModelError

os.environ.setdefault("WANDB_MODE", "disabled")


def jumprelu_sae(d_in: int, width: int = 48, seed: int = 1):
    from sae_lens import JumpReLUSAE, JumpReLUSAEConfig

    sae = randomised(JumpReLUSAE(JumpReLUSAEConfig(d_in=d_in, d_sae=width)), seed)
    with torch.no_grad():
        sae.threshold.copy_(torch.full_like(sae.threshold, 0.2))
    return sae


def lossless_sae(d_in: int):
    """A standard (ReLU) SAE that reconstructs exactly: features j and d_in + j read relu(x_j) and relu(-x_j), and
    write +e_j and -e_j back."""
    from sae_lens import StandardSAE, StandardSAEConfig

    sae = StandardSAE(StandardSAEConfig(d_in=d_in, d_sae=2 * d_in, apply_b_dec_to_input=False))
    eye = torch.eye(d_in)
    with torch.no_grad():
        sae.W_enc.copy_(torch.cat([eye, -eye], dim=1))
        sae.W_dec.copy_(torch.cat([eye, -eye], dim=0))
        sae.b_enc.zero_()
        sae.b_dec.zero_()
    return sae


@pytest.fixture(scope="module")
def lm():
    torch.set_num_threads(1)
    return tiny_lm("llama")


@pytest.fixture(scope="module")
def query(lm):
    prompt = build_prompt(lm, "what is the capital of france ?")
    answer = generate(lm, prompt, max_new_tokens=4).ids
    return make_query(lm, prompt, answer, span=(2, 3))


def _width(lm) -> int:
    return int(lm.embedding().weight.shape[1])


def site_grad_x_act(lm, query, layer: int, site: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(gradient x activation, gradient) (T, d) of the explained output at the site, by captum."""

    def forward(ids: torch.Tensor) -> torch.Tensor:
        out = lm.model(input_ids=ids, use_cache=False, logits_to_keep=query.n_steps)
        return explained(query, step_log_probs(query, out.logits))

    ids = sequence_ids(lm, query)
    module = site_module(lm, layer, site)
    gxa = LayerGradientXActivation(forward, module).attribute(ids, attribute_to_layer_input=False)
    grad = LayerGradientXActivation(forward, module, multiply_by_inputs=False).attribute(ids)
    first = lambda t: t[0] if isinstance(t, (tuple, list)) else t  # noqa: E731 - a block's output may be a tuple
    return first(gxa)[0].detach(), first(grad)[0].detach()


@pytest.mark.parametrize("site", list(SITES))
@pytest.mark.parametrize("make", [topk_sae, jumprelu_sae], ids=["topk", "jumprelu"])
def test_parts_add_up_to_the_sites_gradient_x_activation(lm, query, site, make):
    sae = make(_width(lm))
    fa = sae_attribution(lm, query, sae, 1, site, top=5)
    gxa, _ = site_grad_x_act(lm, query, 1, site)
    # the site's total is captum's, position by position, and the parts add up to it at every position
    np.testing.assert_allclose(fa.total, gxa.sum(-1).double().numpy(), rtol=1e-4, atol=1e-6)
    counted = fa.counted
    per_feature = fa.attribution.sum() + fa.error[counted].sum() + fa.bias[counted].sum()
    assert per_feature == pytest.approx(float(gxa.sum(-1)[torch.from_numpy(counted)].sum()), rel=1e-4, abs=1e-6)
    assert fa.gap < 1e-4 * max(1.0, abs(fa.site_total))
    assert fa.bias_total != 0 and fa.error_total != 0 and fa.active > 0
    assert len(fa.tokens) == len(fa.total) == len(fa.error_share) == len(query.prompt.ids) + query.n_steps - 1


def test_feature_attribution_is_activation_times_decoder_gradient(lm, query):
    """Brute force: f_i(p) (W_dec[i] . g(p)) summed over positions, with f read by SAELens's encode from the site's
    captured activations and g by captum."""
    sae = topk_sae(_width(lm), width=64, k=8)
    fa = sae_attribution(lm, query, sae, 0, "resid", top=64)
    with reading(lm, 0, "resid") as seen, torch.no_grad():
        lm.model(input_ids=sequence_ids(lm, query), use_cache=False)
        f = sae.encode(seen[0][0])
    _, grad = site_grad_x_act(lm, query, 0, "resid")
    counted = counted_positions(query)
    brute = (f * (grad @ sae.W_dec.detach().T))[counted].sum(0).double().numpy()
    np.testing.assert_allclose(fa.attribution, brute, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(fa.max_activation, f[counted].max(0).values.double().numpy(), rtol=1e-6)
    peak = f[counted].argmax(0).numpy()
    np.testing.assert_array_equal(fa.argmax_position, np.array(counted)[peak])
    ranked = np.argsort(-np.abs(brute), kind="stable")
    assert list(fa.top) == [int(i) for i in ranked if brute[i] != 0]
    assert fa.top_attribution.shape == (len(fa.tokens), len(fa.top))
    np.testing.assert_allclose(fa.top_attribution[fa.counted].sum(0), fa.attribution[list(fa.top)], rtol=1e-6)
    assert fa.rest_total() == pytest.approx(0.0, abs=1e-6)  # every active feature is in the top 64


def test_lossless_sae_gives_each_dimensions_gradient_x_activation(lm, query):
    """Ground truth: with an SAE that reconstructs exactly, feature j (j < d) carries relu(x_j) g_j and feature
    d + j carries relu(-x_j) (-g_j): together captum's per-dimension gradient x activation; no error term."""
    d = _width(lm)
    fa = sae_attribution(lm, query, lossless_sae(d), 1, "mlp", top=2 * d)
    gxa, _ = site_grad_x_act(lm, query, 1, "mlp")
    per_dim = gxa[counted_positions(query)].sum(0).double().numpy()
    np.testing.assert_allclose(fa.attribution[:d] + fa.attribution[d:], per_dim, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(fa.error, 0.0, atol=1e-6)
    np.testing.assert_allclose(fa.error_share, 0.0, atol=1e-6)
    assert fa.bias_total == 0.0


def test_positions_counted(lm, query):
    """The user's tokens and the positions that read the answer; with the template included, every position."""
    n_prompt, n_read = len(query.prompt.ids), len(query.prompt.ids) + query.n_steps - 1
    users = list(query.prompt.features)
    assert 0 < len(users) < n_prompt - 1  # the tiny model's chat template adds tokens around the user's
    assert counted_positions(query) == sorted(set(users) | set(range(n_prompt - 1, n_read)))
    everything = make_query(lm, query.prompt, query.target_ids, span=query.span, include_template=True)
    assert counted_positions(everything) == list(range(n_read))
    fa = sae_attribution(lm, everything, topk_sae(_width(lm)), 1, "resid")
    assert fa.counted.all() and fa.site_total == pytest.approx(float(fa.total.sum()))


def test_output_is_the_scorers_explained_value_with_a_contrast(lm):
    prompt = build_prompt(lm, "the movie was")
    answer = generate(lm, prompt, max_new_tokens=3).ids
    contrast = next(i for i in range(lm.vocab_size) if i != answer[1])
    q = make_query(lm, prompt, answer, span=(1, 2), contrast=contrast)
    fa = sae_attribution(lm, q, topk_sae(_width(lm)), 1, "attn")
    scores, _ = score_rows(lm, q, torch.tensor([list(prompt.ids)]))
    assert fa.output == pytest.approx(float(explained(q, scores)[0]), abs=1e-4)
    gxa, _ = site_grad_x_act(lm, q, 1, "attn")
    counted = torch.tensor(counted_positions(q))
    assert fa.site_total == pytest.approx(float(gxa[counted].sum()), rel=1e-4, abs=1e-6)


def test_refusals(lm, query):
    with pytest.raises(ExplainError, match="wide"):
        check_sae(lm, topk_sae(_width(lm) + 1), 0, "resid")
    with pytest.raises(ModelError, match="out of range"):
        sae_attribution(lm, query, topk_sae(_width(lm)), lm.num_layers, "resid")
    with pytest.raises(ModelError, match="Unknown site"):
        sae_attribution(lm, query, topk_sae(_width(lm)), 0, "embed")


def test_the_model_is_left_as_it_was(lm, query):
    """The splice is removed afterwards and no gradient is left on the weights."""
    before = lm.logits(sequence_ids(lm, query))
    sae_attribution(lm, query, topk_sae(_width(lm)), 1, "resid")
    torch.testing.assert_close(lm.logits(sequence_ids(lm, query)), before)
    assert all(p.grad is None for p in lm.model.parameters())


def ablated_output(lm, query, sae, layer: int, site: str, feature: int) -> float:
    """The explained output with the feature switched off at the counted positions: its activation x decoder
    direction taken out of the site (the rest, error term included, kept)."""
    counted = torch.zeros(len(query.prompt.ids) + query.n_steps - 1, 1)
    counted[counted_positions(query)] = 1.0

    def edit(x: torch.Tensor) -> torch.Tensor:
        f = sae.encode(x)[..., feature : feature + 1]
        return x - counted * f * sae.W_dec[feature]

    with torch.no_grad(), editing(lm, layer, site, edit):
        out = lm.model(input_ids=sequence_ids(lm, query), use_cache=False, logits_to_keep=query.n_steps)
        return float(explained(query, step_log_probs(query, out.logits))[0])


def first_order_agreement(lm, query, sae, layer: int, site: str, n: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """(predicted, actual) change of the explained output when each of the top n features is switched off."""
    fa = sae_attribution(lm, query, sae, layer, site, top=n)
    predicted = -fa.attribution[list(fa.top)]
    actual = np.array([ablated_output(lm, query, sae, layer, site, i) - fa.output for i in fa.top])
    return predicted, actual


def test_switching_a_feature_off_changes_the_output_as_predicted_tiny(lm, query):
    sae = topk_sae(_width(lm), width=64, k=8)
    with torch.no_grad():
        sae.W_dec.mul_(0.002)  # each feature a few percent of the tiny model's activations: a small change
    predicted, actual = first_order_agreement(lm, query, sae, 1, "resid")
    assert np.corrcoef(predicted, actual)[0, 1] > 0.95
    assert np.abs(actual - predicted).sum() < 0.35 * np.abs(predicted).sum()
    # a feature ten times larger changes the output by more than first order says: the check above can fail
    with torch.no_grad():
        sae.W_dec.mul_(10.0)
    big_predicted, big_actual = first_order_agreement(lm, query, sae, 1, "resid")
    assert np.abs(big_actual - big_predicted).sum() > np.abs(actual - predicted).sum()


@pytest.mark.slow
def test_switching_a_trained_features_off_changes_the_log_prob_as_predicted(tmp_path_factory):
    """SmolLM2 with an SAE trained on it: over the top features for ' Paris', the change of log p(' Paris') when a
    feature is switched off follows its attribution on average (first order; each feature alone is a small part of
    the residual stream)."""
    from smollm2_run import smollm2_lm
    from tiny_sae import tiny_sae

    from xaidash.models.language.sae.store import load_sae

    run, sae_id = tiny_sae(tmp_path_factory)
    lm = smollm2_lm(tmp_path_factory)
    loaded = load_sae(run, sae_id)
    prompt = build_prompt(lm, "What is the capital of France?")
    answer = generate(lm, prompt, max_new_tokens=8)
    step = [s.token for s in answer.steps].index(" Paris")
    q = make_query(lm, prompt, answer.ids, span=(step, step + 1))
    predicted, actual = first_order_agreement(lm, q, loaded.sae, loaded.layer, loaded.site, n=12)
    # Measured: every sign right, correlation 0.99, slope 1.02 (with an SAE trained on the special tokens too, whose
    # features were larger: correlation 0.91, the real changes 1.6 times the predicted ones).
    assert np.corrcoef(predicted, actual)[0, 1] > 0.8
    assert np.mean(np.sign(predicted) == np.sign(actual)) >= 0.75
    slope = float(predicted @ actual / (predicted @ predicted))
    assert 0.5 < slope < 2.5


def test_generate_command_lists_the_features(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """`xaidash generate --sae`: the explainer's top features and terms for the target; an unknown SAE is one line
    before the model loads."""
    from xaidash.dashboard.cli import main
    from xaidash.models.language.sae.store import load_sae

    run = import_language_model("hf:" + str(save_tiny_folder(tmp_path / "tiny")), root=tmp_path / "runs")
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    write_sae(run, "sae-a", d_in=32)
    args = ["generate", "--run", run.id, "--prompt", "the movie was", "--max-new-tokens", "3", "--device", "cpu"]
    assert main([*args, "--sae", "nope"]) == 2
    assert "has no SAE 'nope' (its SAEs: sae-a)" in capsys.readouterr().err
    assert main([*args, "--sae", "sae-a", "--target-step", "1"]) == 0
    out = capsys.readouterr().out
    lm = load_language_model(run)
    prompt = build_prompt(lm, "the movie was")
    q = make_query(lm, prompt, generate(lm, prompt, max_new_tokens=3).ids, span=(1, 2))
    loaded = load_sae(run, "sae-a")
    fa = sae_attribution(lm, q, loaded.sae, loaded.layer, loaded.site, top=12)
    listed = [int(line.split()[0][1:]) for line in out.splitlines() if line.startswith("  #")]
    assert listed == list(fa.top)
    assert f"#{fa.top[0]:<8} {fa.attribution[fa.top[0]]:+10.4f}" in out
    assert f"error     {fa.error_total:+10.4f}" in out and f"= {fa.site_total:+.4f}" in out
    assert main([*args, "--target-step", "1"]) == 2  # a target without --explain or --sae
    assert "add --explain METHODS" in capsys.readouterr().err
