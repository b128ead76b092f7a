"""A graph isomorphism network (Xu, Hu, Leskovec and Jegelka 2019) of PyTorch Geometric's `GINConv` layers: each
layer sums its neighbours' embeddings with (1 + eps) times its own (eps learnt) and passes the sum through a
two-layer MLP. For graph classification a global SUM readout (the paper's: a sum keeps how many nodes of each kind a
graph has, which a mean forgets) and an MLP head, as the course describes; the mean is an option."""

from __future__ import annotations

from typing import Any

from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.training.recipes import Recipe
from xaidash.models.zoo.graph_common import HIDDEN, LAYERS, GraphNet, register_graph_model, task_of


def _conv(cin: int, cout: int) -> nn.Module:
    from torch_geometric.nn import GINConv

    return GINConv(nn.Sequential(nn.Linear(cin, cout), nn.ReLU(), nn.Linear(cout, cout)), train_eps=True)


def build(
    info: DatasetInfo,
    hidden: int = HIDDEN,
    layers: int = LAYERS,
    dropout: float = 0.0,
    concat: bool = True,
    sum_readout: bool = True,
    degree: bool = False,
    **_: Any,
) -> GraphNet:
    return GraphNet(
        _conv,
        info.input_shape[0],
        info.num_classes,
        task_of(info),
        int(hidden),
        int(layers),
        dropout=float(dropout),
        concat=bool(concat),
        sum_readout=bool(sum_readout),
        degree=bool(degree),
    )


RECIPES = {
    "graph": Recipe(epochs=300, batch_size=4096, lr=1e-2, optimizer="adam", schedule="constant", weight_decay=5e-4),
}

register_graph_model(
    "gin",
    build,
    f"Graph isomorphism network: {LAYERS} GIN layers (a sum over the neighbours, then a two-layer MLP) of {HIDDEN} "
    "units, their outputs concatenated; a linear layer per node, or a global sum readout and an MLP head per graph.",
    RECIPES,
)
