"""A graph convolutional network (Kipf and Welling 2017) in PyTorch Geometric's `GCNConv`, for node classification
(the GNNExplainer paper's model: three layers of 20 units, their outputs concatenated before a linear layer) and
graph classification (the same layers, a global mean readout over the nodes, then an MLP head, as the course
describes). Every nonlinearity is its own module.

`forward(batch)` reads the graph modality's prepared batch (a PyG `Batch` with `centre` for a node task) and answers
(N, classes), one row per input, so the bundle, the training loop and the pages stay generic; `gnn(x, edge_index,
batch=None)` is the same network in PyG's convention (node logits, or graph logits with `batch`), what
`torch_geometric.explain` calls."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xaidash.data.modalities.graph import centre_of
from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import ModelOption, ModelSpec, register
from xaidash.models.training.recipes import Recipe

HIDDEN = 20
LAYERS = 3


class GraphGCN(nn.Module):
    def __init__(self, features: int, classes: int, task: str, hidden: int = HIDDEN, layers: int = LAYERS) -> None:
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.task = task
        self.convs = nn.ModuleList(GCNConv(features if i == 0 else hidden, hidden) for i in range(layers))
        self.acts = nn.ModuleList(nn.ReLU() for _ in range(layers))
        width = hidden * layers
        if task == "node":
            self.head: nn.Module = nn.Linear(width, classes)
        else:
            self.head = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def embed(self, x: torch.Tensor, edge_index: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's node embeddings (n, hidden), in order."""
        out, h = [], x
        for conv, act in zip(self.convs, self.acts, strict=True):
            h = act(conv(h, edge_index))
            out.append(h)
        return out

    def gnn(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None) -> torch.Tensor:
        """PyG's convention: node logits (n, classes), or graph logits (graphs, classes) for a graph task."""
        from torch_geometric.nn import global_mean_pool

        h = torch.cat(self.embed(x, edge_index), dim=1)
        if self.task == "node":
            return self.head(h)
        index = batch if batch is not None else torch.zeros(len(x), dtype=torch.long, device=x.device)
        return self.head(global_mean_pool(h, index))

    def forward(self, batch: Any) -> torch.Tensor:
        centre = centre_of(batch)
        if centre is not None:
            return self.gnn(batch.x, batch.edge_index)[centre]
        return self.gnn(batch.x, batch.edge_index, batch.batch)[batch.owner]


def _fits(info: DatasetInfo) -> str | None:
    return None if info.graph is not None else "reads graphs (ba_shapes, tree_cycles, ba_2motifs, karate, ...)"


def build(info: DatasetInfo, hidden: int = HIDDEN, layers: int = LAYERS, **_: Any) -> GraphGCN:
    assert info.graph is not None
    return GraphGCN(info.input_shape[0], info.num_classes, info.graph.task, int(hidden), int(layers))


# Full-batch training on a node set (batch_size above its training nodes). Measured later; untested settings.
RECIPES = {
    "graph": Recipe(epochs=300, batch_size=4096, lr=1e-2, optimizer="adam", schedule="constant", weight_decay=5e-4),
}

register(
    ModelSpec(
        name="gcn",
        modality="graph",
        build=build,
        description=f"Graph convolutional network: {LAYERS} GCN layers of {HIDDEN} units, their outputs concatenated; "
        "a linear layer per node, or a global mean readout and an MLP head per graph.",
        fits=_fits,
        input_note="graphs: one node's class, or a whole graph's",
        recipes=RECIPES,
        options={
            "hidden": ModelOption("int", 1, 512, help="units per layer"),
            "layers": ModelOption("int", 1, 8, help="message-passing layers"),
        },
    )
)
