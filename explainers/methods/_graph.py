"""What the graph methods share (registers no method): the form of their output, one `GraphAttribution` per input.

A graph method explains an input over the part of its graph that `explained_subgraph` names (a node's `hops`-hop
neighbourhood, or a whole graph): values per node feature and per edge, indexed in that function's order, so the
adapter (explainers/modalities/graph.py) can turn them into one map per input and draw them on a fixed layout."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from xaidash.data.modalities.graph import centre_of, explained_subgraph
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.params import ExplainError
from xaidash.explainers.registry import MethodContext, MethodOutput
from xaidash.models.bundle import ModelBundle


@dataclass(frozen=True)
class GraphAttribution:
    """One input's explanation over its explained subgraph (n nodes, e edges, in `explained_subgraph`'s order):
    `node_features` (n, F), a value per node and feature (None: the method scores no features, as PGExplainer and
    attention); `edges` (e,), a value per edge (None: the method scores no edges); `nodes` (n,), a value per node
    as a whole where the method scores nodes rather than their features (occlusion's removal of a node; None
    otherwise). At least one of them is given; all are float32 on the CPU."""

    node_features: torch.Tensor | None
    edges: torch.Tensor | None
    nodes: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.node_features is None and self.edges is None and self.nodes is None:
            raise ValueError("a graph attribution scores node features, nodes, edges or a mix of them")


Compute = Callable[[MethodContext, dict[str, Any]], MethodOutput]


def as_it_was(compute: Compute) -> Compute:
    """`compute` that gives the model back with the attributes its modules had: PyG's explain machinery leaves its
    own on message-passing layers (a `propagate` it generates on first use, a cleared `_edge_mask` parameter, its
    explain flags), and a method must hand the model back as it was given (tests/explainers/test_method_contracts)."""

    @functools.wraps(compute)
    def wrapped(ctx: MethodContext, params: dict[str, Any]) -> MethodOutput:
        saved = [(m, dict(m.__dict__), dict(m._parameters)) for m in ctx.model.modules()]
        try:
            return compute(ctx, params)
        finally:
            for module, attributes, parameters in saved:
                module.__dict__.clear()
                module.__dict__.update(attributes)
                module._parameters.clear()
                module._parameters.update(parameters)

    return wrapped


# ---- What the graph methods share beyond the output form: the model in PyG's convention, explainers built for a
# bundle, and the computation subgraphs that let one PyG batch explain many inputs at once.

PYG_CONFIG = {"mode": "multiclass_classification", "return_type": "raw"}  # the models answer raw logits


def pyg_view(model: nn.Module) -> nn.Module:
    """The model in PyG's convention (models/zoo/graph_common's `PyGView`), what `torch_geometric.explain` calls, in
    the model's own mode: PyG's Explainer puts its module back in the mode it found it in, and a view left in
    training mode would leave the model there."""
    from xaidash.models.zoo.graph_common import PyGView

    view = PyGView(model)  # type: ignore[arg-type]
    view.train(model.training)
    return view


class CopyRows(nn.Module):
    """The model over a batch of computation subgraphs (`Copies`), answering one row of logits per copy: the copy's
    centre node (node task) or the copy itself (graph task). PyG's explainers called on it with task_level 'graph'
    then explain every copy at once; the copies are disjoint, so each one's gradients are its own."""

    def __init__(self, model: nn.Module, rows: torch.Tensor, task: str) -> None:
        super().__init__()
        self.gnn, self.task = pyg_view(model), task
        self.register_buffer("rows", rows)
        self.train(model.training)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None) -> torch.Tensor:
        if self.task == "node":
            return self.gnn(x, edge_index)[self.rows]
        return self.gnn(x, edge_index, batch)


class TargetSum(CopyRows):
    """`CopyRows` reduced to one number, (1, 1): the sum over the copies of each one's target logit. Captum
    attributes one output per call; the copies share no node or edge, so the gradient of this sum with respect to a
    copy's features and edges is that copy's own target logit's (Saliency, Input x Gradient and IG's path are
    exactly the per-input ones)."""

    def __init__(self, model: nn.Module, rows: torch.Tensor, task: str, targets: torch.Tensor) -> None:
        super().__init__(model, rows, task)
        self.register_buffer("targets", targets)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor | None = None) -> torch.Tensor:
        logits = super().forward(x, edge_index, batch)
        targets = cast(torch.Tensor, self.targets)
        return logits.gather(1, targets.view(-1, 1)).sum().view(1, 1)


def task_of(bundle: ModelBundle) -> str:
    """'node' or 'graph': what one input of this bundle asks (the data set's task)."""
    return bundle.info.graph.task if bundle.info.graph is not None else "graph"


