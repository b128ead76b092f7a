"""Your own graphs (docs/graph-files.md): a folder of JSON graphs or CSV pairs as a data set (`graphs:<path>`), and one
graph file read as inputs to explain (`read_graph_file`). Checked against networkx's karate club and PyG's own
`to_undirected` / `k_hop_subgraph`; every refusal is one line naming the file."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
import torch

import xaidash.data.sets  # noqa: F401  (registers the sources)
from xaidash.data.errors import DatasetError, ExplainError
from xaidash.data.modalities.graph import GRAPH, centre_of
from xaidash.data.modalities.graph_read import graph_file_spec, parse_graph_file, read_graph_file
from xaidash.data.notes import collect_notes
from xaidash.data.registry import get_info, get_source, load_split

CPU = torch.device("cpu")
RING = [[0, 1], [1, 2], [2, 3], [3, 0]]
STAR = [[0, 1], [0, 2], [0, 3]]


def _write(path: Path, doc: Any) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def _graph_doc(i: int, label: str | None = None, edges: Any = None, **extra: Any) -> dict[str, Any]:
    nodes = [{"id": n, "features": [float(n), float(i)]} for n in range(4)]
    doc: dict[str, Any] = {"nodes": nodes, "edges": edges if edges is not None else (RING if i % 2 else STAR)}
    if label is not None:
        doc["label"] = label
    return {**doc, **extra}


def _shapes_folder(root: Path, count: int = 10) -> Path:
    """`count` graphs of 4 nodes: a star (class star) or a ring (class ring), 2 named features."""
    root.mkdir(exist_ok=True)
    for i in range(count):
        doc = _graph_doc(i, "ring" if i % 2 else "star", feature_names=["position", "graph"])
        _write(root / f"g{i:02d}.json", doc)
    return root


def _karate_doc() -> dict[str, Any]:
    """Zachary's karate club as networkx ships it: the club each member joined as the node label, string ids."""
    club = nx.karate_club_graph()
    return {
        "feature_names": ["degree"],
        "nodes": [{"id": f"m{n}", "features": [club.degree(n)], "label": club.nodes[n]["club"]} for n in club],
        "edges": [[f"m{a}", f"m{b}"] for a, b in club.edges()],
    }


def _refusal(name: str) -> str:
    """The one line `graphs:` refuses a folder with (no traceback, no class name)."""
    with pytest.raises(DatasetError) as caught:
        get_source(name)
    message = str(caught.value)
    assert "\n" not in message and "Error" not in message and "Traceback" not in message
    return message


def test_a_folder_of_labelled_graphs_is_graph_classification(tmp_path: Path) -> None:
    from torch_geometric.utils import to_undirected

    folder = _shapes_folder(tmp_path / "shapes")
    _write(folder / "README.txt", "not a graph")
    name = f"graphs:{folder}"
    with collect_notes() as notes:
        info = get_info(name)
    assert notes == [f"graphs {folder}: Ignored 1 item(s) that are not graph files: README.txt."]
    assert info.modality == "graph" and info.classes == ("ring", "star") and info.input_shape == (2,)
    assert info.graph is not None and info.graph.task == "graph" and info.graph.feature_names == ("position", "graph")
    train, test = load_split(name, "train"), load_split(name, "test")
    assert (len(train), len(test)) == (8, 2) and train.nodes is None
    assert sorted(test.labels.tolist()) == [0, 1]  # stratified: one of each class
    assert load_split(name, "test").labels.tolist() == test.labels.tolist()
    graph = train.graphs[0]
    given = torch.tensor(STAR if int(train.labels[0]) == 1 else RING).t()
    assert torch.equal(graph.edge_index, to_undirected(given, num_nodes=4))  # both directions, PyG's order
    x = torch.cat([g.x for g in train.graphs]).double()  # standardised by the training graphs' features only
    np.testing.assert_allclose(info.mean, x.mean(0).tolist())
    np.testing.assert_allclose(info.std, x.std(0).tolist())
    assert "graph classification, 10 graph(s) of 40 nodes" in info.description


