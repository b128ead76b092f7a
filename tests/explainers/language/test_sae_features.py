"""The feature index of the session's tiny SAE against brute force over its harvested chunks (top activations,
windows, density, numpy's histogram), the logit effects and neighbours against plain torch, search by text against
transformers' own hidden states, and the cache kept beside the SAE."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
import torch
from smollm2_run import smollm2_lm
from tiny_sae import tiny_sae

from xaidash.explainers.language import sae_features as sf
from xaidash.models.language.sae.store import activation_chunks, corpus_tokens, load_sae, sae_folder
from xaidash.models.registry import ModelError


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A copy of the tiny SAE's folder under a run folder of this module's own (the index is written there)."""
    run, sae_id = tiny_sae(tmp_path_factory)
    root = tmp_path_factory.mktemp("features-run")
    shutil.copytree(sae_folder(run, sae_id), sae_folder(root, sae_id))
    loaded = load_sae(root, sae_id)
    return root, sae_id, loaded, smollm2_lm(tmp_path_factory)


@pytest.fixture(scope="module")
def brute(setup):
    """Every harvested token's feature activations, by flat index."""
    root, sae_id, loaded, _ = setup
    acts, index = [], []
    for split in ("train", "heldout"):
        for a, i in activation_chunks(root, sae_id, split):
            acts.append(a)
            index.append(i)
    with torch.no_grad():
        f = loaded.sae.encode(torch.cat(acts)).float()
    return f, torch.cat(index)


def test_index_matches_brute_force(setup, brute):
    root, sae_id, loaded, _ = setup
    f, index = brute
    ix = sf.feature_index(root, sae_id, loaded)
    assert ix.tokens == len(index) and ix.width == loaded.width
    row_of = {int(i): r for r, i in enumerate(index)}
    fires = f > 0
    torch.testing.assert_close(ix.density, fires.float().mean(0))
    n = sf.TOP_N
    expected = f.T.topk(n, dim=1).values.clamp_min(0)
    torch.testing.assert_close(ix.top_values, expected)
    live = [j for j in range(ix.width) if fires[:, j].any()]
    assert live, "the tiny SAE has live features"
    for j in live[:40]:
        for slot in range(n):
            if ix.top_index[j, slot] >= 0:  # the activation at the stored index is the stored value
                assert float(f[row_of[int(ix.top_index[j, slot])], j]) == pytest.approx(float(ix.top_values[j, slot]))
            else:
                assert int(fires[:, j].sum()) <= slot
        vals = f[fires[:, j], j].numpy()
        counts, _ = np.histogram(vals, bins=sf.BINS, range=(0.0, float(ix.max_value[j])))
        assert ix.hist[j].tolist() == counts.tolist()
        assert float(ix.mean_active[j]) == pytest.approx(float(vals.mean()), rel=1e-5)
    dead = [j for j in range(ix.width) if not fires[:, j].any()]
    for j in dead:
        assert (ix.top_index[j] == -1).all() and ix.hist[j].sum() == 0 and ix.density[j] == 0


def test_windows_hold_the_features_activation_around_each_top_token(setup, brute):
    root, sae_id, loaded, _ = setup
    f, index = brute
    row_of = {int(i): r for r, i in enumerate(index)}
    ix = sf.feature_index(root, sae_id, loaded)
    tokens, _ = corpus_tokens(root, sae_id)
    context = tokens.shape[1]
    checked = 0
    for j in torch.nonzero(ix.density > 0).flatten()[:20].tolist():
        ids, vals, focus = sf.context_of(ix, tokens, j, 0)
        top = int(ix.top_index[j, 0])
        c, pos = divmod(top, context)
        assert ids == tokens[c, pos - focus : pos - focus + len(ids)].tolist()
        assert vals[focus] == pytest.approx(float(ix.top_values[j, 0]))
        for k, v in enumerate(vals):
            flat = c * context + pos - focus + k
            if flat in row_of:
                assert v == pytest.approx(float(f[row_of[flat], j]))
            else:  # not harvested (position 0, the massive activations harvesting leaves out)
                assert math.isnan(v)
            checked += 1
    assert checked > 50


