"""Graph data sets (issue 32, data layer): sizes and labels as PyG's generators make them, checked against networkx
(components, shortest paths) and PyG's own KarateClub; the same graph in every process; stratified transductive node
splits over one shared graph; ground-truth motifs; and the batch the model reads (shared graphs once, each input's
node)."""

from __future__ import annotations

import math
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest
import torch

import xaidash.data.sets  # noqa: F401  (registers the graph sets)
from xaidash.data.catalogue import datasets_table
from xaidash.data.errors import ExplainError
from xaidash.data.modalities.graph import GRAPH, GraphInput, centre_of, feature_stats
from xaidash.data.registry import get_info, load_split
from xaidash.data.sets import graph_sets

NODE_SETS = ("ba_shapes", "tree_cycles", "tree_grid", "infection", "karate")
CPU = torch.device("cpu")


def _all_labels(name: str) -> tuple[object, torch.Tensor]:
    """(the set's one graph, every node's label) from its two splits."""
    train, test = load_split(name, "train"), load_split(name, "test")
    graph = train.graphs[0]
    labels = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    labels[train.nodes], labels[test.nodes] = train.labels, test.labels
    return graph, labels


def _nx(graph: object, nodes: torch.Tensor | None = None) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(graph.num_nodes))  # type: ignore[attr-defined]
    g.add_edges_from(graph.edge_index.t().tolist())  # type: ignore[attr-defined]
    return g if nodes is None else g.subgraph(torch.nonzero(nodes).view(-1).tolist())


def _truth_is_the_motif_edges(graph: object) -> bool:
    """PyG marks a motif's own edges: exactly the edges whose two ends are motif nodes (the attaching edge is not)."""
    src, dst = graph.edge_index  # type: ignore[attr-defined]
    among = graph.node_truth[src] & graph.node_truth[dst]  # type: ignore[attr-defined]
    return bool((graph.edge_truth == among).all())  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", NODE_SETS)
def test_a_node_sets_splits_share_one_graph_and_split_its_nodes_stratified(name: str) -> None:
    train, test = load_split(name, "train"), load_split(name, "test")
    graph = train.graphs[0]
    assert train.graphs[0] is test.graphs[0] and len(train.graphs) == 1
    nodes = torch.cat([train.nodes, test.nodes])
    assert sorted(nodes.tolist()) == list(range(graph.num_nodes))  # disjoint, and every node on one side
    assert len(test) == math.ceil(0.2 * graph.num_nodes)
    assert load_split(name, "test").nodes.tolist() == test.nodes.tolist()  # the same split on every load
    info = get_info(name)
    assert info.graph is not None and info.graph.task == "node" and info.input_shape == (graph.x.shape[1],)
    assert len(info.graph.feature_names) == graph.x.shape[1] == len(info.mean) == len(info.std)
    every = torch.arange(info.num_classes)
    for split in (train, test):  # every class on both sides, in about its share of the graph
        assert set(split.labels.tolist()) == set(every.tolist())
    share = train.labels.bincount(minlength=info.num_classes) / len(train)
    whole = torch.cat([train.labels, test.labels]).bincount() / graph.num_nodes
    assert float((share - whole).abs().max()) < 0.02
    assert graph.is_undirected() and not graph.has_self_loops()


