"""GraphSAGE (Hamilton, Ying and Leskovec 2017) of PyTorch Geometric's `SAGEConv` layers (mean aggregation of the
neighbours, a separate weight for the node itself): the same stack and heads as gcn (graph_common.py)."""

from __future__ import annotations

from torch import nn

from xaidash.models.zoo.graph_common import HIDDEN, LAYERS, full_batch, graph_builder, register_graph_model


def _conv(cin: int, cout: int) -> nn.Module:
    from torch_geometric.nn import SAGEConv

    return SAGEConv(cin, cout)


build = graph_builder(_conv, degree=True)


# expected_acc: the test accuracy of `xaidash train --dataset D --model sage` (seed 0, one CPU thread; the network trains
# on the train split less its 10% validation share), with the seconds the run took on 2 cores at a load of about 2
# (measured on the graph sets as branch gdata generates them: seeded numpy too, stratified splits). Node sets train
# full batch (batch_size above their training nodes): one step per epoch.
#   ba_shapes: 100% in 7 s (300 epochs; the default)
#   karate:    100% of the 7 test members in 4 s (200 epochs)
# The graph fallback (any other graph data) is untested.
RECIPES = {
    "ba_shapes": full_batch(300, 1.0, recommended=True),
    "karate": full_batch(200, 1.0),
    "graph": full_batch(300),
}

register_graph_model(
    "sage",
    build,
    f"GraphSAGE: {LAYERS} SAGE layers (mean of the neighbours beside the node's own) of {HIDDEN} units, their "
    "outputs concatenated; a linear layer per node, or a global mean readout and an MLP head per graph.",
    RECIPES,
)
