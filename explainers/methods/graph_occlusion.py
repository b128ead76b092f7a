"""Occlusion for graph models: remove one edge (both directions of an undirected edge together) or one node, and
record the drop of the target logit. Removing a node deletes it with its edges; in a node task the node asked about
cannot go (its prediction is what is explained), so there it is cut off from its neighbours instead, which for any
other node has the same effect on the prediction as deleting it.

PyG has no occlusion explainer, so this is written here. Batched: each input's computation subgraph (its node's
neighbourhood one hop beyond the model's layers, where its prediction equals the full graph's, or its whole graph)
is copied once per removal, and every perturbed copy of every input goes through the model in PyG batches of
`batch_size` graphs on the model's device, built with tensor operations (no Python loop over removals)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.methods._graph import Copies, GraphAttribution, as_it_was, copies, input_chunks, pyg_view
from xaidash.explainers.params import ExplainError, Param
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec, register

REMOVALS = ("both", "edges", "nodes")


@dataclass
class _Plan:
    """One copy's removals: perturbation 0 removes nothing, 1..G remove edge group g - 1 (an unordered pair of
    nodes: both directions), then one explained node each. `group` (E,): each copy edge's group or -1."""

    x: torch.Tensor
    edge_index: torch.Tensor
    row: int
    target: int
    group: torch.Tensor
    inverse: torch.Tensor  # each explained edge's group
    nodes: torch.Tensor  # explained nodes removed one at a time (positions in the copy); empty: edges only
    groups: int

    @property
    def count(self) -> int:
        return 1 + self.groups + len(self.nodes)


def _plan(made: Copies, i: int, remove: str) -> _Plan:
    x, edges, row = made.part(i)
    n = x.shape[0]
    explained = made.edges[i] - int(made.edge_ptr[i])
    key = torch.minimum(edges[0], edges[1]) * n + torch.maximum(edges[0], edges[1])
    if remove == "nodes":
        uniq, inverse = key[:0], key[:0]
    else:
        uniq, inverse = torch.unique(key[explained], return_inverse=True)
    if len(uniq):
        pos = torch.searchsorted(uniq, key).clamp(max=len(uniq) - 1)
        group = torch.where(uniq[pos] == key, pos, -1)
    else:
        group = torch.full_like(key, -1)
    nodes = made.nodes[i][:0] if remove == "edges" else made.nodes[i] - int(made.ptr[i])
    return _Plan(x, edges, row, int(made.targets[i]), group, inverse, nodes, len(uniq))