def test_one_graph_with_node_labels_is_node_classification_against_networkx(tmp_path: Path) -> None:
    doc = _karate_doc()
    doc["nodes"][0]["label"] = None  # one member unlabelled: it passes messages, no sample
    path = _write(tmp_path / "karate.json", doc)
    name = f"graphs:{path}"
    with collect_notes() as notes:
        info = get_info(name)
    assert notes == [
        f"graphs {path}: 1 node(s) have no label: they pass messages but are neither trained on nor tested."
    ]
    assert info.graph is not None and info.graph.task == "node" and info.classes == ("Mr. Hi", "Officer")
    train, test = load_split(name, "train"), load_split(name, "test")
    assert train.graphs[0] is test.graphs[0]
    assert sorted(torch.cat([train.nodes, test.nodes]).tolist()) == list(range(1, 34))
    assert set(train.labels.tolist()) == set(test.labels.tolist()) == {0, 1}
    club, graph = nx.karate_club_graph(), train.graphs[0]
    assert graph.node_ids[5] == "m5" and graph.x[:, 0].tolist() == [float(club.degree(n)) for n in club]
    assert {tuple(e) for e in graph.edge_index.t().tolist()} == {*club.edges(), *((b, a) for a, b in club.edges())}
    for split in (train, test):
        for node, label in zip(split.nodes.tolist(), split.labels.tolist(), strict=True):
            assert info.classes[label] == club.nodes[node]["club"]
    batch = GRAPH.prepare(GRAPH.items(test, range(3)), info, None, CPU)
    assert batch.num_graphs == 1 and centre_of(batch).tolist() == test.nodes[:3].tolist()


def test_csv_pairs_read_as_the_same_graphs_as_json(tmp_path: Path) -> None:
    json_folder, csv_folder = _shapes_folder(tmp_path / "json", 6), tmp_path / "csv"
    csv_folder.mkdir()
    rows = ["graph,label"]
    for i in range(6):
        doc = _graph_doc(i)
        nodes = ["id,position,graph"] + [f"{n['id']},{n['features'][0]},{n['features'][1]}" for n in doc["nodes"]]
        (csv_folder / f"g{i:02d}.nodes.csv").write_text("\n".join(nodes) + "\n")
        (csv_folder / f"g{i:02d}.edges.csv").write_text(
            "source,target\n" + "".join(f"{a},{b}\n" for a, b in doc["edges"])
        )
        rows.append(f"g{i:02d},{'ring' if i % 2 else 'star'}")
    (csv_folder / "labels.csv").write_text("\n".join(rows) + "\n")
    for split in ("train", "test"):
        a, b = load_split(f"graphs:{json_folder}", split), load_split(f"graphs:{csv_folder}", split)
        assert torch.equal(a.labels, b.labels)
        for ga, gb in zip(a.graphs, b.graphs, strict=True):
            assert torch.equal(ga.x, gb.x) and torch.equal(ga.edge_index, gb.edge_index)
    assert get_info(f"graphs:{csv_folder}").graph.feature_names == ("position", "graph")  # type: ignore[union-attr]