def test_index_is_cached_and_rebuilt_when_the_weights_change(setup):
    root, sae_id, loaded, _ = setup
    first = sf.feature_index(root, sae_id, loaded)
    path = sf.index_path(root, sae_id)
    stamp = path.stat().st_mtime_ns
    again = sf.feature_index(root, sae_id, loaded)
    assert path.stat().st_mtime_ns == stamp
    torch.testing.assert_close(again.top_values, first.top_values)
    weights = sae_folder(root, sae_id) / "sae.safetensors"
    weights.touch()
    sf.feature_index(root, sae_id, loaded)
    assert path.stat().st_mtime_ns != stamp


def test_logit_effects_and_neighbours_against_torch(setup):
    _, _, loaded, lm = setup
    w_dec = loaded.sae.W_dec.detach().float()
    full = (w_dec * lm.final_norm().weight.detach().float()) @ lm.unembedding().weight.detach().float().T
    up, down = sf.logit_effects(lm, loaded, 5, k=7)
    assert [i for i, _ in up] == full[5].topk(7).indices.tolist()
    assert [i for i, _ in down] == full[5].topk(7, largest=False).indices.tolist()
    assert up[0][1] == pytest.approx(float(full[5].max()), rel=1e-4)
    cos = torch.nn.functional.cosine_similarity(w_dec[5].unsqueeze(0), w_dec, dim=1)
    cos[5] = -2
    near = sf.neighbours(loaded, 5, k=4)
    assert [i for i, _ in near] == cos.topk(4).indices.tolist()
    assert near[0][1] == pytest.approx(float(cos.max()), abs=1e-5)
    with pytest.raises(ModelError, match="out of range"):
        sf.neighbours(loaded, loaded.width, 3)


def test_search_text_against_hidden_states(setup):
    _, _, loaded, lm = setup
    text = "The movie was wonderful"
    found = sf.search_text(lm, loaded, text, k=5)
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert found.token_ids == ids
    sink = lm.tokenizer.bos_token_id if lm.tokenizer.bos_token_id is not None else lm.tokenizer.eos_token_id
    lead = [sink, *lm.tokenizer(sf.LEAD_IN, add_special_tokens=False)["input_ids"]]
    with torch.no_grad():
        out = lm.model(input_ids=torch.tensor([[*lead, *ids]]), output_hidden_states=True)
        expected = loaded.sae.encode(out.hidden_states[loaded.layer + 1][0, len(lead) :].float())
    torch.testing.assert_close(found.acts, expected, rtol=1e-4, atol=1e-4)
    best = expected.max(0).values
    assert [f for f, _, _ in found.top] == best.topk(len(found.top)).indices.tolist()
    for f, v, at in found.top:
        assert v == pytest.approx(float(expected[at, f]), rel=1e-4)
    with pytest.raises(ModelError, match="Type a text"):
        sf.search_text(lm, loaded, "  ", 5)


def test_at_start_share_counts_top_tokens_that_begin_a_text(setup):
    root, sae_id, loaded, lm = setup
    ix = sf.feature_index(root, sae_id, loaded)
    tokens, _ = corpus_tokens(root, sae_id)
    starts = {lm.tokenizer.bos_token_id, lm.tokenizer.eos_token_id} - {None}
    assert int(tokens[0, 0]) in starts  # every context starts as a document does
    shares = []
    for f in range(loaded.width):
        windows = [sf.context_of(ix, tokens, f, slot) for slot in range(ix.top_index.shape[1])]
        expected = [focus >= 1 and ids[focus - 1] in starts for ids, _, focus in windows if ids]
        after, n = sf.at_start_share(ix, tokens, f, starts)
        assert (after, n) == (sum(expected), len(expected))
        shares.append(after / n if n else 0.0)
    assert max(shares) > 0 and min(shares) < 1  # some features mark a text's start, others do not


def test_features_on_token_counts_top_contexts(setup):
    root, sae_id, loaded, _ = setup
    ix = sf.feature_index(root, sae_id, loaded)
    tokens, _ = corpus_tokens(root, sae_id)
    j = int(torch.nonzero(ix.density > 0).flatten()[0])
    token = int(tokens.reshape(-1)[ix.top_index[j, 0]])
    found = sf.features_on_token(ix, tokens, token, k=ix.width)
    flat = tokens.reshape(-1)
    for f, count, best in found:
        on = [s for s in range(sf.TOP_N) if ix.top_index[f, s] >= 0 and int(flat[ix.top_index[f, s]]) == token]
        assert count == len(on) and best == pytest.approx(max(float(ix.top_values[f, s]) for s in on))
    assert j in [f for f, _, _ in found]
    counts = [c for _, c, _ in found]
    assert counts == sorted(counts, reverse=True)
