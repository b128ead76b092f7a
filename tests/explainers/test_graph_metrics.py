"""The graph metrics on a gcn trained on BA-Shapes: the edge-mask ROC AUC against the motif (scikit-learn's, checked
against the Mann-Whitney U statistic and on PyG's own GNNExplainer masks), fidelity+/- and the characterization score
(PyG's `fidelity` on the map's hard top-k edge mask, checked against the masked predictions PyG's Explainer makes and
the score's formula), and every metric the graph adapter lists scoring through `input_metrics` on node and graph
tasks."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from graph_explain_bundles import ba_shapes_gcn, hand_methods, motif_nodes
from scipy.stats import mannwhitneyu

from xaidash.data.modalities.graph import GRAPH, GraphInput, explained_subgraph
from xaidash.data.registry import get_info, load_split
from xaidash.explainers import explain
from xaidash.explainers.metrics.graph_truth import (
    FIDELITY_SHARE,
    characterization,
    edge_auc,
    graph_fidelity,
    hard_mask,
    pyg_explainer,
)
from xaidash.explainers.metrics.registry import REGISTRY, metrics_for
from xaidash.explainers.modalities.graph_curves import prepared
from xaidash.explainers.scoring import input_metrics
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import get_spec
from xaidash.models.zoo.graph_gcn import build

GRAPH_METRICS = ("edge_auc", "fidelity_plus", "fidelity_minus", "characterization")


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    return ba_shapes_gcn()


@pytest.fixture(scope="module")
def inputs(bundle: ModelBundle) -> list[GraphInput]:
    return motif_nodes(bundle, True, 3) + motif_nodes(bundle, False, 1)


@pytest.fixture(scope="module")
def hands() -> Iterator[None]:
    with hand_methods():
        yield


def _random_maps(bundle: ModelBundle, inputs: list[GraphInput], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for inp in inputs:
        nodes, edges = explained_subgraph(inp, bundle.info.graph.hops)
        out.append(rng.normal(size=len(nodes) + len(edges)).astype(np.float32))
    return out


def test_edge_auc_is_the_mann_whitney_statistic_of_the_edges_magnitudes(bundle, inputs) -> None:
    maps = _random_maps(bundle, inputs, 0)
    aucs = edge_auc(bundle, inputs, maps)
    for inp, m, auc in zip(inputs[:3], maps, aucs, strict=False):
        nodes, edges = explained_subgraph(inp, bundle.info.graph.hops)
        truth = inp.graph.edge_truth[edges].numpy()
        e = np.abs(m[len(nodes) :])  # by magnitude
        u = mannwhitneyu(e[truth], e[~truth]).statistic
        assert auc == pytest.approx(u / (truth.sum() * (~truth).sum()), abs=1e-9)
    assert math.isnan(aucs[3])  # a base node: the motif does not explain its class


def test_edge_auc_is_one_for_the_motif_and_zero_for_its_opposite(bundle, inputs, hands) -> None:
    for method, expected in (("truth_map", 1.0), ("anti_truth", 0.0), ("truth_edges", 1.0)):
        e = explain(bundle, inputs, None, method)
        assert edge_auc(bundle, inputs, e)[:3].tolist() == [expected] * 3, method


def test_pyg_gnnexplainer_masks_find_the_houses(bundle) -> None:
    """PyG's own GNNExplainer (model explanation, edge masks) on motif nodes: its masks, read over the subgraph,
    score well above chance (the paper: 0.925 on BA-Shapes; 0.85 here over 20 nodes with this quickly trained gcn)."""
    from torch_geometric.explain import Explainer, GNNExplainer

    from xaidash.models.zoo.graph_common import PyGView, release_masks

    inputs = motif_nodes(bundle, True, 4)
    batch = prepared(bundle, inputs[:1])
    explainer = Explainer(
        PyGView(bundle.model),
        GNNExplainer(epochs=100),
        explanation_type="model",
        edge_mask_type="object",
        node_mask_type=None,
        model_config={"mode": "multiclass_classification", "task_level": "node", "return_type": "raw"},
    )
    maps = []
    for inp in inputs:
        torch.manual_seed(0)
        mask = explainer(batch.x, batch.edge_index, index=inp.node).edge_mask.detach()
        nodes, edges = explained_subgraph(inp, bundle.info.graph.hops)
        maps.append(np.concatenate([np.zeros(len(nodes), np.float32), mask[edges].numpy()]))
    release_masks(bundle.model)
    aucs = edge_auc(bundle, inputs, maps)
    assert np.nanmean(aucs) > 0.7, aucs


def test_the_hard_mask_keeps_the_top_share_of_the_subgraphs_edges(bundle, inputs) -> None:
    inp = inputs[0]
    _, edges = explained_subgraph(inp, bundle.info.graph.hops)
    values = np.arange(len(edges), dtype=np.float32)[::-1].copy()  # the first edges highest
    mask = hard_mask(inp, bundle.info.graph.hops, values)
    k = max(1, round(FIDELITY_SHARE * len(edges)))
    assert mask.shape == (inp.edges,) and int(mask.sum()) == k
    assert torch.equal(torch.nonzero(mask).view(-1), edges[:k])


def test_fidelity_is_pygs_on_the_masked_predictions(bundle, inputs, hands) -> None:
    """fid+ = the prediction without the explanation's edges leaves the target; fid- = with them alone it leaves it:
    each checked against PyG's Explainer.get_masked_prediction on the same hard mask, one call per input."""
    e = explain(bundle, inputs, None, "truth_map")
    plus, minus = graph_fidelity(bundle, inputs, e, [int(t) for t in e.targets])
    explainer = pyg_explainer(bundle)
    for i, inp in enumerate(inputs):
        nodes, _ = explained_subgraph(inp, bundle.info.graph.hops)
        mask = hard_mask(inp, bundle.info.graph.hops, e.item(i)[len(nodes) :])
        batch = prepared(bundle, [inp])
        kept = explainer.get_masked_prediction(batch.x, batch.edge_index, None, mask)[inp.node].argmax()
        removed = explainer.get_masked_prediction(batch.x, batch.edge_index, None, 1 - mask)[inp.node].argmax()
        assert plus[i] == float(int(removed) != int(e.targets[i]))
        assert minus[i] == float(int(kept) != int(e.targets[i]))
    fp, fm = np.array([1.0, 0.5, 0.0, 1.0]), np.array([0.0, 0.5, 0.0, 1.0])
    expected = [1.0, 1 / (0.5 / 0.5 + 0.5 / 0.5), 0.0, 0.0]  # (w+ + w-) / (w+/fid+ + w-/(1 - fid-))
    np.testing.assert_allclose(characterization(fp, fm), expected)