def test_what_is_fixed_is_said_in_notes(tmp_path: Path) -> None:
    doc = {
        "nodes": ["a", "b", "c", "a"],  # bare ids: no features; "a" listed twice, the same both times
        "edges": [["a", "b"], ["b", "a"], ["b", "c"], ["c", "c"], ["a", "b"]],
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = parse_graph_file(_write(tmp_path / "g.json", doc))
    assert not caught  # parsing only collects notes; the source raises them
    assert graph.ids == ("a", "b", "c") and graph.x.shape == (3, 0)
    assert graph.edge_index.tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    assert graph.notes == (
        "g.json: node 'a' is listed twice; kept once.",
        "g.json: left out 1 edge(s) from a node to itself (a model adds a node's own features).",
        "g.json: 2 edge(s) given twice (or both ways) kept once: edges are undirected.",
    )
    assert graph.data().x.tolist() == [[1.0], [1.0], [1.0]]  # no features: one constant feature


def test_nodes_marked_truth_are_the_ground_truth_with_the_edges_among_them(tmp_path: Path) -> None:
    """A house on a path, the house marked: its nodes and exactly its 6 edges are the truth (PyG's rule for a motif),
    in JSON and in CSV alike; the split reads them as ground truth."""
    house = [["h0", "h1"], ["h1", "h2"], ["h2", "h3"], ["h3", "h0"], ["h0", "h4"], ["h1", "h4"]]
    base = [["b0", "b1"], ["b1", "b2"], ["b2", "h3"]]
    ids = ["b0", "b1", "b2", "h0", "h1", "h2", "h3", "h4"]
    folder = tmp_path / "houses"
    folder.mkdir()
    for i in range(10):
        label = "house" if i % 2 else "path"
        nodes = [{"id": n, "truth": n.startswith("h") and i % 2 == 1} for n in ids]
        _write(folder / f"g{i}.json", {"label": label, "nodes": nodes, "edges": base + house})
    graph = parse_graph_file(folder / "g1.json").data()
    assert graph.node_truth.tolist() == [False] * 3 + [True] * 5
    marked = {tuple(e) for e in graph.edge_index[:, graph.edge_truth].t().tolist()}
    assert marked == {(ids.index(a), ids.index(b)) for a, b in house} | {(ids.index(b), ids.index(a)) for a, b in house}
    (folder / "g1.json").unlink()
    rows = "id,truth\n" + "".join(f"{n},{int(n.startswith('h'))}\n" for n in ids)
    (folder / "g1.nodes.csv").write_text(rows)
    (folder / "g1.edges.csv").write_text("source,target\n" + "".join(f"{a},{b}\n" for a, b in base + house))
    (folder / "labels.csv").write_text("graph,label\ng1,house\n")
    csv_graph = parse_graph_file(folder / "g1.nodes.csv").data()
    assert torch.equal(csv_graph.edge_truth, graph.edge_truth) and torch.equal(csv_graph.node_truth, graph.node_truth)
    name = f"graphs:{folder}"
    info = get_info(name)
    assert info.has_rationales and "Ground truth (the nodes marked truth) in 10 graph(s)." in info.description
    test = load_split(name, "test")
    truth = GRAPH.ground_truth(test, range(len(test)))
    assert truth.rationales == [[3, 4, 5, 6, 7] if int(y) == 0 else [] for y in test.labels]  # classes: house, path
    (folder / "g1.nodes.csv").write_text("id,truth\nb0,maybe\n")
    assert _refusal(name) == "g1.nodes.csv, line 2: 'truth' is 'maybe'; write 1 or 0 (true or false)."


def test_a_generated_set_written_as_files_reads_back_the_same(tmp_path: Path) -> None:
    """BA-2Motifs graphs written in the documented format (each edge once, motif nodes marked truth) read back with
    the same features, edges and truth as PyG generated them: the truth rule (edges among truth nodes) is PyG's."""
    generated = load_split("ba_2motifs", "test")
    folder = tmp_path / "motifs"
    folder.mkdir()
    for i, (graph, label) in enumerate(zip(generated.graphs[:20], generated.labels[:20], strict=True)):
        nodes = [{"id": n, "features": graph.x[n].tolist(), "truth": bool(graph.node_truth[n])} for n in range(25)]
        edges = [[a, b] for a, b in graph.edge_index.t().tolist() if a < b]
        _write(folder / f"g{i:02d}.json", {"label": ["house", "cycle"][int(label)], "nodes": nodes, "edges": edges})
    for i, graph in enumerate(generated.graphs[:20]):
        read = parse_graph_file(folder / f"g{i:02d}.json").data()
        assert torch.equal(read.x, graph.x) and torch.equal(read.node_truth, graph.node_truth)
        pairs = {tuple(e): bool(t) for e, t in zip(graph.edge_index.t().tolist(), graph.edge_truth, strict=True)}
        assert {tuple(e): bool(t) for e, t in zip(read.edge_index.t().tolist(), read.edge_truth, strict=True)} == pairs


def _folder(tmp_path: Path, *docs: Any) -> str:
    folder = tmp_path / "f"
    folder.mkdir()
    for i, doc in enumerate(docs):
        _write(folder / f"g{i}.json", doc)
    return f"graphs:{folder}"


REFUSALS = [
    ("edge to a missing node", [_graph_doc(0, "a", [[0, 9]])], "g0.json: edge 1 ('0' to '9') names node '9', which"),
    (
        "a node labelled twice",
        [{"nodes": [{"id": "a", "label": "x"}, {"id": "b", "label": "y"}, {"id": "a", "label": "y"}]}],
        "g0.json: node 'a' is labelled twice, 'x' and 'y' (node 3 of its list): a node has one label.",
    ),
    (
        "graph and node labels across files",
        [_graph_doc(0, "a"), {"nodes": [{"id": 0, "features": [1, 2], "label": "x"}]}],
        "g0.json has a graph label but g1.json has node labels",
    ),
    (
        "graph and node labels in one file",
        [{"label": "a", "nodes": [{"id": 0, "label": "x"}]}],
        "g0.json has a graph label ('a') and node labels",
    ),
    ("a graph with no nodes", [{"nodes": [], "edges": []}], "g0.json has no nodes"),
    (
        "features of unequal length",
        [{"nodes": [{"id": "a", "features": [1, 2]}, {"id": "b", "features": [1]}]}],
        "g0.json: node 'b' has 1 feature(s), node 'a' 2: every node needs the same number of features",
    ),
    (
        "a feature that is no number",
        [{"nodes": [{"id": "a", "features": [1, "red"]}]}],
        "g0.json: feature 2 of node 'a' is \"red\", not a number",
    ),
    (
        "graphs with different features",
        [_graph_doc(0, "a"), {"label": "b", "nodes": [{"id": 0, "features": [1]}]}],
        "g1.json has 1 feature(s) per node, g0.json 2",
    ),
    ("a graph without its label", [_graph_doc(0, "a"), _graph_doc(1)], "g1.json has no label (1 of 2 graphs"),
    ("no labels at all", [_graph_doc(0), _graph_doc(1)], "No labels in 2 graph file(s)"),
    ("one class", [_graph_doc(0, "a"), _graph_doc(1, "a")], "Every graph is labelled 'a'"),
    ("a list, not a graph", [[1, 2]], 'g0.json: a graph file is a JSON object with "nodes" and "edges"'),
    ("a misspelt field", [{"nodes": ["a"], "egdes": []}], "g0.json: unknown field(s) 'egdes'"),
    ("an edge of three ends", [{"nodes": ["a", "b"], "edges": [["a", "b", "a"]]}], "g0.json: edge 1 is"),
    ("truth that is no yes or no", [{"nodes": [{"id": 0, "truth": 1}]}], "the \"truth\" of node '0' is true or false"),
    (
        "bad JSON",
        ['{"nodes": [\n  {"id": 1}\n  {"id": 2}]}'],
        "g0.json is not valid JSON: Expecting ',' delimiter at line 3",
    ),
]


@pytest.mark.parametrize(("why", "docs", "expected"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_bad_graph_files_are_refused_in_one_line(tmp_path: Path, why: str, docs: list[Any], expected: str) -> None:
    assert expected in _refusal(_folder(tmp_path, *docs))


def test_bad_folders_and_csv_files_are_refused_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no graph files" in _refusal(f"graphs:{empty}")
    assert "does not exist" in _refusal(f"graphs:{tmp_path / 'nowhere'}")
    assert "takes a path and no options" in _refusal(f"graphs:{empty}?size=3")
    assert "No path given" in _refusal("graphs:")
    folder = tmp_path / "csv"
    folder.mkdir()
    (folder / "a.edges.csv").write_text("source,target\n1,2\n")
    assert _refusal(f"graphs:{folder}") == "a.edges.csv has no a.nodes.csv beside it: a CSV graph is both files."
    (folder / "a.nodes.csv").write_text("id,label,weight\n1,x,0.5\n2,y,heavy\n")
    assert (
        _refusal(f"graphs:{folder}")
        == "a.nodes.csv, line 3: 'weight' is 'heavy', not a number: node features are numbers."
    )
    (folder / "a.nodes.csv").write_text("id,label,weight\n1,x,0.5\n2,y,1\n2,x,1\n")
    assert "a.nodes.csv: node '2' is labelled twice, 'y' and 'x' (line 4)" in _refusal(f"graphs:{folder}")
    (folder / "a.nodes.csv").write_text("id,label,weight\n1,x,0.5\n2,y,1\n")
    (folder / "a.edges.csv").write_text("source,target\n1,3\n")
    assert "a.edges.csv: line 2 ('1' to '3') names node '3'" in _refusal(f"graphs:{folder}")
    labelled = _shapes_folder(tmp_path / "labelled", 4)
    (labelled / "labels.csv").write_text("graph,label\ng00,ring\n")  # g00.json says star
    assert "labels.csv, line 2: graph 'g00' is labelled 'ring' there and 'star' elsewhere" in _refusal(
        f"graphs:{labelled}"
    )


def test_datasets_check_reads_a_folder_and_says_its_notes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xaidash.dashboard.cli import main

    folder = _shapes_folder(tmp_path / "shapes")
    _write(folder / "g00.json", _graph_doc(0, "star", [*STAR, [1, 1]], feature_names=["position", "graph"]))
    assert main(["datasets", "--check", f"graphs:{folder}"]) == 0
    out, err = capsys.readouterr()
    assert "8 train / 2 test graphs" in out and "1 note(s)" in out
    assert (
        err
        == f"warning: graphs {folder}: g00.json: left out 1 edge(s) from a node to itself (a model adds a node's own features).\n"
    )
    assert main(["datasets", "--check", f"graphs:{tmp_path / 'empty.json'}"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


# --- one graph file, to explain -------------------------------------------------------------------------------


def test_a_graph_file_is_read_as_inputs_of_a_node_model(tmp_path: Path) -> None:
    from torch_geometric.utils import k_hop_subgraph

    info = get_info(f"graphs:{_write(tmp_path / 'karate.json', _karate_doc())}")
    doc = _karate_doc()
    doc["node"] = ["m0", "m33"]
    asked = read_graph_file(_write(tmp_path / "asked.json", doc), info)
    assert [i.node for i in asked] == [0, 33] and asked[0].graph is asked[1].graph
    path, node = graph_file_spec(f"{tmp_path / 'asked.json'}:m5")
    assert (path, node) == (tmp_path / "asked.json", "m5")
    (one,) = read_graph_file(path, info, node)
    assert one.node == 5
    every = read_graph_file(tmp_path / "karate.json", info)
    assert [i.node for i in every] == list(range(34))
    batch = GRAPH.prepare(every[:2], info, None, CPU)
    assert batch.num_graphs == 1 and centre_of(batch).tolist() == [0, 1]
    from xaidash.data.modalities.graph import explained_subgraph

    nodes, _ = explained_subgraph(one, 2)
    assert nodes.tolist() == sorted(k_hop_subgraph(5, 2, one.graph.edge_index)[0].tolist())


def test_a_graph_file_is_read_as_one_input_of_a_graph_model(tmp_path: Path) -> None:
    info = get_info("ba_2motifs")  # ten constant features, named feature 0 ... feature 9
    doc = {
        "nodes": [{"id": n, "features": [1.0] * 10} for n in range(5)],
        "edges": [[n, (n + 1) % 5] for n in range(5)],
    }
    (inp,) = read_graph_file(_write(tmp_path / "cycle.json", doc), info)
    assert inp.node is None and inp.nodes == 5 and inp.edges == 10
    assert GRAPH.prepare([inp], info, None, CPU).x.shape == (5, 10)


def test_graph_files_that_do_not_fit_the_model_are_refused_in_one_line(tmp_path: Path) -> None:
    node_info, graph_info = get_info("ba_shapes"), get_info("ba_2motifs")
    few = _write(tmp_path / "few.json", {"nodes": [{"id": 0, "features": [1, 2]}]})
    cases = [
        (few, node_info, None, "few.json has 2 feature(s) per node; the models of ba_shapes read 10"),
        (few, get_info("breast_cancer"), None, "breast_cancer is not a data set of graphs"),
        (tmp_path / "missing.json", node_info, None, "Graph file"),
        (_write(tmp_path / "bad.json", "{"), node_info, None, "bad.json is not valid JSON"),
        (_write(tmp_path / "g.txt", "x"), node_info, None, "g.txt is not a graph file"),
    ]
    ten = _write(tmp_path / "ten.json", {"nodes": [{"id": 0, "features": [1.0] * 10}]})
    cases += [
        (ten, node_info, "7", "ten.json has no node '7'; its nodes are '0'"),
        (ten, graph_info, "0", "ba_2motifs classifies whole graphs: give ten.json without :0"),
    ]
    named = _write(tmp_path / "named.json", {"nodes": [{"id": 0, "features": [1.0]}], "feature_names": ["mass"]})
    karate = get_info(f"graphs:{_write(tmp_path / 'karate.json', _karate_doc())}")
    assert read_graph_file(_write(tmp_path / "ok.json", {"nodes": [{"features": [2]}]}), karate)[0].node == 0
    cases.append((named, karate, None, "named.json names its features 'mass'; the models of graphs:"))
    for path, info, node, expected in cases:
        with pytest.raises(ExplainError) as caught:
            read_graph_file(path, info, node)
        assert expected in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
