"""The graph adapter with the graph methods (explainers/methods/graph_*.py) end to end on a gcn trained on BA-Shapes:
every registered graph method explains through `explain` into one map per input over its explained subgraph, draws
with its colour bar (the motif and the node explained marked), and every metric the adapter lists scores without an
error, each value in its declared range."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from graph_explain_bundles import ba_shapes_gcn, motif_nodes

from xaidash.data.modalities.graph import explained_subgraph
from xaidash.explainers import explain
from xaidash.explainers.figures.map_figure import explanation_figures
from xaidash.explainers.metrics.registry import REGISTRY, metrics_for
from xaidash.explainers.modalities.graph_maps import parse_graph_labels
from xaidash.explainers.registry import methods_for
from xaidash.explainers.scoring import input_metrics

FAST = ("saliency", "inputxgrad", "ig", "occlusion", "gnnexplainer")


def test_the_graph_methods_apply_to_a_gcn() -> None:
    assert set(FAST) | {"pgexplainer"} <= {m.id for m in methods_for(ba_shapes_gcn())}


@pytest.mark.parametrize("method", [*FAST, pytest.param("pgexplainer", marks=pytest.mark.slow)])
def test_every_graph_method_explains_draws_and_scores(method: str) -> None:
    torch.set_num_threads(1)
    bundle = ba_shapes_gcn()
    inputs = motif_nodes(bundle, True, 2)
    e = explain(bundle, inputs, None, method, seed=0)
    for i, inp in enumerate(inputs):
        nodes, edges = explained_subgraph(inp, bundle.info.graph.hops)
        assert e.item(i).shape == (len(nodes) + len(edges),) and np.isfinite(e.item(i)).all()
    figure = explanation_figures({method: e}, 0, classes=bundle.info.classes)[method]
    assert figure.figure_png and figure.legend.units and "{" not in figure.legend.units
    layout = parse_graph_labels(figure.words)
    assert layout is not None and layout.nodes[layout.asked] == inputs[0].node and any(layout.motif_edges)
    values, errors = input_metrics(bundle, inputs, e, steps=4, page="compare")
    assert not errors, errors
    assert set(values) == {m.id for m in metrics_for("compare", "graph", bundle)}
    for k, v in values.items():
        low, high = REGISTRY.get(k).value_range
        assert all(
            np.isnan(a) or ((low is None or a >= low - 1e-6) and (high is None or a <= high + 1e-6)) for a in v
        ), (k, v)