def test_every_listed_metric_scores_a_node_task(bundle, inputs, hands) -> None:
    e = explain(bundle, inputs, None, "truth_map")
    values, errors = input_metrics(bundle, inputs, e, steps=4, page="compare")
    assert not errors, errors
    assert set(values) == {m.id for m in metrics_for("compare", "graph", bundle)}
    assert set(GRAPH_METRICS) <= set(values)
    for k, v in values.items():
        low, high = REGISTRY.get(k).value_range
        assert all(
            np.isnan(a) or ((low is None or a >= low - 1e-6) and (high is None or a <= high + 1e-6)) for a in v
        ), (k, v)
    assert values["edge_auc"][:3] == [1.0, 1.0, 1.0]


def test_a_graph_task_is_scored_over_whole_graphs(hands) -> None:
    """ba_2motifs (an untrained gcn: the metrics' plumbing, not its quality): maps cover every node and edge, the
    edge AUC reads the graph's motif, fidelity runs PyG's graph-level Explainer."""
    torch.manual_seed(0)
    info = get_info("ba_2motifs")
    bundle = ModelBundle(build(info).eval(), get_spec("gcn"), info, torch.device("cpu"))
    graphs = GRAPH.items(load_split("ba_2motifs", "test"), range(3))
    e = explain(bundle, graphs, None, "truth_map")
    for i, g in enumerate(graphs):
        assert e.item(i).shape == (g.nodes + g.edges,)
    values, errors = input_metrics(bundle, graphs, e, steps=4, page="compare")
    assert not errors, errors
    assert values["edge_auc"] == [1.0, 1.0, 1.0]
    assert all(v in (0.0, 1.0) for v in values["fidelity_plus"] + values["fidelity_minus"])


def test_compare_prices_a_graph_model_per_input(bundle) -> None:
    """Compare's cost estimate counts a prepared graph batch's inputs (not its graphs) and takes the gradient to the
    model's first parameters (the batch is no tensor)."""
    from xaidash.explainers.comparison.estimate import PROBE_ROWS, measure_pass_times

    times = measure_pass_times(bundle, rows=16, repeats=1)
    assert times.rows == min(16, PROBE_ROWS) and times.forward > 0 and times.backward > 0


def test_mask_methods_say_their_values_are_mask_weights_not_changes_of_the_logit() -> None:
    from xaidash.explainers.figures.legend import map_legend
    from xaidash.explainers.registry import get_method

    fitted = map_legend(get_method("gnnexplainer", "graph"), "graph")
    learnt = map_legend(get_method("pgexplainer", "graph"), "graph")
    removed = map_legend(get_method("occlusion", "graph"), "graph")
    assert fitted.units == "mask weight per edge (0-1, fitted to keep the target's logit)"
    assert learnt.units == "mask weight per edge (0-1, kept to preserve the model's prediction)"
    assert removed.units == "Δ logit per edge" and fitted.group != removed.group