def hops_of(bundle: ModelBundle) -> int:
    """How far the explained subgraph reaches around a node (the data set's `hops`)."""
    return int(bundle.info.graph.hops) if bundle.info.graph is not None else 0


def depth(model: nn.Module) -> int:
    """The model's message-passing layers (asked of its modules, as PyG's explainers do): how far a node's
    prediction can reach."""
    from torch_geometric.nn import MessagePassing

    return sum(isinstance(m, MessagePassing) for m in model.modules())


def explainer(
    module: nn.Module,
    algorithm: Any,
    task_level: str,
    *,
    node_mask: str | None,
    edge_mask: str | None,
    explanation_type: str = "phenomenon",
) -> Any:
    """PyG's `Explainer` around `module` (`pyg_view` or `CopyRows`) on raw logits: a 'phenomenon' explanation of the
    target class given (a 'model' one for what reads no target: attention)."""
    from torch_geometric.explain import Explainer

    return Explainer(
        module,
        algorithm,
        explanation_type=explanation_type,
        node_mask_type=node_mask,
        edge_mask_type=edge_mask,
        model_config={**PYG_CONFIG, "task_level": task_level},
    )


def edge_offsets(batch: Any) -> torch.Tensor:
    """(graphs,) long: where each graph's edges start in a PyG batch's `edge_index` (a batch keeps every graph's
    edges together and in their own order)."""
    counts = torch.bincount(batch.batch[batch.edge_index[0]], minlength=int(batch.num_graphs))
    return torch.cumsum(counts, 0) - counts


