"""A graph isomorphism network (Xu, Hu, Leskovec and Jegelka 2019) of PyTorch Geometric's `GINConv` layers: each
layer sums its neighbours' embeddings with (1 + eps) times its own (eps learnt) and passes the sum through a
two-layer MLP. For graph classification a global SUM readout (the paper's: a sum keeps how many nodes of each kind a
graph has, which a mean forgets) and an MLP head, as the course describes; the mean is an option."""

from __future__ import annotations

from torch import nn

from xaidash.models.training.recipes import Recipe
from xaidash.models.zoo.graph_common import HIDDEN, LAYERS, full_batch, graph_builder, register_graph_model


def _conv(cin: int, cout: int) -> nn.Module:
    from torch_geometric.nn import GINConv

    return GINConv(nn.Sequential(nn.Linear(cin, cout), nn.ReLU(), nn.Linear(cout, cout)), train_eps=True)


build = graph_builder(_conv, sum_readout=True)


# expected_acc: the test accuracy of `xaidash train --dataset D --model gin` (seed 0, one CPU thread; the network trains
# on the train split less its 10% validation share), with the seconds the run took on 2 cores at a load of about 2
# (measured on the graph sets as branch gdata generates them: seeded numpy too, stratified splits). Node sets train
# full batch (batch_size above their training nodes): one step per epoch.
#   ba_2motifs:  100% in 7 s (40 epochs of batches of 32 graphs, lr 0.001; at lr 0.003 it stayed at chance for 30
#                epochs; with a mean readout it reached 100% too, outside the engine; gcn: chance)
#   tree_cycles: 100% in 16 s (1,000 epochs)
#   tree_grid:   88.7% in 18 s (1,000 epochs; 88.3% at lr 0.003; gat's 99.6% is the default)
#   infection:   100% in 15 s (1,000 epochs)
# The graph fallback (any other graph data) is untested.
RECIPES = {
    "ba_2motifs": Recipe(
        epochs=40,
        batch_size=32,
        lr=1e-3,
        optimizer="adam",
        schedule="constant",
        weight_decay=5e-4,
        expected_acc=1.0,
        recommended=True,
    ),
    "tree_cycles": full_batch(1000, 1.0, recommended=True),
    "tree_grid": full_batch(1000, 0.887),
    "infection": full_batch(1000, 1.0, recommended=True),
    "graph": full_batch(300),
}

register_graph_model(
    "gin",
    build,
    f"Graph isomorphism network: {LAYERS} GIN layers (a sum over the neighbours, then a two-layer MLP) of {HIDDEN} "
    "units, their outputs concatenated; a linear layer per node, or a global sum readout and an MLP head per graph.",
    RECIPES,
)
