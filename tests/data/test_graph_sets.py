"""Graph data sets (issue 32, data layer): sizes and labels as PyG's generators make them, transductive node splits
over one shared graph, ground-truth motifs, and the batch the model reads (shared graphs once, each input's node)."""

from __future__ import annotations

import pytest
import torch

import xaidash.data.sets  # noqa: F401  (registers the graph sets)
from xaidash.data.errors import ExplainError
from xaidash.data.modalities.graph import GRAPH, GraphInput, centre_of, feature_stats
from xaidash.data.registry import get_info, load_split

NODE_SETS = ("ba_shapes", "tree_cycles", "tree_grid", "infection", "karate")
CPU = torch.device("cpu")


@pytest.mark.parametrize("name", NODE_SETS)
def test_a_node_sets_splits_share_one_graph_and_partition_its_nodes(name: str) -> None:
    train, test = load_split(name, "train"), load_split(name, "test")
    assert train.graphs[0] is test.graphs[0] and len(train.graphs) == 1
    nodes = torch.cat([train.nodes, test.nodes])
    assert sorted(nodes.tolist()) == list(range(train.graphs[0].num_nodes))
    assert len(test) == round(0.2 * train.graphs[0].num_nodes)
    assert load_split(name, "test").nodes.tolist() == test.nodes.tolist()  # the same split on every load
    info = get_info(name)
    assert info.graph is not None and info.graph.task == "node"
    assert int(torch.cat([train.labels, test.labels]).max()) < info.num_classes


def test_ba_shapes_is_the_gnnexplainer_benchmark() -> None:
    train, test = load_split("ba_shapes", "train"), load_split("ba_shapes", "test")
    graph = train.graphs[0]
    labels = torch.empty(graph.num_nodes, dtype=torch.long)
    labels[train.nodes], labels[test.nodes] = train.labels, test.labels
    assert graph.num_nodes == 700 and labels.bincount().tolist() == [300, 160, 160, 80]
    assert int(graph.node_truth.sum()) == 400 and bool((graph.node_truth == (labels > 0)).all())
    motif_edges = graph.edge_index[:, graph.edge_truth]
    assert bool(graph.node_truth[motif_edges].all())  # every truth edge joins two house nodes


def test_ba_2motifs_classes_are_set_by_their_motif() -> None:
    train, test = load_split("ba_2motifs", "train"), load_split("ba_2motifs", "test")
    assert (len(train), len(test)) == (800, 200) and train.nodes is None
    for split in (train, test):
        for graph, label in zip(split.graphs[:40], split.labels[:40], strict=True):
            motif = graph.edge_index[:, graph.edge_truth]
            cycle = int(label) == 1
            assert int(graph.node_truth.sum()) == 5
            assert motif.shape[1] == (10 if cycle else 12)  # a 5-cycle's edges, a house's, both directions


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
