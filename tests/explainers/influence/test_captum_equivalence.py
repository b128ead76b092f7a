"""tracin_fast agrees with captum's own TracInCPFast on the same run, checkpoints, learning rates and samples:
exactly without the bias term (captum's definition: the final layer's input only), and in rank with it."""

from __future__ import annotations

from dataclasses import replace

import torch
from scipy.stats import spearmanr

from xaidash.data.registry import load_split
from xaidash.explainers.influence.cache import FeatureCache
from xaidash.explainers.influence.fast import FinalLayerTracIn, captum_reference
from xaidash.explainers.influence.registry import get_influence_method
from xaidash.explainers.influence.training_set import training_data
from xaidash.models.runs.store import Run, load_bundle


def test_tracin_fast_matches_captum(noisy_shapes: Run) -> None:
    bundle = load_bundle(noisy_shapes, device="cpu")
    data = training_data(noisy_shapes)
    fast = get_influence_method("tracin_fast")
    exact = replace(fast, id="tracin_fast_captum_definition", scorer=FinalLayerTracIn(bias=False))
    ours_exact = FeatureCache(noisy_shapes, exact, data, "cpu", bundle=bundle)
    ours = FeatureCache(noisy_shapes, fast, data, "cpu", bundle=bundle)
    n = ours.chunks()[0][1]  # the first cached chunk of training samples
    queries = bundle.prepare(load_split("shapes", "test").images[:3].float())
    targets = bundle.logits(queries).argmax(1)
    checkpoints = [(str(s.path), s.weight) for s in ours.snapshots]
    assert len(checkpoints) == 3
    layer = bundle.model.get_submodule(ours.layer())
    reference = captum_reference(
        bundle.model, layer, checkpoints, (data.inputs(bundle, 0, n), data.labels(0, n)), (queries, targets)
    )
    for q in range(len(queries)):
        got = _first_chunk_scores(ours_exact, queries[q : q + 1], int(targets[q]), n).float()
        scale = reference[q].abs().max()
        assert torch.allclose(got, reference[q], atol=1e-4 * float(scale), rtol=1e-4), (got - reference[q]).abs().max()
        with_bias = _first_chunk_scores(ours, queries[q : q + 1], int(targets[q]), n)
        assert spearmanr(with_bias.numpy(), reference[q].numpy()).statistic >= 0.99


def _first_chunk_scores(cache: FeatureCache, x: torch.Tensor, target: int, n: int) -> torch.Tensor:
    """What `query_scores` sums for the first chunk of training samples (the whole set is the bench's job)."""
    total = torch.zeros(n, dtype=torch.float64)
    for snap in cache.snapshots:
        total += snap.weight * cache.scorer.score(cache.query(snap, x, target), cache.features(snap, 0, n)).double()
    return total
