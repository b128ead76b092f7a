"""GraphSAGE (Hamilton, Ying and Leskovec 2017) of PyTorch Geometric's `SAGEConv` layers (mean aggregation of the
neighbours, a separate weight for the node itself): the same stack and heads as gcn (graph_common.py)."""

from __future__ import annotations

from typing import Any

from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.training.recipes import Recipe
from xaidash.models.zoo.graph_common import HIDDEN, LAYERS, GraphNet, register_graph_model, task_of


def _conv(cin: int, cout: int) -> nn.Module:
    from torch_geometric.nn import SAGEConv

    return SAGEConv(cin, cout)


def build(
    info: DatasetInfo,
    hidden: int = HIDDEN,
    layers: int = LAYERS,
    dropout: float = 0.0,
    concat: bool = True,
    sum_readout: bool = False,
    degree: bool = True,
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
    "sage",
    build,
    f"GraphSAGE: {LAYERS} SAGE layers (mean of the neighbours beside the node's own) of {HIDDEN} units, their "
    "outputs concatenated; a linear layer per node, or a global mean readout and an MLP head per graph.",
    RECIPES,
)
