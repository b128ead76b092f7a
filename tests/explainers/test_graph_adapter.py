"""The graph adapter's explaining half on a gcn trained on BA-Shapes (tests/support/graph_explain_bundles.py) with
stand-in methods whose maps are the ground truth: maps over `explained_subgraph` (node values the sum over features,
the documented derivations where a method scores only edges or only features), labels that name nodes, edges, the
node asked and the motif, drawings that read back from the figure JSON alone, a layout fixed per subgraph, the hover
chart, inputs named as node:K, and the deletion/insertion curves against a hand computation."""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from graph_explain_bundles import ba_shapes_gcn, hand_methods, motif_nodes
from PIL import Image

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.graph import GraphInput, explained_subgraph
from xaidash.explainers import explain
from xaidash.explainers.figures.map_figure import MapFigure, explanation_figures
from xaidash.explainers.inputs import resolve_sample
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.modalities.graph_draw import layout
from xaidash.explainers.modalities.graph_maps import parse_graph_labels
from xaidash.models.bundle import ModelBundle

ADAPTER = adapter_of("graph")


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    return ba_shapes_gcn()


@pytest.fixture(scope="module")
def inputs(bundle: ModelBundle) -> list[GraphInput]:
    return motif_nodes(bundle, True, 2) + motif_nodes(bundle, False, 1)


@pytest.fixture(scope="module")
def maps(bundle: ModelBundle, inputs: list[GraphInput]) -> Iterator[dict]:
    with hand_methods():  # registered while the figures name them
        yield {m: explain(bundle, inputs, None, m) for m in ("truth_map", "anti_truth", "truth_edges", "truth_nodes")}


def test_a_map_covers_the_subgraph_nodes_then_edges(bundle, inputs, maps) -> None:
    e = maps["truth_map"]
    for i, inp in enumerate(inputs):
        nodes, edges = explained_subgraph(inp, bundle.info.graph.hops)
        values = e.item(i)
        assert values.shape == (len(nodes) + len(edges),)
        truth_nodes = inp.graph.node_truth[nodes].numpy()
        # node value = the sum over its features: the stand-in gives 1/F per feature of a motif node
        np.testing.assert_allclose(values[: len(nodes)], truth_nodes.astype(np.float32), atol=1e-6)
        np.testing.assert_array_equal(values[len(nodes) :], inp.graph.edge_truth[edges].numpy().astype(np.float32))
        assert e.channel_attributions[i].shape == (len(nodes), bundle.info.input_shape[0])


def test_labels_name_nodes_edges_the_node_asked_and_the_motif(bundle, inputs, maps) -> None:
    inp, labels = inputs[0], maps["truth_map"].tokens[0]
    nodes, edges = explained_subgraph(inp, bundle.info.graph.hops)
    ei = inp.graph.edge_index
    assert labels[int((nodes == inp.node).nonzero())].startswith(f"node {inp.node} [asked, motif]: feature 0=1")
    first_edge = labels[len(nodes)]
    a, b = int(ei[0, edges[0]]), int(ei[1, edges[0]])
    assert first_edge.startswith(f"edge {a}-{b}")
    assert ("[motif]" in first_edge) == bool(inp.graph.edge_truth[edges[0]])
    g = parse_graph_labels(labels)
    assert g is not None and g.nodes == tuple(nodes.tolist()) and len(g.edges) == len(edges)
    assert g.nodes[g.asked] == inp.node
    assert list(g.motif_edges) == inp.graph.edge_truth[edges].tolist()
    assert parse_graph_labels(["frame 0: value=1"]) is None


def test_edge_only_and_feature_only_methods_get_the_documented_derivations(bundle, inputs, maps) -> None:
    inp = inputs[0]
    nodes, edges = explained_subgraph(inp, bundle.info.graph.hops)
    n = len(nodes)
    where = {int(v): k for k, v in enumerate(nodes)}
    pairs = [(where[int(inp.graph.edge_index[0, e])], where[int(inp.graph.edge_index[1, e])]) for e in edges]
    only_edges = maps["truth_edges"].item(0)
    for k in range(n):  # a node: the mean of the edges that touch it (each direction counted at both ends)
        touching = [only_edges[n + j] for j, (a, b) in enumerate(pairs) for end in (a, b) if end == k]
        assert only_edges[k] == pytest.approx(np.mean(touching) if touching else 0.0, abs=1e-6)
    assert maps["truth_edges"].channel_attributions is None
    only_nodes = maps["truth_nodes"].item(0)
    for j, (a, b) in enumerate(pairs):  # an edge: the mean of its two nodes
        assert only_nodes[n + j] == pytest.approx((only_nodes[a] + only_nodes[b]) / 2, abs=1e-6)


