"""Graphs: a raw input is a `GraphInput`, a PyTorch Geometric `Data` (node features `x` (n, F) in their own units,
`edge_index` (2, E)) and, for node classification, the node asked about. The model reads a PyG `Batch` of the
inputs' graphs with the features standardised by the training split's per-feature mean and std, and `centre`: the
batch-wide index of each input's node (None for graph classification). Inputs that share one graph (the nodes of
BA-Shapes) share one copy of it in the batch: message passing over it answers every one of them.

torch_geometric is imported inside the functions: it takes seconds to import and only graph data needs it."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.base import MODALITIES, GroundTruth, Modality, cut
from xaidash.data.registry import DatasetInfo, GraphSplit, Split

# torch_geometric 2.8.1 scripts a few helpers with torch.jit.script when it is imported, which torch 2.14 answers with
# a FutureWarning that says nothing a user can act on (the CLI would print it before every graph command).
warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)


@dataclass(frozen=True, eq=False)
class GraphInput:
    """One input: a graph (a PyG `Data`) and, for a node task, the node whose class is asked."""

    graph: Any
    node: int | None = None

    @property
    def nodes(self) -> int:
        return int(self.graph.num_nodes)

    @property
    def edges(self) -> int:
        return int(self.graph.edge_index.shape[1])


def as_graph_input(raw: Any) -> GraphInput:
    """A GraphInput as it is, or a bare PyG `Data` as a whole-graph input."""
    if isinstance(raw, GraphInput):
        return raw
    if hasattr(raw, "edge_index") and hasattr(raw, "x"):
        return GraphInput(raw, None)
    raise ExplainError(f"A graph input is a graph (with node features and edges), not a {type(raw).__name__}.")


def feature_stats(graphs: Sequence[Any]) -> tuple[list[float], list[float]]:
    """Per node feature mean and std over every node of `graphs` (a training split's). A constant feature (the
    generated sets' ones) gets mean 0 and std 1: standardising leaves it as it is, not at zero, so a model still
    reads the structure through it."""
    x = torch.cat([g.x.double() for g in graphs])
    std = x.std(0) if len(x) > 1 else torch.zeros(x.shape[1], dtype=x.dtype)
    constant = [float(s) <= 1e-12 for s in std]
    mean = [0.0 if c else float(v) for v, c in zip(x.mean(0), constant, strict=True)]
    return mean, [1.0 if c else float(s) for s, c in zip(std, constant, strict=True)]


def _standardised(graph: Any, info: DatasetInfo, device: torch.device) -> Any:
    """A copy of `graph` (features and edges only) on `device` with its features standardised."""
    from torch_geometric.data import Data

    features = len(info.graph.feature_names) if info.graph is not None else int(graph.x.shape[1])
    x = torch.as_tensor(graph.x, dtype=torch.float32)
    if x.dim() != 2 or x.shape[1] != features:
        raise ExplainError(
            f"A graph of {info.name} has {features} feature(s) per node; this one has shape {tuple(x.shape)}."
        )
    mean = torch.tensor(info.mean or [0.0] * features, dtype=torch.float32)
    std = torch.tensor(info.std or [1.0] * features, dtype=torch.float32)
    edges = torch.as_tensor(graph.edge_index, dtype=torch.long)
    return Data(x=((x - mean) / std).to(device), edge_index=edges.to(device))


def explained_subgraph(inp: GraphInput, hops: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(node ids, edge ids) of the input's graph that its explanation covers, both ascending (CPU, long): for a node,
    its `hops`-hop neighbourhood (every node whose features can reach it through `hops` layers of message passing)
    and the edges among those nodes; for a whole graph, all of it. Methods, maps and drawings all index a map by
    this one function, so they agree on which node and edge each value belongs to."""
    edge_index = torch.as_tensor(inp.graph.edge_index, dtype=torch.long).cpu()
    if inp.node is None:
        return torch.arange(inp.nodes), torch.arange(edge_index.shape[1])
    from torch_geometric.utils import k_hop_subgraph

    subset, _, _, edge_mask = k_hop_subgraph(int(inp.node), int(hops), edge_index, num_nodes=inp.nodes)
    return subset.sort().values, torch.nonzero(edge_mask).view(-1)


def centre_of(batch: Any) -> torch.Tensor | None:
    """The nodes a prepared batch asks about (a node task), else None (PyG stores no None attribute)."""
    return getattr(batch, "centre", None)


@dataclass(frozen=True)
class GraphModality(Modality):
    def batch(self, raws: Sequence[Any]) -> list[GraphInput]:
        if not raws:
            raise ExplainError("No graphs to explain: pick at least one.")
        return [as_graph_input(r) for r in raws]

    def as_batch(self, inputs: Any) -> list[GraphInput]:
        if isinstance(inputs, (list, tuple)):
            return [as_graph_input(r) for r in inputs]
        return [as_graph_input(inputs)]

    def prepare(self, inputs: Any, info: DatasetInfo, tokenizer: Any, device: torch.device) -> Any:
        """A PyG `Batch` of the inputs' distinct graphs, standardised, with `centre` (N,) long: each input's node as
        an index into the batch's nodes (a node task; absent for a graph task: read it with `centre_of`), and `owner`
        (N,) long: the batch graph each input is."""
        from torch_geometric.data import Batch

        batch_inputs = self.as_batch(inputs)
        distinct: dict[int, int] = {}
        graphs: list[Any] = []
        for inp in batch_inputs:
            if id(inp.graph) not in distinct:
                distinct[id(inp.graph)] = len(graphs)
                graphs.append(_standardised(inp.graph, info, device))
        batch = Batch.from_data_list(graphs)
        owner = torch.tensor([distinct[id(inp.graph)] for inp in batch_inputs], dtype=torch.long, device=device)
        batch.owner = owner
        task = info.graph.task if info.graph is not None else "graph"
        if task == "node":
            for inp in batch_inputs:
                if inp.node is None or not 0 <= inp.node < inp.nodes:
                    raise ExplainError(f"Node {inp.node} is not a node of this graph ({inp.nodes} nodes).")
            local = torch.tensor([int(inp.node or 0) for inp in batch_inputs], dtype=torch.long, device=device)
            batch.centre = batch.ptr[owner] + local
        return batch

    def count(self, batch: Any) -> int:
        return len(batch)

    def rows(self, x: Any) -> int:
        return int(x.owner.shape[0])

    def select(self, x: Any, index: torch.Tensor | slice) -> Any:
        """Inputs of a prepared batch: a node task keeps the batch's graphs and picks the nodes asked about (no copy
        of a shared graph); a graph task re-batches the graphs picked."""
        from torch_geometric.data import Batch

        owner = x.owner[index]
        centre = centre_of(x)
        if centre is not None:
            picked = copy.copy(x)
            picked.owner, picked.centre = owner, centre[index]
            return picked
        graphs = x.index_select(owner.tolist())
        out = Batch.from_data_list(graphs)
        out.owner = torch.arange(len(graphs), device=owner.device)
        return out

    def example(self, info: DatasetInfo, tokenizer: Any, n: int = 1) -> list[GraphInput]:
        """A ring of four nodes at the training mean (node 0 asked, for a node task)."""
        from torch_geometric.data import Data

        features = len(info.graph.feature_names) if info.graph is not None else 1
        mean = torch.tensor(info.mean or [0.0] * features, dtype=torch.float32)
        ring = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 0], [1, 0, 2, 1, 3, 2, 0, 3]], dtype=torch.long)
        graph = Data(x=mean.expand(4, features).clone(), edge_index=ring)
        node = 0 if info.graph is not None and info.graph.task == "node" else None
        return [GraphInput(graph, node) for _ in range(n)]

    def describe(self, input_shape: Sequence[int]) -> str:
        return f"graphs ({input_shape[0]} features per node)" if len(input_shape) == 1 else "graphs"

    def one_line(self, raw: Any, info: DatasetInfo, chars: int = 200) -> str:
        """'node 12 of a graph of 700 nodes and 1,956 edges' (edges counted once per pair of directions)."""
        inp = as_graph_input(raw)
        size = f"a graph of {inp.nodes:,} nodes and {inp.edges // 2:,} edges"
        return cut(f"node {inp.node} of {size}" if inp.node is not None else size[0].upper() + size[1:], chars)

    def input_rows(self, x: Any, value: torch.Tensor) -> torch.Tensor:
        """A layer's rows per input: a node layer's (one row per node of the batch) at each input's node (a node
        task), a readout's (one row per graph of the batch) at each input's graph."""
        centre = centre_of(x)
        if centre is not None and value.shape[0] == int(x.num_nodes):
            return value[centre]
        if value.shape[0] == int(x.num_graphs):
            return value[x.owner]
        raise ExplainError(
            f"A layer of {value.shape[0]} rows is neither per node ({int(x.num_nodes)}) nor per graph "
            f"({int(x.num_graphs)}) of the batch."
        )

    def short_name(self, raw: Any) -> str | None:
        """'node 412' (a node task's inputs share one graph: the node tells them apart); None for a whole graph."""
        node = as_graph_input(raw).node
        return None if node is None else f"node {node}"

    def same_inputs(self, a: Sequence[int], b: Sequence[int]) -> bool:
        return tuple(a) == tuple(b)

    def item(self, split: Split, index: int) -> GraphInput:
        assert isinstance(split, GraphSplit)
        graph = split.graphs[int(split.graph_of[index])]
        return GraphInput(graph, None if split.nodes is None else int(split.nodes[index]))

    def items(self, split: Split, indices: Sequence[int]) -> list[GraphInput]:
        return [self.item(split, int(i)) for i in indices]

    def ground_truth(self, split: Split, indices: Sequence[int]) -> GroundTruth:
        """The motif's nodes of each sample's graph (where the data set records them), as rationales: the pointing
        game and energy read them per node as they read a text's words."""
        assert isinstance(split, GraphSplit)
        truths = [getattr(self.item(split, int(i)).graph, "node_truth", None) for i in indices]
        if all(t is None for t in truths):
            return GroundTruth()
        return GroundTruth(rationales=[[] if t is None else torch.nonzero(t).view(-1).tolist() for t in truths])

    def check_split(self, split: Split, dataset: str) -> None:
        if not isinstance(split, GraphSplit):
            raise self.wrong_split(dataset)


GRAPH = MODALITIES.register(
    GraphModality(
        id="graph",
        label="graphs",
        unit="node or edge",  # a graph map scores both (explainers/modalities/graph_maps.py)
        units="nodes and edges",
        sample="graph",
        generic_training=(("epochs", 200), ("batch_size", 64), ("lr", 1e-2), ("weight_decay", 5e-4)),
    )
)
