"""The tiny SAE's files read back through store.py, against ground truth: the harvested activations are
transformers' own hidden states at their indices, the inference SAE is SAELens's (its own loader reads the same
weights), and the held-out metrics agree with brute force and with transformers' loss."""

from __future__ import annotations

import pytest
import torch
from smollm2_run import smollm2_lm
from tiny_sae import TINY, tiny_sae

from xaidash.models.language.sae import store
from xaidash.models.registry import ModelError


@pytest.fixture(scope="module")
def sae(tmp_path_factory):
    return tiny_sae(tmp_path_factory)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return smollm2_lm(tmp_path_factory)


def test_the_run_lists_the_finished_sae_with_its_settings_and_metrics(sae):
    run, sae_id = sae
    records = {r.id: r for r in store.list_saes(run)}
    record = records[sae_id]
    assert record.status == "finished" and record.config == TINY and record.d_in == 576
    assert record.metrics is not None and {"explained_variance", "loss_recovered", "l0", "dead", "dense"} <= set(
        record.metrics
    )
    assert store.sae_folder(run, sae_id) == record.folder == run.path / "saes" / sae_id


def test_load_sae_gives_saelens_inference_sae_with_the_contract_shapes(sae):
    from sae_lens import SAE

    run, sae_id = sae
    loaded = store.load_sae(run, sae_id)
    assert (loaded.layer, loaded.site, loaded.width, loaded.d_in) == (6, "resid", 256, 576)
    assert isinstance(loaded.sae, SAE)
    assert loaded.sae.W_enc.shape == (576, 256) and loaded.sae.W_dec.shape == (256, 576)
    assert loaded.sae.b_dec.shape == (576,)
    x = torch.randn(3, 5, 576)
    f = loaded.sae.encode(x)
    assert f.shape == (3, 5, 256) and loaded.sae.decode(f).shape == (3, 5, 576)
    assert int((f != 0).sum(-1).max()) <= TINY.k  # topk keeps at most k features


def test_corpus_tokens_mark_the_heldout_contexts_and_chunks_index_into_them(sae):
    run, sae_id = sae
    tokens, heldout = store.corpus_tokens(run, sae_id)
    assert tokens.dtype == torch.int64 and tokens.shape[1] == TINY.context and heldout.dtype == torch.bool
    assert int(heldout.sum()) * (TINY.context - 1) >= TINY.heldout_tokens
    for split, expected in (("train", False), ("heldout", True)):
        index = torch.cat([i for _, i in store.activation_chunks(run, sae_id, split)])
        contexts, positions = index // TINY.context, index % TINY.context
        assert bool((heldout[contexts] == expected).all())
        assert int(positions.min()) == 1 and int(positions.max()) == TINY.context - 1  # position 0 left out
        assert len(set(index.tolist())) == len(index)
    n_train = sum(a.shape[0] for a, _ in store.activation_chunks(run, sae_id, "train"))
    assert n_train >= TINY.tokens


def test_harvested_activations_are_transformers_hidden_states_at_their_index(sae, lm):
    run, sae_id = sae
    tokens, _ = store.corpus_tokens(run, sae_id)
    everything = torch.cat([i for _, i in store.activation_chunks(run, sae_id, "train")])
    harvested = set(tokens.reshape(-1)[everything].tolist())
    assert not harvested & set(lm.tokenizer.all_special_ids)  # the separators (attention sinks) are left out
    assert int((tokens[:, 1:] == lm.tokenizer.eos_token_id).sum()) > 0
    acts, index = next(store.activation_chunks(run, sae_id, "train"))
    assert acts.dtype == torch.float32 and acts.shape[1] == 576
    context = int(index[0]) // TINY.context
    rows = (index // TINY.context) == context
    with torch.no_grad():
        hidden = lm.model(input_ids=tokens[context : context + 1], output_hidden_states=True).hidden_states[7][0]
    positions = index[rows] % TINY.context
    torch.testing.assert_close(acts[rows], hidden[positions], atol=2e-2, rtol=2e-3)  # stored as float16


def test_heldout_metrics_agree_with_brute_force(sae):
    run, sae_id = sae
    metrics = store.read_record(run, sae_id).metrics
    assert metrics is not None
    model = store.load_sae(run, sae_id).sae
    x = torch.cat([a for a, _ in store.activation_chunks(run, sae_id, "heldout")]).double()
    with torch.no_grad():
        f = model.encode(x.float())
        recon = model.decode(f).double()
    ev = 1 - (x - recon).pow(2).sum(1).mean() / (x - x.mean(0)).pow(2).sum(1).mean()
    assert metrics["explained_variance"] == pytest.approx(float(ev), abs=1e-4)
    assert metrics["l0"] == pytest.approx(float((f != 0).sum(1).double().mean()), rel=1e-6)
    fires = (f != 0).sum(0)
    assert metrics["dead"] == int((fires == 0).sum())
    assert metrics["heldout_tokens"] == x.shape[0]


def test_clean_loss_is_transformers_own_and_the_sae_recovers_part_of_it(sae, lm):
    run, sae_id = sae
    metrics = store.read_record(run, sae_id).metrics
    assert metrics is not None
    tokens, heldout = store.corpus_tokens(run, sae_id)
    ids = tokens[heldout]
    labels = ids.clone()
    labels[:, :2] = -100  # the losses are over the predictions of tokens 2 on (position 0 is never replaced)
    with torch.no_grad():
        losses = [lm.model(input_ids=ids[i : i + 8], labels=labels[i : i + 8]).loss for i in range(0, len(ids), 8)]
    counts = [int((labels[i : i + 8, 1:] != -100).sum()) for i in range(0, len(ids), 8)]
    clean = sum(float(loss) * n for loss, n in zip(losses, counts, strict=True)) / sum(counts)
    assert metrics["ce_loss_clean"] == pytest.approx(clean, rel=1e-4)
    # on the narrow cues corpus the reconstruction can even lower the loss a little: only zeroing must hurt
    assert max(metrics["ce_loss_clean"], metrics["ce_loss_with_sae"]) + 1 < metrics["ce_loss_zero_ablated"]
    gap = metrics["ce_loss_zero_ablated"] - metrics["ce_loss_clean"]
    assert metrics["loss_recovered"] == pytest.approx(
        (metrics["ce_loss_zero_ablated"] - metrics["ce_loss_with_sae"]) / gap
    )


def test_unknown_ids_and_splits_get_one_line(sae):
    run, sae_id = sae
    with pytest.raises(ModelError, match="has no SAE 'nope'") as e:
        store.load_sae(run, "nope")
    assert "\n" not in str(e.value)
    with pytest.raises(ModelError, match="not an SAE id"):
        store.sae_folder(run, "../x")
    with pytest.raises(ModelError, match="Unknown split"):
        next(store.activation_chunks(run, sae_id, "test"))
