"""A graph map (registers nothing): one value per node of an input's explained subgraph (`explained_subgraph`), then one
per edge, and labels that name each value, so a map read back without its input (a report's JSON) is drawn again
exactly: the subgraph's structure, the node asked about, the ground-truth motif and each node's raw features live in
the labels.

Labels: 'node 12 [asked, motif]: feature 0=1; feature 1=0.5' (the roles in brackets only where a node has one; the
features of a node are its raw values, the nonzero ones where a graph has more than `FEATURES_SHOWN` of them) and
'edge 12-40 [motif]' (the edge from node 12 to node 40; PyG stores an undirected edge as two directed ones).

A node's value is the sum of its feature values, or its own value where a method scores whole nodes (occlusion by
removing a node); where a method scores only edges (PGExplainer, attention), it is the mean of the values of the edges
that touch it in the subgraph (0 for a node without one); where it scores no edges, an edge's value is the mean of
its two nodes' values. Both are written by hand: PyG's `Explanation` keeps node and edge masks apart."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.graph import GraphInput, explained_subgraph

FEATURES_SHOWN = 12  # a node label lists every feature up to this many, else its nonzero ones (at most this many)
ASKED, MOTIF = "asked", "motif"
_NODE = re.compile(r"^node (\d+)(?: \[([^\]]*)\])?(?:: (.*))?$")
_EDGE = re.compile(r"^edge (\d+)-(\d+)(?: \[([^\]]*)\])?$")


@dataclass(frozen=True)
class GraphLayout:
    """What a map's labels say: the subgraph's node ids (graph ids, in map order), its edges as pairs of positions
    into `nodes`, which node was asked (a position, or None), which nodes and edges the ground truth marks, and
    each node's features as (name, value) pairs."""

    nodes: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    asked: int | None
    motif_nodes: tuple[bool, ...]
    motif_edges: tuple[bool, ...]
    features: tuple[tuple[tuple[str, float], ...], ...]

    @property
    def structure(self) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
        """The key a drawing's layout is cached by: the same subgraph gets the same positions for every method."""
        return self.nodes, self.edges

    def split(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(node values, edge values) of a map of len(nodes) + len(edges) values."""
        v = np.asarray(values, np.float32).reshape(-1)
        n = len(self.nodes)
        if v.size != n + len(self.edges):
            raise ExplainError(f"A graph map of {n} nodes and {len(self.edges)} edges has {v.size} values.")
        return v[:n], v[n:]


def _roles(*flags: tuple[str, bool]) -> str:
    named = [name for name, on in flags if on]
    return f" [{', '.join(named)}]" if named else ""


def _features_text(names: Sequence[str], row: Sequence[float]) -> str:
    pairs = list(zip(names, row, strict=True))
    if len(pairs) > FEATURES_SHOWN:
        pairs = [(k, v) for k, v in pairs if v != 0][:FEATURES_SHOWN]
    return "; ".join(f"{k}={v:.6g}" for k, v in pairs) if pairs else "all 0"


def graph_labels(inp: GraphInput, nodes: torch.Tensor, edges: torch.Tensor, feature_names: Sequence[str]) -> list[str]:
    """The labels of a map over the subgraph (`nodes`, `edges` ids of `inp`'s graph): one per node, then per edge."""
    g = inp.graph
    x = torch.as_tensor(g.x, dtype=torch.float32).cpu()
    names = list(feature_names) + [f"feature {i}" for i in range(len(feature_names), x.shape[1])]
    node_truth = getattr(g, "node_truth", None)
    edge_truth = getattr(g, "edge_truth", None)
    ei = torch.as_tensor(g.edge_index, dtype=torch.long).cpu()
    out = []
    for v in nodes.tolist():
        roles = _roles((ASKED, v == inp.node), (MOTIF, node_truth is not None and bool(node_truth[v])))
        out.append(f"node {v}{roles}: {_features_text(names[: x.shape[1]], x[v].tolist())}")
    for e in edges.tolist():
        roles = _roles((MOTIF, edge_truth is not None and bool(edge_truth[e])))
        out.append(f"edge {int(ei[0, e])}-{int(ei[1, e])}{roles}")
    return out


def _features(text: str | None) -> tuple[tuple[str, float], ...]:
    if not text or text == "all 0":
        return ()
    pairs = [cell.rpartition("=") for cell in text.split("; ")]
    return tuple((k, float(v)) for k, _, v in pairs)


def parse_graph_labels(labels: Sequence[str] | None) -> GraphLayout | None:
    """The `GraphLayout` a map's labels describe; None when they are not a graph map's labels."""
    if not labels:
        return None
    nodes: list[int] = []
    asked: int | None = None
    motif_nodes: list[bool] = []
    features = []
    edges: list[tuple[int, int]] = []
    motif_edges: list[bool] = []
    try:
        for label in labels:
            node, edge = _NODE.match(label), _EDGE.match(label)
            if node and not edges:
                roles = (node.group(2) or "").split(", ")
                asked = len(nodes) if ASKED in roles else asked
                nodes.append(int(node.group(1)))
                motif_nodes.append(MOTIF in roles)
                features.append(_features(node.group(3)))
            elif edge:
                edges.append((int(edge.group(1)), int(edge.group(2))))
                motif_edges.append(MOTIF in (edge.group(3) or "").split(", "))
            else:
                return None
        where = {v: i for i, v in enumerate(nodes)}
        pairs = tuple((where[a], where[b]) for a, b in edges)
    except (ValueError, KeyError):
        return None
    return GraphLayout(tuple(nodes), pairs, asked, tuple(motif_nodes), tuple(motif_edges), tuple(features))


def _node_from_edges(n: int, pairs: np.ndarray, edge_values: np.ndarray) -> np.ndarray:
    """Each node's value as the mean of the values of the edges that touch it (0 where none does)."""
    total, count = np.zeros(n, np.float64), np.zeros(n, np.float64)
    for side in (0, 1):
        np.add.at(total, pairs[side], edge_values)
        np.add.at(count, pairs[side], 1.0)
    return np.where(count > 0, total / np.maximum(count, 1.0), 0.0).astype(np.float32)


def one_map(
    inp: GraphInput, hops: int, part: Any, feature_names: Sequence[str]
) -> tuple[np.ndarray, list[str], np.ndarray | None]:
    """(map over the subgraph's nodes then edges, its labels, the node x feature values or None) of one input's
    `GraphAttribution` (node features, whole nodes where the method scores those, edges), checked against the
    subgraph's size. A node's value: its features' sum, else its own value, else derived from its edges."""
    node_features, edge_values = part.node_features, part.edges
    whole = getattr(part, "nodes", None)
    nodes, edges = explained_subgraph(inp, hops)
    n, e = len(nodes), len(edges)
    where = torch.full((inp.nodes,), -1, dtype=torch.long)
    where[nodes] = torch.arange(n)
    pairs = where[torch.as_tensor(inp.graph.edge_index, dtype=torch.long).cpu()[:, edges]].numpy()
    per_feature = None
    if node_features is not None:
        per_feature = torch.as_tensor(node_features, dtype=torch.float32).detach().cpu().numpy()
        if per_feature.ndim != 2 or per_feature.shape[0] != n:
            raise ExplainError(
                f"A graph method scored node features of shape {per_feature.shape}; the explained subgraph has {n} nodes."
            )
    edge_v = None if edge_values is None else torch.as_tensor(edge_values).detach().float().cpu().numpy().reshape(-1)
    if edge_v is not None and edge_v.size != e:
        raise ExplainError(f"A graph method scored {edge_v.size} edges; the explained subgraph has {e}.")
    if per_feature is not None:
        node_v = per_feature.sum(1)
    elif whole is not None:
        node_v = torch.as_tensor(whole).detach().float().cpu().numpy().reshape(-1)
        if node_v.size != n:
            raise ExplainError(f"A graph method scored {node_v.size} nodes; the explained subgraph has {n}.")
    else:
        assert edge_v is not None  # GraphAttribution holds one of its parts at least
        node_v = _node_from_edges(n, pairs, edge_v)
    if edge_v is None:
        edge_v = ((node_v[pairs[0]] + node_v[pairs[1]]) / 2).astype(np.float32) if e else np.zeros(0, np.float32)
    values = np.concatenate([node_v, edge_v]).astype(np.float32)
    return values, graph_labels(inp, nodes, edges, feature_names), per_feature
