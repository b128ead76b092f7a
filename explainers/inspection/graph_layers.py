"""Inside a graph neural network: every message-passing layer's node embeddings, read through the graph models'
`embed(x, edge_index)` (the models' contract: one (n, d) tensor per layer, in order), and how far apart they stay
layer after layer (over-smoothing: repeated neighbourhood averaging pulls the embeddings of a connected graph
together until nodes can no longer be told apart).

Two measures of that spread, both computed on every node of the graphs read (the whole graph for a node task), both
free of a layer's scale (its width and weights differ from the next layer's):
- `relative_spread`: the mean squared distance between two nodes' embeddings relative to their mean squared norm
  (0 when all nodes share one embedding). Distances rather than directions: on the generated sets every node starts
  with the same features, and a GCN's layers then keep nearly every embedding on one ray, telling nodes apart by
  length, so the cosine distance (MAD, Chen et al. 2020) reads about 0 at every layer there.
- `dirichlet_energy` (Cai and Wang 2020, "A note on over-smoothing for graph neural networks"): tr(Hᵀ Δ H) with
  Δ = I - D̃^-1/2 Ã D̃^-1/2 the GCN's own normalised Laplacian (self-loops added), divided by tr(Hᵀ H) so that a
  layer's scale does not count (a Rayleigh quotient in [0, 2]). It measures how much neighbours still differ and is
  0 exactly where a GCN's repeated averaging converges (every channel proportional to D̃^1/2 1).

Nothing here is a library call: neither PyG nor scikit-learn computes these per-layer summaries; the tests check
them against scikit-learn's pairwise distances and a dense Laplacian."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.data.modalities.graph import centre_of
from xaidash.data.registry import GraphSplit, Split
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import ModelError

SPREAD = "spread (relative pairwise distance)"
ENERGY = "Dirichlet energy (normalised)"


def relative_spread(h: torch.Tensor) -> float:
    """The mean squared distance between the embeddings of two distinct nodes, over twice their mean squared norm:
    mean_{i≠j} |h_i - h_j|² / (2 mean_i |h_i|²), in [0, n/(n-1)]; 0 when every node has the same embedding (or all
    are zero). O(n·d): the mean over all pairs is twice the embeddings' variance."""
    n = int(h.shape[0])
    x = h.double()
    squares = float(x.square().sum(1).mean()) if n else 0.0
    if n < 2 or squares == 0.0:
        return 0.0
    variance = squares - float(x.mean(0).square().sum())
    return max(0.0, variance) * n / (n - 1) / squares


def dirichlet_energy(h: torch.Tensor, edge_index: torch.Tensor) -> float:
    """tr(Hᵀ Δ H) / tr(Hᵀ H) with Δ = I - D̃^-1/2 Ã D̃^-1/2 (Ã: the graph with self-loops, as a GCN layer
    averages); 0 for an all-zero `h`. Â's weights come from PyG's own `gcn_norm`."""
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    x = h.double()
    total = float(x.square().sum())
    if total == 0.0:
        return 0.0
    index, weight = gcn_norm(edge_index, num_nodes=int(x.shape[0]), add_self_loops=True, dtype=x.dtype)
    assert weight is not None  # gcn_norm of an edge index returns the weights
    source, target = index[0], index[1]
    smoothed = (weight.unsqueeze(1) * x[source] * x[target]).sum()  # tr(Hᵀ Â H)
    return max(0.0, (total - float(smoothed)) / total)


@dataclass
class GraphLayers:
    """Per message-passing layer, the embeddings of the points read: every node asked about (a node task: one point
    per sample) or every node of the graphs asked about (a graph task). `samples`: the split index each point
    belongs to; `nodes`: its node in that sample's graph; `labels` / `preds`: its sample's true and predicted class;
    `motif`: whether the node lies in the ground-truth motif (None where the data set records none). `spread` and
    `energy`: per layer, over every node of the graphs read."""

    names: list[str]
    embeddings: list[np.ndarray]
    samples: np.ndarray
    nodes: np.ndarray
    labels: np.ndarray
    preds: np.ndarray
    motif: np.ndarray | None
    spread: list[float]
    energy: list[float]

    def __len__(self) -> int:
        return len(self.samples)


