"""A `gcn` trained on BA-Shapes in a few seconds (one thread, full batch, seeded) and stand-in graph methods whose
maps are known: the ground-truth motif itself ('truth_map': 1 on motif edges and motif nodes' features, 0
elsewhere), the motif turned upside down ('anti_truth'), and an edge-only map ('truth_edges'), for the adapter's and
the metrics' tests before the real methods run through them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import torch

from xaidash.data.modalities.graph import GRAPH, GraphInput, explained_subgraph
from xaidash.data.registry import get_info, load_split
from xaidash.explainers import registry
from xaidash.explainers.methods._graph import GraphAttribution
from xaidash.explainers.registry import MethodContext, MethodOutput, MethodSpec
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import get_spec
from xaidash.models.zoo.graph_gcn import build

EPOCHS = 1000


@lru_cache(maxsize=2)
def ba_shapes_gcn(epochs: int = EPOCHS) -> ModelBundle:
    """gcn on ba_shapes: Adam lr 0.01, weight decay 5e-4, full batch, `epochs` epochs, seed 0, one thread."""
    torch.set_num_threads(1)
    info = get_info("ba_shapes")
    train = load_split("ba_shapes", "train")
    torch.manual_seed(0)
    model = build(info)
    x = GRAPH.prepare(GRAPH.items(train, range(len(train))), info, None, torch.device("cpu"))
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    model.train()
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), train.labels).backward()
        opt.step()
    model.eval()
    return ModelBundle(model, get_spec("gcn"), info, torch.device("cpu"))


def motif_nodes(bundle: ModelBundle, motif: bool, n: int) -> list[GraphInput]:
    """The first `n` test nodes that lie in a motif (or not)."""
    test = load_split(bundle.info.name, "test")
    graph = test.graphs[0]
    picked = [int(v) for v in test.nodes if bool(graph.node_truth[int(v)]) == motif][:n]
    return [GraphInput(graph, v) for v in picked]


def _truth_parts(inp: GraphInput, hops: int, sign: float) -> tuple[torch.Tensor, torch.Tensor]:
    nodes, edges = explained_subgraph(inp, hops)
    edge = inp.graph.edge_truth[edges].float()
    node = inp.graph.node_truth[nodes].float()
    features = node[:, None].expand(len(nodes), inp.graph.x.shape[1]) / inp.graph.x.shape[1]
    if sign < 0:
        return 1 - features, 1 - edge
    return features.contiguous(), edge


def _hand(kind: str) -> MethodSpec:
    def compute(ctx: MethodContext, params: dict) -> MethodOutput:
        hops = ctx.bundle.info.graph.hops
        parts = [_truth_parts(inp, hops, -1.0 if kind == "anti_truth" else 1.0) for inp in ctx.raw]
        out = [
            GraphAttribution(None if kind == "truth_edges" else f.float(), None if kind == "truth_nodes" else e)
            for f, e in parts
        ]
        return MethodOutput(out)

    return MethodSpec(
        kind, kind.replace("_", " "), ("graph",), compute, family="perturbation", output="logit", signed=False
    )


HAND = tuple(_hand(k) for k in ("truth_map", "anti_truth", "truth_edges", "truth_nodes"))


@contextmanager
def hand_methods() -> Iterator[None]:
    for spec in HAND:
        registry.METHODS.register(spec)
    try:
        yield
    finally:
        for spec in HAND:
            registry.METHODS.unregister(spec)
