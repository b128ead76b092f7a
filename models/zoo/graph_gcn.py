"""A graph convolutional network (Kipf and Welling 2017) of PyTorch Geometric's `GCNConv` layers: for node
classification the GNNExplainer paper's model (three layers of 20 units, their outputs concatenated before a linear
layer), for graph classification the same layers, a global mean readout and an MLP head (graph_common.py)."""

from __future__ import annotations

from typing import Any

from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.training.recipes import Recipe
from xaidash.models.zoo.graph_common import HIDDEN, LAYERS, GraphNet, register_graph_model, task_of


def _conv(cin: int, cout: int) -> nn.Module:
    from torch_geometric.nn import GCNConv

    return GCNConv(cin, cout)


def build(
    info: DatasetInfo,
    hidden: int = HIDDEN,
    layers: int = LAYERS,
    dropout: float = 0.0,
    concat: bool = True,
    sum_readout: bool = False,
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


# Full-batch training on a node set (batch_size above its training nodes). Measured later; untested settings.
RECIPES = {
    "graph": Recipe(epochs=300, batch_size=4096, lr=1e-2, optimizer="adam", schedule="constant", weight_decay=5e-4),
}

register_graph_model(
    "gcn",
    build,
    f"Graph convolutional network: {LAYERS} GCN layers of {HIDDEN} units, their outputs concatenated; a linear "
    "layer per node, or a global mean readout and an MLP head per graph.",
    RECIPES,
)