def _points(batch: Any, owner: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows of the batch's nodes read, the input each row belongs to, its node id in its own graph)."""
    centre = centre_of(batch)
    if centre is not None:  # a node task: one point per input, its node
        local = centre - batch.ptr[owner]
        return centre, torch.arange(len(centre), device=centre.device), local
    first: dict[int, int] = {}
    for k, g in enumerate(owner.tolist()):  # the batch holds each distinct graph once
        first.setdefault(g, k)
    rows = torch.arange(int(batch.num_nodes), device=owner.device)
    input_of_graph = torch.tensor([first[g] for g in range(int(batch.num_graphs))], device=owner.device)
    return rows, input_of_graph[batch.batch], rows - batch.ptr[batch.batch]


def _per_graph_spread(h: torch.Tensor, batch: Any) -> float:
    """The mean over the batch's graphs (of two nodes or more) of each graph's relative spread."""
    values = [
        relative_spread(h[int(batch.ptr[g]) : int(batch.ptr[g + 1])])
        for g in range(int(batch.num_graphs))
        if int(batch.ptr[g + 1] - batch.ptr[g]) > 1
    ]
    return float(np.mean(values)) if values else 0.0


def layer_names(embeddings: Sequence[torch.Tensor]) -> list[str]:
    layers = len(embeddings)
    return [f"layer {k + 1} of {layers} ({int(h.shape[1])} units)" for k, h in enumerate(embeddings)]


def _motif(split: GraphSplit, samples: np.ndarray, nodes: np.ndarray) -> np.ndarray | None:
    graphs = [split.graphs[int(split.graph_of[int(s)])] for s in samples]
    if all(getattr(g, "node_truth", None) is None for g in graphs):
        return None
    truth = [getattr(g, "node_truth", None) for g in graphs]
    return np.array([t is not None and bool(t[int(n)]) for t, n in zip(truth, nodes, strict=True)])


@torch.no_grad()
def graph_layers(bundle: ModelBundle, split: Split, indices: Sequence[int]) -> GraphLayers:
    """The layers' embeddings of the samples `indices` of `split` (a graph data set's), in one forward pass over
    their graphs (a shared graph once), on the model's device."""
    embed = getattr(bundle.model, "embed", None)
    if bundle.info.graph is None or not isinstance(split, GraphSplit) or embed is None:
        raise ModelError(f"{bundle.spec.name} on {bundle.info.name} has no message-passing layers to read.")
    if not len(indices):
        raise ModelError("Pick at least one sample to read the layers of.")
    picked = [int(i) for i in indices]
    batch: Any = bundle.prepare(bundle.adapter.items(split, picked))  # a PyG Batch (the graph modality)
    bundle.model.eval()
    layers = list(embed(batch.x, batch.edge_index))
    if not layers:
        raise ModelError(f"{bundle.spec.name} returned no layer embeddings.")
    preds = bundle.model(batch).argmax(1).cpu()
    rows, inputs, local = _points(batch, batch.owner)
    inputs_cpu = inputs.cpu()
    samples = np.asarray(picked, dtype=np.int64)[inputs_cpu.numpy()]
    nodes = local.cpu().numpy().astype(np.int64)
    return GraphLayers(
        names=layer_names(layers),
        embeddings=[h[rows].float().cpu().numpy() for h in layers],
        samples=samples,
        nodes=nodes,
        labels=split.labels[torch.as_tensor(samples)].long().numpy(),
        preds=preds[inputs_cpu].numpy(),
        motif=_motif(split, samples, nodes),
        spread=[_per_graph_spread(h, batch) for h in layers],
        energy=[dirichlet_energy(h, batch.edge_index) for h in layers],
    )
