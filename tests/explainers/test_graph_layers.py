"""Inside a GNN (issue 32): each message-passing layer's node embeddings as `embed(x, edge_index)` gives them, and
the over-smoothing measures checked against direct computations (scikit-learn's pairwise distances, a dense
normalised Laplacian written out by hand)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import euclidean_distances

import xaidash.data.sets  # (registers the graph sets)
import xaidash.models.zoo  # noqa: F401  (registers the models)
from xaidash.data.registry import get_info, load_split
from xaidash.explainers.inspection.graph_layers import dirichlet_energy, graph_layers, relative_spread
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import ModelError, get_spec

CPU = torch.device("cpu")


def _bundle(dataset: str, layers: int = 3) -> ModelBundle:
    torch.manual_seed(0)
    info = get_info(dataset)
    spec = get_spec("gcn")
    return ModelBundle(spec.build(info, layers=layers), spec, info, CPU)


def _ring_with_chords(n: int = 9) -> torch.Tensor:
    pairs = [(i, (i + 1) % n) for i in range(n)] + [(0, 4), (2, 7)]
    src = [a for a, b in pairs] + [b for a, b in pairs]
    dst = [b for a, b in pairs] + [a for a, b in pairs]
    return torch.tensor([src, dst])


def test_relative_spread_is_the_mean_pairwise_squared_distance_over_twice_the_mean_squared_norm() -> None:
    h = torch.randn(37, 6, generator=torch.Generator().manual_seed(1)) + 2.0
    d2 = euclidean_distances(h.numpy().astype(np.float64), squared=True)
    n = len(h)
    expected = d2.sum() / (n * (n - 1)) / (2 * float((h.double() ** 2).sum(1).mean()))
    assert relative_spread(h) == pytest.approx(expected, rel=1e-9)
    assert relative_spread(h * 40.0) == pytest.approx(expected, rel=1e-6)  # a layer's scale does not count
    assert relative_spread(h[:1].repeat(10, 1)) == pytest.approx(0.0, abs=1e-12)  # one shared embedding
    assert relative_spread(torch.zeros(5, 3)) == 0.0 and relative_spread(h[:1]) == 0.0


def test_dirichlet_energy_is_the_rayleigh_quotient_of_the_gcn_laplacian() -> None:
    edges = _ring_with_chords()
    n = 9
    h = torch.randn(n, 4, generator=torch.Generator().manual_seed(2))
    adj = np.eye(n)  # Ã: the graph with self-loops, as a GCN layer averages over it
    adj[edges[0].numpy(), edges[1].numpy()] = 1.0
    d = adj.sum(1)
    laplacian = np.eye(n) - adj / np.sqrt(np.outer(d, d))
    x = h.double().numpy()
    expected = np.trace(x.T @ laplacian @ x) / np.trace(x.T @ x)
    assert dirichlet_energy(h, edges) == pytest.approx(expected, rel=1e-9)
    # The edgewise form: half the sum over directed edges of |x_i/√d̃_i - x_j/√d̃_j|².
    s, t = edges.numpy()
    edgewise = 0.5 * (((x[s] / np.sqrt(d[s])[:, None] - x[t] / np.sqrt(d[t])[:, None]) ** 2).sum())
    assert dirichlet_energy(h, edges) == pytest.approx(edgewise / (x**2).sum(), rel=1e-9)
    # 0 where repeated GCN averaging converges: every channel proportional to D̃^1/2 1.
    limit = torch.tensor(np.sqrt(d)).unsqueeze(1) * torch.tensor([[1.0, -3.0]], dtype=torch.float64)
    assert dirichlet_energy(limit, edges) == pytest.approx(0.0, abs=1e-12)
    assert dirichlet_energy(torch.zeros(n, 2), edges) == 0.0


def test_a_node_tasks_layers_are_embeds_rows_at_the_nodes_asked_and_shrink_with_depth() -> None:
    torch.set_num_threads(1)
    bundle = _bundle("karate", layers=6)
    test = load_split("karate", "test")
    got = graph_layers(bundle, test, range(len(test)))
    batch = bundle.prepare(bundle.adapter.items(test, range(len(test))))
    direct = bundle.model.embed(batch.x, batch.edge_index)
    assert got.names[0] == "layer 1 of 6 (20 units)" and len(got.embeddings) == 6
    for layer, h in zip(got.embeddings, direct, strict=True):
        np.testing.assert_allclose(layer, h[test.nodes].detach().numpy(), rtol=1e-6)
        assert layer.shape == (len(test), 20)
    assert got.samples.tolist() == list(range(len(test))) and got.nodes.tolist() == test.nodes.tolist()
    assert got.labels.tolist() == test.labels.tolist()
    assert got.preds.tolist() == bundle.predict_proba(bundle.adapter.items(test, range(len(test)))).argmax(1).tolist()
    assert got.motif is None  # the karate club records no motif
    # Over the whole graph (34 nodes, not the 7 asked about), as the measures define it.
    whole = [h.detach() for h in direct]
    assert got.spread == pytest.approx([relative_spread(h) for h in whole], rel=1e-9)
    assert got.energy == pytest.approx([dirichlet_energy(h, batch.edge_index) for h in whole], rel=1e-9)
    assert got.energy[-1] < got.energy[0]  # six GCN layers average neighbours together


def test_a_graph_tasks_points_are_every_node_of_the_graphs_asked() -> None:
    bundle = _bundle("ba_2motifs")
    test = load_split("ba_2motifs", "test")
    picked = [3, 0, 11]
    got = graph_layers(bundle, test, picked)
    sizes = [int(test.graphs[i].num_nodes) for i in picked]
    assert len(got) == sum(sizes) and got.embeddings[0].shape == (sum(sizes), 20)
    assert got.samples.tolist() == [i for i, n in zip(picked, sizes, strict=True) for _ in range(n)]
    assert got.nodes.tolist() == [k for n in sizes for k in range(n)]
    truth = torch.cat([test.graphs[i].node_truth for i in picked]).numpy()
    assert got.motif is not None and (got.motif == truth).all()
    assert got.labels.tolist() == [int(test.labels[i]) for i, n in zip(picked, sizes, strict=True) for _ in range(n)]


def test_a_model_without_message_passing_layers_is_refused_in_a_sentence() -> None:
    bundle = _bundle("karate")
    test = load_split("karate", "test")
    with pytest.raises(ModelError, match="at least one sample"):
        graph_layers(bundle, test, [])
    plain = ModelBundle(torch.nn.Linear(34, 4), bundle.spec, bundle.info, CPU)  # no embed(x, edge_index)
    with pytest.raises(ModelError, match="no message-passing layers"):
        graph_layers(plain, test, [0])


def test_the_penultimate_layer_of_a_graph_model_is_read_per_input() -> None:
    """The head's input per input (the out-of-distribution check reads it): a node task's rows at the nodes asked,
    a graph task's pooled rows at each input's graph, whatever else shares the batch."""
    from xaidash.models.inspect.activations import PENULTIMATE, input_activation

    bundle = _bundle("karate")
    test = load_split("karate", "test")
    inputs = bundle.adapter.items(test, range(len(test)))
    got = input_activation(bundle, inputs, PENULTIMATE)
    batch = bundle.prepare(inputs)
    whole = torch.cat(bundle.model.embed(batch.x, batch.edge_index), dim=1)
    np.testing.assert_allclose(got, whole[test.nodes].detach().numpy(), rtol=1e-6)
    motifs = _bundle("ba_2motifs")
    graphs = load_split("ba_2motifs", "test")
    together = input_activation(motifs, motifs.adapter.items(graphs, [4, 1, 9]), PENULTIMATE)
    alone = [input_activation(motifs, motifs.adapter.items(graphs, [i]), PENULTIMATE)[0] for i in (4, 1, 9)]
    assert together.shape == (3, 20)
    np.testing.assert_allclose(together, np.stack(alone), rtol=1e-5, atol=1e-6)