def test_a_method_of_the_wrong_size_is_refused_in_one_line(bundle, inputs) -> None:
    from xaidash.explainers.methods._graph import GraphAttribution
    from xaidash.explainers.registry import MethodOutput

    with pytest.raises(ExplainError, match="explained subgraph has") as err:
        ADAPTER.to_maps(bundle, inputs[:1], MethodOutput([GraphAttribution(None, torch.zeros(3))]))
    assert "\n" not in str(err.value)


def test_the_drawing_marks_the_motif_and_the_node_and_reads_back_from_json(bundle, maps) -> None:
    figs = explanation_figures(maps, 0, classes=bundle.info.classes)
    fig = figs["truth_map"]
    picture = np.asarray(Image.open(io.BytesIO(fig.map_png)).convert("RGB")).astype(int)
    green = (abs(picture[..., 0] - 0x1A) < 40) & (abs(picture[..., 1] - 0x96) < 40) & (abs(picture[..., 2] - 0x41) < 40)
    assert green.sum() > 200  # the motif's outline and halo
    with_bar = Image.open(io.BytesIO(fig.figure_png))
    assert with_bar.height > Image.open(io.BytesIO(fig.map_png)).height  # the colour bar under the map
    back = MapFigure.from_json(fig.to_json())
    assert back.map_png == fig.map_png and back.figure_png == fig.figure_png
    heat = explanation_figures(maps, 0, classes=bundle.info.classes, display="heatmap")["truth_map"]
    assert heat.values.shape == maps["truth_map"].channel_attributions[0].shape
    assert MapFigure.from_json(heat.to_json()).map_png == heat.map_png


def test_one_subgraph_gets_one_layout_across_methods(bundle, maps) -> None:
    a = parse_graph_labels(maps["truth_map"].tokens[0])
    b = parse_graph_labels(maps["anti_truth"].tokens[0])
    assert a is not None and b is not None and a.structure == b.structure
    assert layout(a.structure) is layout(b.structure)
    pos = layout(a.structure)
    assert pos.shape == (len(a.nodes), 2) and pos.min() >= 0 and pos.max() <= 1


def test_the_chart_has_a_node_per_node_with_its_features_and_value(bundle, maps) -> None:
    e = maps["truth_map"]
    fig = explanation_figures(maps, 0, classes=bundle.info.classes)["truth_map"]
    chart = ADAPTER.chart(fig.values, None, signed=False, scale=fig.scale, units="u", labels=fig.words)
    spec = chart.to_dict()
    data = next(d for d in spec["datasets"].values() if d and "node" in d[0])
    g = parse_graph_labels(e.tokens[0])
    assert [d["node"] for d in data] == list(g.nodes)
    assert data[g.asked]["role"].startswith("explained")
    assert data[0]["features"].startswith("feature 0=1")
    assert [d["value"] for d in data] == pytest.approx(e.item(0)[: len(g.nodes)].tolist())


def test_node_k_names_a_node_of_the_data_sets_graph(bundle) -> None:
    r = resolve_sample("node:305", bundle)
    assert isinstance(r.raw, GraphInput) and r.raw.node == 305 and "node 305" in r.description
    with pytest.raises(ExplainError, match="out of range"):
        resolve_sample("node:100000", bundle)
    with pytest.raises(ExplainError, match="does not exist"):
        resolve_sample("/no/such/graph.json", bundle)
    whole = GraphInput(r.raw.graph, None)
    with pytest.raises(ExplainError, match="one node of a graph"):
        ADAPTER.checked(bundle, [whole])


def _hand_deletion(bundle: ModelBundle, inp: GraphInput, values: np.ndarray, target: int, steps: int) -> list[float]:
    """Edges removed one chunk at a time by a plain loop: one model call per point."""
    nodes, edges = explained_subgraph(inp, bundle.info.graph.hops)
    order = edges[np.argsort(-values[len(nodes) :], kind="stable")]
    out = []
    for f in np.linspace(0, 1, steps + 1):
        keep = torch.ones(inp.edges, dtype=torch.bool)
        keep[order[: round(f * len(order))]] = False
        from torch_geometric.data import Data

        g = Data(x=inp.graph.x, edge_index=inp.graph.edge_index[:, keep])
        with torch.no_grad():
            p = torch.softmax(bundle.model(bundle.prepare([GraphInput(g, inp.node)])), 1)[0, target]
        out.append(float(p))
    return out


