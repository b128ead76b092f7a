"""Graph occlusion and GNNExplainer over many nodes: xaidash's batched calls against a loop of one call per node.

On BA-Shapes (700 nodes, about 3,900 directed edges) and the zoo's `gcn` (seeded weights; the cost does not depend
on them), explaining `--nodes` nodes (a seeded pick of the house nodes, the ones the GNNExplainer paper explains;
`--pick all` draws from every node, whose neighbourhoods near the base graph's hubs are ten times larger) it times
- occlusion of edges: xaidash's one call (every removal of every node in PyG batches of `--batch-size` graphs, each a
  copy of the node's neighbourhood) against a loop that deletes each edge pair of the node's explained subgraph from
  the whole graph and calls the model, node by node; the values must be equal;
- GNNExplainer (`--epochs`): xaidash's one call (the masks of `--batch-size` nodes fitted together on their
  neighbourhoods) against a loop of PyG's own `Explainer` calls, one per node on the whole graph. Their random starts
  differ, so instead of equality it prints both masks' mean ROC AUC against the motif edges;
and prints seconds and the ratio loop / xaidash, one line per method:

    GNNExplainer (gcn, 200 nodes, cpu): xaidash 12.1 s, PyG loop 80.3 s, ratio 6.6x

Each side runs once after a warm-up on a few nodes (CUDA synchronised). `--loop-nodes` times the loops on the first
k nodes only and scales them to all (said in the line), for a quick run.

    python bench/graph_speed.py --device cpu --threads 1
    python bench/graph_speed.py --device auto --nodes 200 --batch-size 256
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from xaidash.models.device import device_label, pick_device


def setup(device: torch.device, count: int, pick: str) -> tuple[Any, list[Any], torch.Tensor]:
    """(gcn bundle on BA-Shapes, `count` seeded inputs, their predicted classes)."""
    import xaidash.data.sets
    import xaidash.models.zoo  # noqa: F401
    from xaidash.data.modalities.graph import GraphInput
    from xaidash.data.registry import get_info, load_split
    from xaidash.models import ModelBundle, get_spec

    split: Any = load_split("ba_shapes", "test")
    info, graph = get_info("ba_shapes"), split.graphs[0]
    torch.manual_seed(0)
    spec = get_spec("gcn")
    bundle = ModelBundle(spec.build(info).to(device).eval(), spec, info, device)
    pool = torch.nonzero(graph.node_truth).view(-1) if pick == "houses" else torch.arange(graph.num_nodes)
    picked = pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(0))[:count]].sort().values
    raw: Any = [GraphInput(graph, int(v)) for v in picked]
    with torch.no_grad():
        targets = bundle.model(bundle.prepare(raw)).argmax(1)
    return bundle, raw, targets


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, out


def ours(bundle: Any, raw: list[Any], targets: torch.Tensor, method: str, batch: int, **params: Any) -> list[Any]:
    """xaidash's method on all inputs in one call (the compute `explain()` runs)."""
    from xaidash.explainers.registry import MethodContext, get_method

    spec = get_method(method, "graph")
    ctx = MethodContext(bundle=bundle, x=bundle.prepare(raw), targets=targets, raw=raw, batch_size=batch)
    out: Any = spec.compute(ctx, spec.resolve_for(bundle, params)).attributions
    return out


@torch.no_grad()
def occlusion_loop(bundle: Any, raw: list[Any], targets: torch.Tensor) -> list[torch.Tensor]:
    """Per node, per edge of its explained subgraph: delete the edge pair from the whole graph, call the model."""
    from xaidash.data.modalities.graph import explained_subgraph

    out = []
    for inp, target in zip(raw, targets.tolist(), strict=True):
        g = bundle.prepare([inp])
        x, ei, node = g.x, g.edge_index, int(inp.node)
        base = bundle.model.gnn(x, ei)[node, target]
        ends = ei[:, explained_subgraph(inp, bundle.info.graph.hops)[1].to(ei.device)]
        pairs, which = torch.unique(torch.sort(ends, dim=0).values, dim=1, return_inverse=True)
        drops = []
        for u, v in pairs.t().tolist():  # each undirected edge once, both directions deleted
            pair = ((ei[0] == u) & (ei[1] == v)) | ((ei[0] == v) & (ei[1] == u))
            drops.append(base - bundle.model.gnn(x, ei[:, ~pair])[node, target])
        out.append(torch.stack(drops)[which].cpu())
    return out


