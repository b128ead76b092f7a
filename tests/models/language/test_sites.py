"""Reading and editing a (layer, site) of the real SmolLM2 through forward hooks, against transformers' own
hidden states."""

from __future__ import annotations

import pytest
import torch
from smollm2_run import smollm2_lm

from xaidash.models.language.sites import SITES, d_model, editing, reading, site_module
from xaidash.models.registry import ModelError


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return smollm2_lm(tmp_path_factory)


def _ids(lm):
    return torch.tensor([lm.tokenizer.encode("The capital of France is Paris")])


def test_the_residual_stream_read_is_transformers_hidden_state(lm):
    ids = _ids(lm)
    with torch.no_grad(), reading(lm, 3, "resid") as seen:
        out = lm.model(input_ids=ids, output_hidden_states=True, use_cache=False)
    assert len(seen) == 1 and seen[0].shape == (1, ids.shape[1], d_model(lm))
    torch.testing.assert_close(seen[0], out.hidden_states[4])  # hidden_states[0] is the embeddings


@pytest.mark.parametrize("site", list(SITES))
def test_editing_a_site_changes_what_follows_and_nothing_is_left_hooked(lm, site):
    ids = _ids(lm)
    clean = lm.logits(ids)
    hooks = dict(site_module(lm, 2, site)._forward_hooks)  # transformers keeps hooks of its own there
    with editing(lm, 2, site, lambda a: a * 0):
        zeroed = lm.logits(ids)
    assert not torch.allclose(clean, zeroed)
    torch.testing.assert_close(lm.logits(ids), clean)
    assert dict(site_module(lm, 2, site)._forward_hooks) == hooks


def test_an_identity_edit_changes_nothing(lm):
    ids = _ids(lm)
    with editing(lm, 5, "mlp", lambda a: a):
        same = lm.logits(ids)
    torch.testing.assert_close(same, lm.logits(ids))


@pytest.mark.parametrize("layer", [-1, 30, 2.0, True])
def test_a_layer_out_of_range_is_one_message(lm, layer):
    with pytest.raises(ModelError, match=r"out of range: .* has decoder layers 0 to 29"):
        site_module(lm, layer, "resid")


def test_an_unknown_site_is_one_message(lm):
    with pytest.raises(ModelError, match="Unknown site 'heads'"):
        site_module(lm, 0, "heads")