def test_deletion_removes_edges_in_order_as_a_plain_loop_does(bundle, inputs, maps) -> None:
    e = maps["truth_map"]
    curve = ADAPTER.perturbation_curve(bundle, inputs, e, mode="deletion", steps=4)
    for i, inp in enumerate(inputs):
        expected = _hand_deletion(bundle, inp, e.item(i), int(e.targets[i]), 4)
        np.testing.assert_allclose(curve.curves[i], expected, atol=1e-5)
    insertion = ADAPTER.perturbation_curve(bundle, inputs, e, mode="insertion", steps=4)
    np.testing.assert_allclose(insertion.curves[:, -1], curve.curves[:, 0], atol=1e-5)  # all edges back = the input
    assert curve.substrate == "edges removed"


def test_a_graph_file_node_is_read_and_explained(bundle, tmp_path, maps) -> None:
    import json

    nodes = [{"id": f"n{i}", "features": [1.0] * 10} for i in range(5)]
    edges = [["n0", "n1"], ["n1", "n2"], ["n2", "n3"], ["n3", "n0"], ["n3", "n4"]]
    path = tmp_path / "ring.json"
    path.write_text(json.dumps({"nodes": nodes, "edges": edges}))
    r = resolve_sample(f"{path}:n4", bundle)
    assert isinstance(r.raw, GraphInput) and r.raw.node == 4 and "ring.json" in r.description
    with pytest.raises(ExplainError, match=r"name one as ring\.json:NODE"):
        resolve_sample(str(path), bundle)  # a node task: the file's five nodes
    rows = ADAPTER.read_inputs(str(path), bundle)
    assert [inp.node for inp, _ in rows] == [0, 1, 2, 3, 4]


def test_xaidash_explain_writes_a_graph_report_that_reads_back(tmp_path, monkeypatch, maps) -> None:
    """`xaidash explain --run RUN --input node:K --methods ... --metrics --report FILE.html` on a gcn the engine
    trained: each map with its colour bar, the metrics, and a report.json that draws the same maps again."""
    from xaidash.explainers.cli import main
    from xaidash.explainers.figures.png import data_uri
    from xaidash.explainers.figures.report import ExplainReport
    from xaidash.models.training.config import TrainConfig
    from xaidash.models.training.engine import train

    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    config = TrainConfig(dataset="ba_shapes", model="gcn", epochs=20, batch_size=4096, lr=0.01, device="cpu", seed=0)
    result = train(config)
    assert result.ok, result.error
    out, html = tmp_path / "out", tmp_path / "report.html"
    args = ["explain", "--run", result.run_dir.name, "--input", "node:305", "--methods", "truth_map,truth_edges"]
    assert main([*args, "--metrics", "--out", str(out), "--report", str(html)]) == 0
    back = ExplainReport.read_dir(out)
    assert back.inputs[0].text is not None and back.inputs[0].text.startswith("node 305 of a graph of 700 nodes")
    for method in ("truth_map", "truth_edges"):
        written = (out / "maps" / f"input_00_{method}.png").read_bytes()
        figure = back.figure(0, method)
        assert figure.figure_png == written and figure.modality == "graph"
        assert parse_graph_labels(figure.words) is not None
        assert data_uri(written) in html.read_text()
    (entry,) = [e for e in back.explanations if e.method == "truth_map"]
    assert entry.metrics["edge_auc"] == 1.0 and set(entry.metrics) >= {"deletion_auc", "fidelity_plus", "sparseness"}


def test_whole_node_values_are_the_nodes_and_their_edges_mean(bundle, inputs) -> None:
    """A method that scores whole nodes (occlusion removing a node: `GraphAttribution.nodes`) keeps them as the node
    values; each edge gets the mean of its two nodes'."""
    from types import SimpleNamespace

    from xaidash.explainers.modalities.graph_maps import one_map

    inp = inputs[0]
    nodes, edges = explained_subgraph(inp, bundle.info.graph.hops)
    own = torch.arange(len(nodes), dtype=torch.float32)
    part = SimpleNamespace(node_features=None, edges=None, nodes=own)
    values, labels, per_feature = one_map(inp, bundle.info.graph.hops, part, bundle.info.graph.feature_names)
    assert per_feature is None and len(labels) == values.size == len(nodes) + len(edges)
    np.testing.assert_array_equal(values[: len(nodes)], own.numpy())
    where = {int(v): k for k, v in enumerate(nodes)}
    for j, e in enumerate(edges.tolist()):
        a, b = where[int(inp.graph.edge_index[0, e])], where[int(inp.graph.edge_index[1, e])]
        assert values[len(nodes) + j] == pytest.approx((a + b) / 2)
    with pytest.raises(ExplainError, match="scored 2 nodes"):
        one_map(inp, 3, SimpleNamespace(node_features=None, edges=None, nodes=own[:2]), ())
