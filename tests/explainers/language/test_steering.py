"""Steering on the real SmolLM2: the difference of means against transformers' own hidden states, strength 0 is the
plain answer, a sentiment direction makes the answer warmer (or colder) as asked, and an SAE feature's direction
raises that feature (read back through the SAE) at its site."""

from __future__ import annotations

import pytest
import torch
from smollm2_run import smollm2_lm
from tiny_sae import tiny_sae

from xaidash.explainers.language import steering as S
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import build_prompt
from xaidash.models.language.sae.store import load_sae
from xaidash.models.language.sites import editing, reading
from xaidash.models.registry import ModelError

WARM = ["I love you, you are wonderful and I am so happy.", "What a beautiful, joyful day, everything is great!"]
COLD = ["I hate you, you are awful and I am so angry.", "What a terrible, miserable day, everything is bad!"]
WARM_WORDS = ("delight", "wonderful", "happy", "love", "joy", "touching")


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> LanguageModel:
    torch.set_num_threads(1)
    return smollm2_lm(tmp_path_factory)


def test_mean_difference_matches_transformers_hidden_states(lm) -> None:
    d = S.mean_difference(lm, 6, "resid", WARM, COLD)

    def mean(texts: list[str]) -> torch.Tensor:
        out = []
        for t in texts:
            ids = torch.tensor([lm.tokenizer(t, add_special_tokens=False)["input_ids"]])
            with torch.no_grad():
                hidden = lm.model(input_ids=ids, output_hidden_states=True).hidden_states[7]  # after block 6
            out.append(hidden[0].mean(0))
        return torch.stack(out).mean(0)

    ref = mean(WARM) - mean(COLD)
    torch.testing.assert_close(d.vector, ref / ref.norm(), atol=1e-5, rtol=1e-4)
    assert (d.layer, d.site) == (6, "resid")


def test_strength_zero_is_the_plain_answer_and_warmth_is_asked_for(lm) -> None:
    prompt = build_prompt(lm, "Write one sentence about your neighbour.")
    d = S.mean_difference(lm, 6, "resid", WARM, COLD)
    zero = S.steer(lm, prompt, d, 0.0, max_new_tokens=8)
    assert [s.id for s in zero.steered.steps] == [s.id for s in zero.plain.steps]
    warm = S.steer(lm, prompt, d, 0.4, max_new_tokens=16)
    assert not any(w in warm.plain.text.lower() for w in WARM_WORDS)
    assert any(w in warm.steered.text.lower() for w in WARM_WORDS), warm.steered.text
    assert warm.added_norm > 0 and warm.steered.steps[0].prob > 0


def test_a_feature_direction_raises_that_feature(lm, tmp_path_factory) -> None:
    run, sae_id = tiny_sae(tmp_path_factory)
    loaded = load_sae(run, sae_id)
    ids = torch.tensor(
        [lm.tokenizer("The cat sat on the mat and looked at me.", add_special_tokens=False)["input_ids"]]
    )
    with torch.no_grad(), reading(lm, loaded.layer, loaded.site) as seen:
        lm.logits(ids)
    plain = loaded.sae.encode(seen[0][0])
    feature = int(plain.sum(0).argmin())  # one that is quiet here
    d = S.feature_direction(run, sae_id, feature)
    w = loaded.sae.W_dec[feature].detach()
    torch.testing.assert_close(d.vector, w / w.norm())
    added = d.vector * 0.5 * float(seen[0][0].norm(dim=-1).median())
    with torch.no_grad(), editing(lm, d.layer, d.site, lambda o: o + added), reading(lm, d.layer, d.site) as after:
        lm.logits(ids)
    steered = loaded.sae.encode(after[0][0])
    assert steered[:, feature].mean() > plain[:, feature].mean() + 1e-3


def test_refusals(lm, tmp_path_factory) -> None:
    run, sae_id = tiny_sae(tmp_path_factory)
    with pytest.raises(ModelError, match="out of range"):
        S.feature_direction(run, sae_id, 256)
    with pytest.raises(ModelError, match="one prompt on each side"):
        S.mean_difference(lm, 6, "resid", WARM, [" "])
    with pytest.raises(ModelError, match="out of range"):
        S.mean_difference(lm, 30, "resid", WARM, COLD)
    with pytest.raises(ModelError, match="is zero"):
        S.mean_difference(lm, 6, "resid", WARM, WARM)
    d = S.mean_difference(lm, 6, "resid", WARM, COLD)
    prompt = build_prompt(lm, "Hello")
    with pytest.raises(ModelError, match="strength must be between"):
        S.steer(lm, prompt, d, 1000.0)
    other = S.Direction(torch.ones(8), 6, "resid", "elsewhere")
    with pytest.raises(ModelError, match="another model"):
        S.steer(lm, prompt, other, 1.0)
