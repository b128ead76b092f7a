"""tracin_projected: per-sample gradients of every parameter agree with plain autograd, and the count-sketch
projection keeps their dot products (the scores rank training samples as the exact full-gradient TracIn does);
computed once and cached, then read by the next query."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from xaidash.data.registry import load_split
from xaidash.explainers.influence import explain_influence
from xaidash.explainers.influence.projected import ProjectedTracIn, per_sample_grads
from xaidash.explainers.influence.training_set import training_data
from xaidash.models.runs.store import Run, load_bundle
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Run:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(tmp_path_factory.mktemp("runs")))
        cfg = TrainConfig(dataset="shapes", model="resnet_small", epochs=2, max_train_samples=80, device="cpu")
        result = train(cfg)
    assert result.ok, result.error
    return result.run


def test_per_sample_grads_match_autograd(tiny: Run) -> None:
    bundle = load_bundle(tiny, device="cpu")
    data = training_data(tiny)
    x, y = data.inputs(bundle, 0, 3), data.labels(0, 3)
    grads = per_sample_grads(bundle.model, x, y)
    for i in range(3):
        bundle.model.zero_grad()
        F.cross_entropy(bundle.model(x[i : i + 1]), y[i : i + 1], reduction="sum").backward()
        for name, p in bundle.model.named_parameters():
            assert torch.allclose(grads[name][i], p.grad.flatten(), atol=1e-5, rtol=1e-4), name


def test_projection_keeps_the_ranking_and_is_cached(tiny: Run) -> None:
    bundle = load_bundle(tiny, device="cpu")
    data = training_data(tiny)
    query = load_split("shapes", "test").image(0)
    first = explain_influence(bundle, tiny, query, method="tracin_projected", k=5)
    assert first.checkpoints == [1, 2] and "parameters" in first.layer
    assert any("computed and cached" in n for n in first.notes)
    assert (tiny.path / "influence" / "tracin_projected" / "epoch_002").is_dir()
    again = explain_influence(bundle, tiny, query, method="tracin_projected", k=5)
    assert any("read the cached" in n for n in again.notes)
    assert [s.index for s in again.proponents] == [s.index for s in first.proponents]

    # the same scores from the exact full gradients (no projection), one checkpoint: the ranks agree
    x, y = data.inputs(bundle, 0, len(data)), data.labels(0, len(data))
    model = load_bundle(tiny, device="cpu", epoch=2).model
    q = bundle.prepare(query)
    target = torch.tensor([first.target])
    exact_t = torch.cat(list(per_sample_grads(model, x, y).values()), dim=1)
    exact_q = torch.cat(list(per_sample_grads(model, q, target).values()), dim=1)
    exact = exact_t @ exact_q[0]
    sketch = ProjectedTracIn()
    layer = model.get_submodule("fc")
    projected = sketch.score(sketch.features(model, layer, q, target), sketch.features(model, layer, x, y))
    assert spearmanr(exact.numpy(), projected.numpy()).statistic >= 0.9
    assert Path(tiny.path / "influence" / "tracin_projected" / "manifest.json").exists()
