"""Attention of graph attention layers (GAT) as an edge explanation, through PyG's `AttentionExplainer`: each edge's
attention coefficient, reduced over heads and layers (the maximum by default, PyG's; or the mean). It explains no
class: the same weights whatever the target. For a node, PyG keeps the edges its layers can reach (0 elsewhere)."""

from __future__ import annotations

import inspect
from typing import Any, cast

import torch

from xaidash.data.modalities.graph import centre_of, explained_subgraph
from xaidash.explainers.methods._graph import (
    GraphAttribution,
    as_it_was,
    edge_offsets,
    explainer,
    hops_of,
    pyg_view,
    task_of,
)
from xaidash.explainers.params import Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register
from xaidash.models.bundle import ModelBundle

REDUCTIONS = ("max", "mean")


def attention_layers(model: torch.nn.Module) -> int:
    """The model's message-passing layers that compute attention coefficients: those whose messages take `alpha`
    or that keep `_alpha` (what PyG's AttentionExplainer reads)."""
    from torch_geometric.nn import MessagePassing

    return sum(
        isinstance(m, MessagePassing) and ("alpha" in inspect.signature(m.message).parameters or hasattr(m, "_alpha"))
        for m in model.modules()
    )


def _applies(bundle: ModelBundle) -> str | None:
    if attention_layers(bundle.model):
        return None
    return "it has no attention layers (graph attention such as GAT's): there are no attention weights to show"


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    from torch_geometric.explain.algorithm import AttentionExplainer

    task, batch = task_of(ctx.bundle), cast(Any, ctx.x)  # a PyG Batch
    pyg = explainer(
        pyg_view(ctx.model),
        AttentionExplainer(reduce=str(params["reduce"])),
        task,
        node_mask=None,
        edge_mask="object",
        explanation_type="model",
    )
    offsets, centre = edge_offsets(batch), centre_of(batch)
    out: list[GraphAttribution] = []
    with torch.no_grad():
        for i, raw in enumerate(ctx.raw):
            owner = int(batch.owner[i])
            _, edge_ids = explained_subgraph(raw, hops_of(ctx.bundle))
            if centre is not None:  # the node's call on the batch's graphs (PyG masks the edges it cannot reach)
                mask = pyg(batch.x, batch.edge_index, index=int(centre[i])).edge_mask
                values = mask[edge_ids.to(mask.device) + offsets[owner]]
            else:
                graph = batch.get_example(owner)
                values = pyg(graph.x, graph.edge_index).edge_mask[edge_ids.to(graph.x.device)]
            out.append(GraphAttribution(None, values.float().cpu()))
    return MethodOutput(out, {"attention_layers": [float(attention_layers(ctx.model))] * len(out)})


register(
    MethodSpec(
        id="attention",
        label="Attention",
        modalities=("graph",),
        compute=as_it_was(_compute),
        params=(
            Param(
                "reduce",
                "choice",
                "max",
                "How the attention coefficients of an edge's heads and layers become one value.",
                choices=REDUCTIONS,
            ),
        ),
        applies=_applies,
        description="The attention coefficient of each edge in the model's graph attention layers, reduced over "
        "heads and layers (PyG's AttentionExplainer). Weights in [0, 1], the same for every target class.",
        signed=False,
        family="attention",
        output="attention",
    )
)
