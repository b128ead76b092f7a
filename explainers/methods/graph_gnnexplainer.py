"""GNNExplainer (Ying et al. 2019) through PyG's `GNNExplainer`: a soft mask over the edges and one over the node
features, learnt by gradient descent to keep the target class while staying small and near 0 or 1 (its size and
entropy penalties). Values in [0, 1]; 0 for what cannot reach the prediction.

PyG's algorithm explains one node or graph per call. To explain many at once it runs here on a PyG batch of their
computation subgraphs (`_graph.copies`) with two of its steps adapted (`CopiesGNNExplainer`): the masks start from
the draws PyG makes for each copy alone (from the call's seed, so an input's mask does not depend on what else is
explained), and the loss is the sum of each copy's own loss (its cross-entropy and its size and entropy penalties
over its own edges and features). The copies share nothing and Adam updates every mask entry by its own gradient, so
each copy's masks are those of PyG's own call on that node's neighbourhood with the same seed (tests check it)."""

from __future__ import annotations

import math
from typing import Any

import torch

from xaidash.explainers.methods._graph import (
    Copies,
    CopyRows,
    as_it_was,
    explained_in_copies,
    explainer,
)
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.zoo.graph_common import release_masks


def copies_gnnexplainer(made: Copies, seed: int, **kwargs: Any) -> Any:
    """PyG's GNNExplainer for a batch of copies, each copy's masks drawn and penalised as on its own."""
    from torch_geometric.explain.algorithm import GNNExplainer

    class CopiesGNNExplainer(GNNExplainer):
        def _initialize_homogeneous_masks(
            self, node_mask_type: Any, edge_mask_type: Any, N: int, F: int, E: int, device: Any
        ) -> None:
            # PyG's draws for one graph of n nodes (features first, then edges), once per copy from `seed`.
            nodes, edges = [], []
            for i in range(len(made)):
                n = int(made.ptr[i + 1] - made.ptr[i])
                e = int(made.edge_ptr[i + 1] - made.edge_ptr[i])
                gen = torch.Generator().manual_seed(int(seed))
                nodes.append(torch.randn(n, F, generator=gen) * 0.1)
                std = torch.nn.init.calculate_gain("relu") * math.sqrt(2.0 / (2 * n))
                edges.append(torch.randn(e, generator=gen) * std)
            self.node_mask = torch.nn.Parameter(torch.cat(nodes).to(device))
            self.edge_mask = torch.nn.Parameter(torch.cat(edges).to(device))

        def _loss(self, y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            loss = torch.nn.functional.cross_entropy(y_hat, y, reduction="sum")  # each copy's loss on its one row
            c = self.coeffs
            if self.hard_edge_mask is not None:
                loss = loss + _penalty(
                    self.edge_mask,
                    self.hard_edge_mask,
                    edge_copy,
                    c["edge_size"],
                    c["edge_reduction"],
                    c["edge_ent"],
                    c["EPS"],
                )
            if self.hard_node_mask is not None:
                loss = loss + _penalty(
                    self.node_mask,
                    self.hard_node_mask,
                    made.batch,
                    c["node_feat_size"],
                    c["node_feat_reduction"],
                    c["node_feat_ent"],
                    c["EPS"],
                )
            return loss

    edge_copy = made.batch[made.edge_index[0]]
    return CopiesGNNExplainer(**kwargs)


def _penalty(
    mask: torch.Tensor, hard: torch.Tensor, copy_of: torch.Tensor, size: float, reduction: str, ent: float, eps: float
) -> torch.Tensor:
    """The sum over the copies of PyG's size and entropy penalties, each over its own copy's entries of the mask
    (PyG: size x reduce(m), ent x mean(entropy(m)) over the entries that had a gradient)."""
    owner = copy_of.view(-1, *([1] * (mask.dim() - 1))).expand_as(mask)[hard]
    m = mask[hard].sigmoid()
    count = torch.bincount(owner, minlength=int(copy_of.max()) + 1).clamp(min=1).to(m.dtype)
    share = 1.0 / count[owner]  # each entry's weight in its copy's mean
    entropy = -m * torch.log(m + eps) - (1 - m) * torch.log(1 - m + eps)
    sizes = m.sum() if reduction == "sum" else (m * share).sum()
    return size * sizes + ent * (entropy * share).sum()


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    epochs, lr = int(params["epochs"]), float(params["lr"])

    def masks(made: Copies) -> tuple[torch.Tensor, torch.Tensor]:
        algorithm = copies_gnnexplainer(made, ctx.seed, epochs=epochs, lr=lr)
        module = CopyRows(ctx.model, made.rows, made.task)
        pyg = explainer(module, algorithm, "graph", node_mask="attributes", edge_mask="object")
        try:
            found = pyg(made.x, made.edge_index, target=made.targets, batch=made.batch)
        finally:
            release_masks(ctx.model)
        return found.node_mask, found.edge_mask

    attributions, used = explained_in_copies(ctx, masks, what="GNNExplainer")
    n = len(attributions)
    return MethodOutput(attributions, {"batch_size": [float(used)] * n, "epochs": [float(epochs)] * n})


register(
    MethodSpec(
        id="gnnexplainer",
        label="GNNExplainer",
        modalities=("graph",),
        compute=as_it_was(_compute),
        params=(
            Param("epochs", "int", 100, "Gradient steps that fit the masks (PyG's default: 100).", min=1, max=5000),
            Param("lr", "float", 0.01, "Learning rate of the masks' Adam optimiser.", min=1e-5, max=1.0),
        ),
        description="Learns a soft mask over the edges and one over the node features that keep the target class "
        "with as little of the graph as it can (PyG's GNNExplainer, fitted for many inputs at once on their "
        "neighbourhoods). Values in [0, 1].",
        signed=False,
        family="mask",
        output="logit",
        featured=3,
    )
)