def _perturbed(plan: _Plan, ks: torch.Tensor, task: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
    """Perturbations `ks` of one copy as one disjoint batch: (x, edge_index, graph of each node, rows: each
    perturbed copy's centre node, or None for a graph task)."""
    n, k = plan.x.shape[0], len(ks)
    src, dst = plan.edge_index
    g = torch.where((ks >= 1) & (ks <= plan.groups), ks - 1, -2)
    keep_edge = plan.group[None, :] != g[:, None]
    is_node = ks > plan.groups
    which = (ks - plan.groups - 1).clamp(min=0, max=max(len(plan.nodes) - 1, 0))
    v = torch.where(is_node, plan.nodes[which] if len(plan.nodes) else -1, -1)
    keep_edge &= (src[None, :] != v[:, None]) & (dst[None, :] != v[:, None])
    local = torch.arange(n, device=ks.device)
    keep_node = torch.ones(k, n, dtype=torch.bool, device=ks.device) if task == "node" else local[None, :] != v[:, None]
    flat_keep = keep_node.flatten()
    new_id = torch.cumsum(flat_keep, 0) - 1
    shift = (torch.arange(k, device=ks.device) * n)[:, None]
    ends = torch.stack([(src[None, :] + shift)[keep_edge], (dst[None, :] + shift)[keep_edge]])
    graph = torch.arange(k, device=ks.device).repeat_interleave(n)[flat_keep]
    rows = new_id[shift[:, 0] + plan.row] if task == "node" else None
    return plan.x.repeat(k, 1)[flat_keep], new_id[ends], graph, rows


def _scores(ctx: MethodContext, plans: list[_Plan], task: str, size: int) -> torch.Tensor:
    """The target logit of every perturbation of every plan, in order, `size` perturbed graphs per pass."""
    gnn = pyg_view(ctx.model)
    starts = torch.cumsum(torch.tensor([0] + [p.count for p in plans]), 0).tolist()
    device = ctx.targets.device
    out = []
    for a in range(0, starts[-1], size):
        b = min(a + size, starts[-1])
        xs: list[torch.Tensor] = []
        es: list[torch.Tensor] = []
        gs: list[torch.Tensor] = []
        rows: list[torch.Tensor] = []
        targets: list[torch.Tensor] = []
        nodes, graphs = 0, 0
        for j, plan in enumerate(plans):
            lo, hi = max(a, starts[j]), min(b, starts[j + 1])
            if lo >= hi:
                continue
            x, e, g, r = _perturbed(plan, torch.arange(lo - starts[j], hi - starts[j], device=device), task)
            xs.append(x)
            es.append(e + nodes)
            gs.append(g + graphs)
            rows.append(r + nodes if r is not None else torch.arange(graphs, graphs + hi - lo, device=device))
            targets.append(torch.full((hi - lo,), plan.target, device=device))
            nodes, graphs = nodes + len(x), graphs + hi - lo
        batch = torch.cat(gs)
        logits = gnn(torch.cat(xs), torch.cat(es, 1), None if task == "node" else batch)
        out.append(logits[torch.cat(rows)].gather(1, torch.cat(targets).view(-1, 1))[:, 0].float())
    return torch.cat(out)


def _compute(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
    remove = str(params["remove"])
    with torch.no_grad():
        full = ctx.model(ctx.x).float().gather(1, ctx.targets.view(-1, 1))[:, 0]

    @torch.no_grad()
    def run(size: int) -> list[GraphAttribution]:
        out: list[GraphAttribution] = []
        for index in input_chunks(ctx, max(size, 1)):
            made = copies(ctx, index)
            plans = [_plan(made, i, remove) for i in range(len(index))]
            scores = _scores(ctx, plans, made.task, size)
            start = 0
            for i, plan in zip(index, plans, strict=True):
                base, drops = scores[start], scores[start] - scores[start + 1 : start + plan.count]
                start += plan.count
                _same_prediction(float(base), float(full[i]))
                edges = None if remove == "nodes" else drops[: plan.groups][plan.inverse].cpu()
                nodes = None if remove == "edges" else drops[plan.groups :].cpu()
                out.append(GraphAttribution(None, edges, nodes))
        return out

    attributions, used = run_halving(run, rows_per_pass(ctx.batch_size, ctx.targets.device), what="Occlusion")
    return MethodOutput(attributions, {"batch_size": [float(used)] * len(attributions)})


def _same_prediction(mine: float, full: float) -> None:
    if abs(mine - full) > 1e-4 * max(1.0, abs(full)):
        raise ExplainError(
            "This model's prediction changes when the graph is cut to the neighbourhood its message-passing layers "
            f"read ({mine:.5g} there, {full:.5g} on the whole graph), so it cannot be occluded input by input here."
        )


register(
    MethodSpec(
        id="occlusion",
        label="Occlusion",
        modalities=("graph",),
        compute=as_it_was(_compute),
        params=(
            Param(
                "remove",
                "choice",
                "both",
                "edges: remove one edge at a time (both directions of an undirected edge together); nodes: one node "
                "at a time (with its edges); both: each edge, then each node.",
                choices=REMOVALS,
            ),
        ),
        description="Removes one edge (both directions together) or one node at a time and records the drop of "
        "the target logit: positive where removing it lowers the prediction. Every removal of every input is "
        "scored in shared PyG batches on the model's device.",
        signed=True,
        family="perturbation",
        output="logit",
        featured=4,
    )
)
