"""What the graph methods share (registers no method): the form of their output, one `GraphAttribution` per input.

A graph method explains an input over the part of its graph that `explained_subgraph` names (a node's `hops`-hop
neighbourhood, or a whole graph): values per node feature and per edge, indexed in that function's order, so the
adapter (explainers/modalities/graph.py) can turn them into one map per input and draw them on a fixed layout."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GraphAttribution:
    """One input's explanation over its explained subgraph (n nodes, e edges, in `explained_subgraph`'s order):
    `node_features` (n, F), a value per node and feature (None: the method scores no features, as PGExplainer and
    attention); `edges` (e,), a value per edge (None: the method scores no edges). At least one of them is given;
    both are float32 on the CPU."""

    node_features: torch.Tensor | None
    edges: torch.Tensor | None

    def __post_init__(self) -> None:
        if self.node_features is None and self.edges is None:
            raise ValueError("a graph attribution scores node features, edges or both")