@pytest.mark.parametrize("name", NODE_SETS)
def test_a_node_sets_info_says_what_its_generated_graph_holds(name: str) -> None:
    """The info is written down (listing data sets generates nothing): every fact of it checked on the graph."""
    graph, labels = _all_labels(name)
    info, train = get_info(name), load_split(name, "train")
    mean, std = feature_stats([graph])
    np.testing.assert_allclose(info.mean, mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(info.std, std, rtol=1e-6)
    assert info.num_classes == int(labels.max()) + 1 == len(labels.unique())
    assert info.has_rationales == (getattr(graph, "node_truth", None) is not None)
    assert f"{len(train):,} train / {graph.num_nodes - len(train):,} test nodes" in info.description


def test_listing_the_graph_sets_imports_no_graph_library() -> None:
    code = (
        "import sys\n"
        "from xaidash.data.catalogue import datasets_table\n"
        "rows = {r['name']: r for r in datasets_table()}\n"
        "assert rows['ba_2motifs']['input'] == 'graphs (10 features per node)', rows['ba_2motifs']\n"
        "assert 'torch_geometric' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_generated_graphs_are_the_same_in_every_process_and_leave_the_callers_generators_alone() -> None:
    """BAGraph draws from NumPy's global generator as well as torch's: a process whose NumPy state differs (every
    fresh one) must still get the same graph, and generating must not reseed the caller's run."""
    first, _ = graph_sets._explainer_set("ba_shapes")
    motifs, labels = graph_sets._two_motifs.__wrapped__()  # type: ignore[attr-defined]
    np.random.seed(12345)
    torch.manual_seed(12345)
    numpy_before, torch_before = np.random.get_state()[1].copy(), torch.get_rng_state()
    again, _ = graph_sets._explainer_set("ba_shapes")
    motifs_again, labels_again = graph_sets._two_motifs.__wrapped__()  # type: ignore[attr-defined]
    assert torch.equal(first.edge_index, again.edge_index)
    assert torch.equal(labels, labels_again)
    assert all(torch.equal(a.edge_index, b.edge_index) for a, b in zip(motifs, motifs_again, strict=True))
    assert np.array_equal(np.random.get_state()[1], numpy_before)
    assert torch.equal(torch.get_rng_state(), torch_before)


def test_ba_shapes_is_the_gnnexplainer_benchmark() -> None:
    graph, labels = _all_labels("ba_shapes")
    assert graph.num_nodes == 700 and labels.bincount().tolist() == [300, 160, 160, 80]
    assert int(graph.node_truth.sum()) == 400 and bool((graph.node_truth == (labels > 0)).all())
    assert _truth_is_the_motif_edges(graph)
    houses = list(nx.connected_components(_nx(graph, graph.node_truth)))
    assert len(houses) == 80
    whole = _nx(graph)
    for house in houses:  # a square with a roof: 5 nodes, 6 edges, 2 top + 2 middle + 1 bottom, one attaching edge
        sub = whole.subgraph(house)
        assert sub.number_of_nodes() == 5 and sub.number_of_edges() == 6
        assert sorted(labels[list(house)].tolist()) == [1, 1, 2, 2, 3]
        assert sum(1 for n in house for m in whole[n] if m not in house) == 1
    assert int(graph.edge_truth.sum()) == 80 * 6 * 2  # both directions of every house edge


@pytest.mark.parametrize(("name", "motifs", "size", "edges"), [("tree_cycles", 60, 6, 6), ("tree_grid", 80, 9, 12)])
def test_tree_sets_attach_their_motifs_to_a_binary_tree(name: str, motifs: int, size: int, edges: int) -> None:
    graph, labels = _all_labels(name)
    assert graph.num_nodes == 511 + motifs * size and bool((graph.node_truth == (labels == 1)).all())
    assert _truth_is_the_motif_edges(graph)
    parts = list(nx.connected_components(_nx(graph, graph.node_truth)))
    whole = _nx(graph)
    assert len(parts) == motifs
    for part in parts:
        sub = whole.subgraph(part)
        assert sub.number_of_nodes() == size and sub.number_of_edges() == edges
    tree = whole.subgraph(range(511))
    assert nx.is_tree(tree) and max(d for _, d in tree.degree()) == 3


def test_infection_labels_are_shortest_path_lengths_and_its_truth_pygs_mask() -> None:
    graph, labels = _all_labels("infection")
    infected = torch.nonzero(graph.x[:, 1] == 1).view(-1).tolist()
    assert len(infected) == 50 and bool((graph.x.sum(1) == 1).all())
    far = nx.multi_source_dijkstra_path_length(_nx(graph), infected)
    distance = torch.tensor([min(far.get(n, 4), 4) for n in range(graph.num_nodes)])
    assert torch.equal(labels, distance)
    src = graph.edge_index[0]
    assert torch.equal(graph.edge_truth, distance[src] <= 2)  # every edge out of a node within 2 steps
    assert getattr(graph, "node_truth", None) is None and not get_info("infection").has_rationales


def test_karate_is_pygs_club_with_a_documented_split() -> None:
    from torch_geometric.datasets import KarateClub

    club = KarateClub()[0]
    graph, labels = _all_labels("karate")
    assert torch.equal(labels, club.y) and torch.equal(graph.edge_index, club.edge_index)
    assert graph.num_nodes == 34 and graph.edge_index.shape[1] == 2 * 78
    assert (len(load_split("karate", "train")), len(load_split("karate", "test"))) == (27, 7)
    assert "27 train / 7 test nodes" in get_info("karate").description


def test_ba_2motifs_classes_are_set_by_their_motif() -> None:
    train, test = load_split("ba_2motifs", "train"), load_split("ba_2motifs", "test")
    assert (len(train), len(test)) == (800, 200) and train.nodes is None
    assert train.labels.bincount().tolist() == [400, 400] and test.labels.bincount().tolist() == [100, 100]
    assert not {id(g) for g in train.graphs} & {id(g) for g in test.graphs}
    for split in (train, test):
        for graph, label in zip(split.graphs, split.labels, strict=True):
            assert graph.num_nodes == 25 and int(graph.node_truth.sum()) == 5 and _truth_is_the_motif_edges(graph)
            motif = _nx(graph, graph.node_truth)
            degrees = sorted(d for _, d in motif.degree())
            assert degrees == ([2, 2, 2, 2, 2] if int(label) == 1 else [2, 2, 2, 3, 3])  # a 5-cycle, or a house


def test_the_catalogue_lists_the_graph_sets_with_their_facts() -> None:
    rows = {r["name"]: r for r in datasets_table()}
    assert rows["ba_shapes"]["classes"] == "4" and rows["ba_shapes"]["input"] == "graphs (10 features per node)"
    assert rows["ba_shapes"]["ground truth"] == "rationales" and rows["ba_shapes"]["status"] == "built in"
    assert rows["karate"]["input"] == "graphs (34 features per node)" and rows["ba_2motifs"]["classes"] == "2"
    assert {n: get_info(n).graph.task for n in (*NODE_SETS, "ba_2motifs")} == {  # type: ignore[union-attr]
        **dict.fromkeys(NODE_SETS, "node"),
        "ba_2motifs": "graph",
    }


def test_datasets_check_reads_a_graph_set(capsys: pytest.CaptureFixture[str]) -> None:
    from xaidash.dashboard.cli import main

    assert main(["datasets", "--check", "ba_2motifs"]) == 0
    out = capsys.readouterr().out
    assert "800 train / 200 test graphs" in out and "0 note(s)." in out


def test_prepare_keeps_a_shared_graph_once_and_points_at_each_node() -> None:
    info, test = get_info("ba_shapes"), load_split("ba_shapes", "test")
    batch = GRAPH.prepare(GRAPH.items(test, range(6)), info, None, CPU)
    assert batch.num_graphs == 1 and batch.num_nodes == 700
    assert centre_of(batch).tolist() == test.nodes[:6].tolist()
    two = GRAPH.prepare([GraphInput(test.graphs[0], 3), GraphInput(test.graphs[0].clone(), 3)], info, None, CPU)
    assert two.num_graphs == 2 and centre_of(two).tolist() == [3, 703]


def test_graph_inputs_are_standardised_by_the_training_features() -> None:
    info, test = get_info("infection"), load_split("infection", "test")
    mean, std = torch.tensor(info.mean), torch.tensor(info.std)
    batch = GRAPH.prepare(GRAPH.items(test, [0]), info, None, CPU)
    torch.testing.assert_close(batch.x, (test.graphs[0].x - mean) / std)
    ones = torch.ones(5, 3)
    assert feature_stats([type(test.graphs[0])(x=ones, edge_index=torch.empty(2, 0, dtype=torch.long))]) == (
        [0.0] * 3,
        [1.0] * 3,
    )  # a constant feature is left as it is


def test_bad_graph_inputs_are_refused_in_one_line() -> None:
    info, test = get_info("ba_shapes"), load_split("ba_shapes", "test")
    with pytest.raises(ExplainError, match="Node 700 is not a node of this graph"):
        GRAPH.prepare([GraphInput(test.graphs[0], 700)], info, None, CPU)
    other = test.graphs[0].clone()
    other.x = torch.ones(700, 3)
    with pytest.raises(ExplainError, match="10 feature"):
        GRAPH.prepare([GraphInput(other, 0)], info, None, CPU)
    with pytest.raises(ExplainError, match="not a str"):
        GRAPH.as_batch("a graph")
