"""Deletion and insertion curves over a graph's edges (registers nothing): the explained subgraph's edges are ranked by
their value in the map, highest first, and removed from the graph `steps` chunks at a time (deletion), or put back one
chunk at a time into the graph without them (insertion); the target's probability is read after every chunk. Nodes
and their features stay: only the messages along the removed edges stop. Every point of every input is one copy of
its graph, and the copies go through the model in PyG mini-batches (`chunk` copies per forward pass) on its device.

Written by hand: PyG's `fidelity_curve_auc` integrates fidelity over given thresholds, not the target's probability
as edges go; there is no batched deletion curve in torch_geometric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch

from xaidash.data.modalities.graph import GraphInput, explained_subgraph
from xaidash.explainers.guard import evaluating
from xaidash.explainers.map_arrays import target_tensor, word_maps
from xaidash.explainers.params import ExplainError
from xaidash.explainers.perturbation_curves import CurveResult, Mode
from xaidash.models.bundle import ModelBundle

SUBSTRATE = "edges removed"
COPIES_PER_PASS = 64  # graph copies per forward pass (a BA-Shapes copy: 700 nodes, 4,000 edges)


def hops_of(bundle: ModelBundle) -> int:
    return bundle.info.graph.hops if bundle.info.graph is not None else 3


def edge_parts(bundle: ModelBundle, raws: Sequence[GraphInput], maps: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each map's edge values (its last e values, e the explained subgraph's edges)."""
    out = []
    for inp, m in zip(raws, maps, strict=True):
        nodes, edges = explained_subgraph(inp, hops_of(bundle))
        if m.size != len(nodes) + len(edges):
            raise ExplainError(
                f"A graph map has {m.size} values; the explained subgraph has {len(nodes) + len(edges)}."
            )
        out.append(m[len(nodes) :])
    return out


def prepared(bundle: ModelBundle, inputs: Sequence[GraphInput]) -> Any:
    """Graph inputs as the model reads them: a PyG `Batch` (`GraphModality.prepare`)."""
    return bundle.prepare(cast(Any, list(inputs)))


def with_edges(inp: GraphInput, keep: torch.Tensor) -> GraphInput:
    """A copy of `inp` whose graph keeps only the edges `keep` (bool over its edges)."""
    from torch_geometric.data import Data

    g = inp.graph
    return GraphInput(Data(x=g.x, edge_index=torch.as_tensor(g.edge_index)[:, keep]), inp.node)


def probabilities(bundle: ModelBundle, copies: Sequence[GraphInput], targets: torch.Tensor, chunk: int) -> torch.Tensor:
    """The probability of `targets[i]` for each graph copy (an input with some edges removed), `chunk` per pass."""
    out = torch.empty(len(copies), device=bundle.device)
    with evaluating(bundle.model), torch.no_grad():
        for s in range(0, len(copies), chunk):
            x = prepared(bundle, copies[s : s + chunk])
            p = bundle.scores(bundle.model(x).float())
            out[s : s + chunk] = p.gather(1, targets[s : s + chunk].unsqueeze(1))[:, 0]
    return out


def graph_perturbation_curve(
    bundle: ModelBundle,
    raws: Sequence[GraphInput],
    attributions: Any,
    targets: Any = None,
    *,
    mode: Mode = "deletion",
    steps: int = 16,
    batch_size: int = 256,
) -> CurveResult:
    """Curves (N, steps + 1) of the target's probability over the share of the subgraph's edges removed (deletion)
    or put back (insertion), and their AUCs; targets default to the explanation's, else the predicted classes."""
    if mode not in ("deletion", "insertion"):
        raise ExplainError(f"mode must be 'deletion' or 'insertion', got {mode!r}.")
    if targets is None and hasattr(attributions, "targets"):
        targets = attributions.targets
    maps = word_maps(attributions)
    if len(maps) != len(raws):
        raise ExplainError(f"Got {len(maps)} maps for {len(raws)} graphs.")
    steps = int(max(1, steps))
    fractions = np.linspace(0.0, 1.0, steps + 1)
    n = len(raws)
    t = target_tensor(targets, n, bundle.device)
    if t is None:
        t = bundle.predicted(prepared(bundle, raws), batch_size)
    copies: list[GraphInput] = []
    for inp, values in zip(raws, edge_parts(bundle, raws, maps), strict=True):
        _, sub = explained_subgraph(inp, hops_of(bundle))
        order = sub[torch.from_numpy(np.argsort(-values, kind="stable"))]  # highest value first
        for f in fractions:
            moved = order[: round(f * len(order))]
            keep = torch.ones(inp.edges, dtype=torch.bool)
            if mode == "deletion":
                keep[moved] = False
            else:  # the graph without the subgraph's edges, the first ones put back
                keep[sub] = False
                keep[moved] = True
            copies.append(with_edges(inp, keep))
    chunk = max(1, min(int(batch_size), COPIES_PER_PASS))
    probs = probabilities(bundle, copies, t.repeat_interleave(steps + 1), chunk)
    curves = probs.view(n, steps + 1).cpu().numpy()
    aucs = np.trapezoid(curves, fractions, axis=1).astype(np.float32)
    return CurveResult(mode, fractions, curves, aucs, t.cpu().numpy(), SUBSTRATE)