def gnnexplainer_loop(bundle: Any, raw: list[Any], targets: torch.Tensor, epochs: int) -> list[torch.Tensor]:
    """PyG's own Explainer, one call per node on the whole graph; the edge mask over the explained subgraph."""
    from torch_geometric.explain.algorithm import GNNExplainer

    from xaidash.data.modalities.graph import explained_subgraph
    from xaidash.explainers.methods._graph import explainer, pyg_view

    pyg = explainer(
        pyg_view(bundle.model), GNNExplainer(epochs=epochs), "node", node_mask="attributes", edge_mask="object"
    )
    out = []
    for inp, target in zip(raw, targets.tolist(), strict=True):
        g = bundle.prepare([inp])
        mask = pyg(
            g.x, g.edge_index, target=torch.full((g.num_nodes,), target, device=g.x.device), index=int(inp.node)
        ).edge_mask
        out.append(mask[explained_subgraph(inp, bundle.info.graph.hops)[1].to(mask.device)].detach().cpu())
    return out


def motif_auc(raw: list[Any], masks: list[torch.Tensor], hops: int) -> float:
    """Mean ROC AUC of the edge masks against the motif edges, over the nodes whose subgraph has both kinds."""
    from sklearn.metrics import roc_auc_score

    from xaidash.data.modalities.graph import explained_subgraph

    aucs = []
    for inp, mask in zip(raw, masks, strict=True):
        truth = inp.graph.edge_truth[explained_subgraph(inp, hops)[1]].numpy()
        if 0 < truth.sum() < len(truth):
            aucs.append(roc_auc_score(truth, mask.numpy()))
    return float(np.mean(aucs)) if aucs else float("nan")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=200, help="nodes explained in one call")
    p.add_argument("--pick", default="houses", choices=("houses", "all"), help="which nodes the seeded pick draws")
    p.add_argument("--methods", default="occlusion,gnnexplainer")
    p.add_argument("--epochs", type=int, default=100, help="GNNExplainer's epochs (PyG's default)")
    p.add_argument("--batch-size", type=int, default=256, help="graphs per pass (at most 64 on a CPU)")
    p.add_argument("--loop-nodes", type=int, default=0, help="time the loops on this many nodes and scale (0: all)")
    p.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    bundle, raw, targets = setup(device, args.nodes, args.pick)
    hops, k = bundle.info.graph.hops, args.loop_nodes or len(raw)
    print(f"{device_label(device)} | torch {torch.__version__} | gcn on ba_shapes, {len(raw)} {args.pick} nodes")
    ratios: dict[str, float] = {}
    for method in args.methods.split(","):
        if method == "occlusion":
            run = lambda: ours(bundle, raw, targets, "occlusion", args.batch_size, remove="edges")  # noqa: E731
            loop = lambda: occlusion_loop(bundle, raw[:k], targets[:k])  # noqa: E731
            label = "Occlusion of edges"
        else:
            run = lambda: ours(bundle, raw, targets, "gnnexplainer", args.batch_size, epochs=args.epochs)  # noqa: E731
            loop = lambda: gnnexplainer_loop(bundle, raw[:k], targets[:k], args.epochs)  # noqa: E731
            label = f"GNNExplainer ({args.epochs} epochs)"
        ours(bundle, raw[:2], targets[:2], method, args.batch_size, **({"epochs": 2} if method != "occlusion" else {}))
        mine_s, mine = timed(run, device)
        loop_s, theirs = timed(loop, device)
        loop_all = loop_s * len(raw) / k
        ratios[method] = loop_all / mine_s
        scaled = f" (timed on {k} nodes, scaled)" if k < len(raw) else ""
        if method == "occlusion":
            diff = max(float((a.edges - b).abs().max()) for a, b in zip(mine, theirs, strict=False))
            check = f"equal (max diff {diff:.1e})" if diff < 1e-3 else f"NOT EQUAL (max diff {diff:.1e})"
        else:
            mine_auc = motif_auc(raw, [a.edges for a in mine], hops)
            check = f"motif AUC xaidash {mine_auc:.3f}, PyG loop {motif_auc(raw[:k], theirs, hops):.3f}"
        print(
            f"{label} (gcn, {len(raw)} nodes, {device.type}): xaidash {mine_s:.2f} s, loop of PyG/model calls "
            f"{loop_all:.2f} s{scaled}, ratio {ratios[method]:.1f}x, {check}"
        )
    return ratios


if __name__ == "__main__":
    main()