@dataclass
class Copies:
    """A PyG batch of computation subgraphs, one per input, on the model's device: a node's (radius)-hop
    neighbourhood (radius = the model's depth + 1, so every node whose features or degree reach the node's
    prediction is inside and the prediction equals the full graph's) or a whole graph. `rows` (B,): each copy's
    centre node (node task) or its own index (graph task); `ptr` / `edge_ptr` (B + 1,): where each copy's nodes /
    edges start (CPU); `nodes[i]` / `edges[i]`: the positions in `x` / `edge_index` of input i's explained subgraph,
    in `explained_subgraph`'s order."""

    x: torch.Tensor
    edge_index: torch.Tensor
    batch: torch.Tensor
    ptr: torch.Tensor
    edge_ptr: torch.Tensor
    rows: torch.Tensor
    targets: torch.Tensor
    nodes: list[torch.Tensor]
    edges: list[torch.Tensor]
    task: str

    def __len__(self) -> int:
        return len(self.rows)

    def logits(self, model: nn.Module) -> torch.Tensor:
        """(B, classes): each copy's prediction."""
        return CopyRows(model, self.rows, self.task)(self.x, self.edge_index, self.batch)

    def attribution(self, i: int, node_values: torch.Tensor | None, edge_values: torch.Tensor | None) -> Any:
        """Input i's `GraphAttribution` from values over the whole batch of copies (nodes (n, F), edges (E,))."""
        nodes = None if node_values is None else node_values[self.nodes[i]].detach().float().cpu()
        edges = None if edge_values is None else edge_values[self.edges[i]].detach().float().cpu()
        return GraphAttribution(nodes, edges)

    def part(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Copy i alone: its features (n_i, F), its edges (2, E_i) in its own node numbering, and its row (the
        centre's position in it; 0 for a graph task)."""
        start, stop = int(self.ptr[i]), int(self.ptr[i + 1])
        edges = self.edge_index[:, int(self.edge_ptr[i]) : int(self.edge_ptr[i + 1])] - start
        return self.x[start:stop], edges, int(self.rows[i]) - start if self.task == "node" else 0


def _positions(ids: torch.Tensor, among: torch.Tensor, what: str) -> torch.Tensor:
    """Where each of `ids` sits in the ascending `among`; every one of them must be there."""
    pos = torch.searchsorted(among, ids)
    if len(ids) and (pos.max() >= len(among) or not bool((among[pos] == ids).all())):
        raise ExplainError(f"The explained {what} of an input fall outside its computation subgraph.")
    return pos


def _copy(
    ctx: MethodContext, i: int, radius: int, offsets: torch.Tensor
) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Input i's computation subgraph as a PyG `Data` (CPU) with (its centre's position or -1, explained node
    positions, explained edge positions)."""
    from torch_geometric.data import Data
    from torch_geometric.utils import k_hop_subgraph

    batch: Any = ctx.x  # a PyG Batch
    raw = ctx.raw[i]
    owner = int(batch.owner[i])
    node_ids, edge_ids = explained_subgraph(raw, hops_of(ctx.bundle))
    start, edge_start = int(batch.ptr[owner]), int(offsets[owner])
    centre = centre_of(batch)
    edge_index = batch.edge_index.cpu()
    if centre is None:
        graph = batch.get_example(owner)
        data = Data(x=graph.x.cpu(), edge_index=graph.edge_index.cpu())
        return data, torch.tensor(-1), node_ids, edge_ids
    subset, sub_edges, mapping, edge_mask = k_hop_subgraph(
        int(centre[i]), radius, edge_index, relabel_nodes=True, num_nodes=int(batch.num_nodes)
    )
    data = Data(x=batch.x.cpu()[subset], edge_index=sub_edges)
    nodes = _positions(node_ids + start, subset, "nodes")
    edges = _positions(edge_ids + edge_start, torch.nonzero(edge_mask).view(-1), "edges")
    return data, mapping.view(()), nodes, edges


def copies(ctx: MethodContext, index: Sequence[int]) -> Copies:
    """The computation subgraphs of inputs `index` (in that order) as one PyG batch on the model's device."""
    from torch_geometric.data import Batch

    task = task_of(ctx.bundle)
    radius = max(depth(ctx.model), hops_of(ctx.bundle)) + 1
    offsets = edge_offsets(ctx.x).cpu()
    made = [_copy(ctx, int(i), radius, offsets) for i in index]
    joined = Batch.from_data_list([m[0] for m in made])
    counts = torch.tensor([0] + [m[0].edge_index.shape[1] for m in made], dtype=torch.long)
    edge_ptr, ptr = torch.cumsum(counts, 0), joined.ptr.cpu()
    device = ctx.targets.device
    rows = ptr[:-1] + torch.stack([m[1] for m in made]) if task == "node" else torch.arange(len(made))
    return Copies(
        x=joined.x.to(device),
        edge_index=joined.edge_index.to(device),
        batch=joined.batch.to(device),
        ptr=ptr,
        edge_ptr=edge_ptr,
        rows=rows.to(device),
        targets=ctx.targets[torch.as_tensor(list(index), dtype=torch.long, device=ctx.targets.device)],
        nodes=[(m[2] + p).to(device) for m, p in zip(made, ptr[:-1], strict=True)],
        edges=[(m[3] + p).to(device) for m, p in zip(made, edge_ptr[:-1], strict=True)],
        task=task,
    )


@torch.no_grad()
def check_copies(ctx: MethodContext, made: Copies, index: Sequence[int], full: torch.Tensor) -> None:
    """Refuse when a copy's prediction differs from the prediction on the full graph (`full`: (N, classes) logits of
    every input): a model whose node predictions reach beyond its message-passing layers (a global readout or
    virtual node) cannot be explained on neighbourhoods."""
    mine = made.logits(ctx.model).float()
    theirs = full[torch.as_tensor(list(index), dtype=torch.long, device=full.device)]
    scale = max(1.0, float(theirs.abs().max())) if theirs.numel() else 1.0
    if mine.shape != theirs.shape or not torch.allclose(mine, theirs, rtol=1e-4, atol=1e-4 * scale):
        raise ExplainError(
            "This model's prediction for a node changes when the graph is cut to the node's neighbourhood within "
            f"its {depth(ctx.model)} message-passing layers, so it cannot be explained node by node here."
        )


def input_chunks(ctx: MethodContext, size: int | None = None) -> list[list[int]]:
    """The inputs in consecutive groups of at most `size` (default: the call's batch size) copies."""
    n = ctx.targets.shape[0]
    step = max(1, int(size or ctx.batch_size))
    return [list(range(i, min(i + step, n))) for i in range(0, n, step)]


Masks = Callable[["Copies"], tuple[torch.Tensor | None, torch.Tensor | None]]


def explained_in_copies(ctx: MethodContext, masks: Masks, what: str) -> tuple[list[GraphAttribution], int]:
    """Every input explained on a copy of its computation subgraph, `ctx.batch_size` rows a chunk (halved when memory
    runs out): `masks(made)` gives (node-feature values, edge values) over a chunk's copies; each chunk's copies are
    first checked to predict as the whole graph does. (attributions, rows per pass used)."""
    with torch.no_grad():
        full = ctx.model(ctx.x).float()

    def run(size: int) -> list[GraphAttribution]:
        out: list[GraphAttribution] = []
        for index in input_chunks(ctx, size):
            made = copies(ctx, index)
            check_copies(ctx, made, index, full)
            nodes, edges = masks(made)
            out.extend(made.attribution(i, nodes, edges) for i in range(len(index)))
        return out

    return run_halving(run, rows_per_pass(ctx.batch_size, ctx.targets.device), what=what)
