"""Gradient attributions for graph models: captum's Saliency, Input x Gradient and Integrated Gradients through PyG's
`CaptumExplainer`, scoring every node feature (node_mask_type 'attributes') and every edge (edge_mask_type 'object':
the gradient with respect to a weight of 1 on each edge's message).

Batched: the inputs' computation subgraphs (`_graph.copies`) go through one PyG batch per chunk, and captum explains
the sum of their target logits (`_graph.TargetSum`). The copies share no node or edge, so each one's values are
exactly those of PyG's own `Explainer` call for that node or graph alone (tests/explainers/test_graph_methods.py
checks it), at one pass (one per IG step) per chunk instead of per input."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from xaidash.explainers.methods._common import quiet_hook_notices
from xaidash.explainers.methods._graph import (
    Copies,
    TargetSum,
    as_it_was,
    explained_in_copies,
    explainer,
)
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.zoo.graph_common import release_masks


def captum_masks(ctx: MethodContext, made: Copies, method: str, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(node feature values (n, F), edge values (E,)) over a batch of copies from PyG's CaptumExplainer."""
    from torch_geometric.explain.algorithm import CaptumExplainer

    release_masks(ctx.model)
    module = TargetSum(ctx.model, made.rows, made.task, made.targets)
    pyg = explainer(module, CaptumExplainer(method, **kwargs), "graph", node_mask="attributes", edge_mask="object")
    target = torch.zeros(1, dtype=torch.long, device=made.x.device)  # TargetSum's one output
    with quiet_hook_notices(), warnings.catch_warnings():
        # captum's notice that it set requires_grad on the features itself, as it should
        warnings.filterwarnings("ignore", message=r"Input Tensor \d+ did not already require gradients")
        out = pyg(made.x, made.edge_index, target=target, batch=made.batch)
    return out.node_mask, out.edge_mask


def captum_compute(method: str, what: str, **fixed: Any) -> Any:
    """A compute function running `method` on every input's computation subgraph, chunk by chunk."""

    def compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
        kwargs = {**fixed, **({"n_steps": int(params["steps"])} if "steps" in params else {})}
        attributions, used = explained_in_copies(ctx, lambda made: captum_masks(ctx, made, method, **kwargs), what=what)
        return MethodOutput(attributions, {"batch_size": [float(used)] * len(attributions)})

    return compute


_WHAT = "node feature (in standardised units) and each edge's message (a weight of 1 on it)"

register(
    MethodSpec(
        id="saliency",
        label="Saliency",
        modalities=("graph",),
        compute=as_it_was(captum_compute("Saliency", "Saliency")),
        description=f"The absolute gradient of the target logit with respect to each {_WHAT} (captum's Saliency "
        "through PyG's CaptumExplainer).",
        signed=False,
        family="gradient",
        output="logit",
        featured=1,
    )
)

register(
    MethodSpec(
        id="inputxgrad",
        label="Input x Gradient",
        modalities=("graph",),
        compute=as_it_was(captum_compute("InputXGradient", "Input x Gradient")),
        description=f"The gradient of the target logit times the input, for each {_WHAT}: an edge's value is its "
        "gradient, its weight being 1 (captum's InputXGradient through PyG's CaptumExplainer).",
        family="gradient",
        output="logit",
    )
)

register(
    MethodSpec(
        id="ig",
        label="Integrated Gradients",
        modalities=("graph",),
        compute=as_it_was(captum_compute("IntegratedGradients", "Integrated Gradients")),
        params=(Param("steps", "int", 50, "Points on the path from the empty graph to the input.", min=2, max=1000),),
        description=f"Integrated Gradients for each {_WHAT}, along the path that scales every feature and every "
        "edge's weight together from 0 (no features, no messages) to the input (captum's IntegratedGradients "
        "through PyG's CaptumExplainer).",
        family="gradient",
        output="logit",
        featured=2,
    )
)
