"""Reading one graph file of the user's (docs/graph-files.md): a JSON file, or a pair of CSV files NAME.nodes.csv and
NAME.edges.csv. The folder data set (`graphs:<path>`, data/sets/graph_files.py) reads every graph of a folder with
`parse_graph_file`; the Explain page's upload and `xaidash explain --input FILE` read one with `read_graph_file`.

JSON: {"nodes": [{"id": "a", "features": [1.0, 0.5], "label": "x"}, ...], "edges": [["a", "b"], ...],
"label": "toxic", "feature_names": ["mass", "charge"], "node": "a"}; only "nodes" is required. A node may be a bare id
("a"); an id is a string or a whole number (1 and "1" are the same node) and defaults to the node's position.
"label" on the graph (graph classification) or on nodes (node classification); "node" names the node(s) to explain;
`"truth": true` on a node marks it as part of what sets the label (a motif): the ground truth, its edges the edges
among those nodes, as PyG marks a generated motif.
CSV: NAME.nodes.csv has an `id` column, optional `label` and `truth` (1 or 0) columns and one column per feature (the
header names them); NAME.edges.csv has `source` and `target` columns.

Edges are undirected: each is given once (either way) and both directions are kept; an edge given twice, or both
ways, is kept once, and an edge from a node to itself is left out (a model adds each node's own features itself):
both with a note. A graph whose nodes have no features gets one feature, `constant` = 1 per node, so a model reads
the structure alone (as the GNNExplainer paper's sets). Everything else that is wrong is refused with one line
naming the file and the node, edge or line (DatasetError; `read_graph_file` raises ExplainError)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from xaidash.data.errors import DatasetError, ExplainError
from xaidash.data.registry import DatasetInfo
from xaidash.data.text_files import decode_text

CONSTANT_FEATURE = "constant"  # the one feature of a graph given without features
GRAPH_KEYS = ("nodes", "edges", "label", "feature_names", "node", "name")
NODE_KEYS = ("id", "features", "label", "truth")
TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no", "")  # a CSV truth column's values
NODES_CSV, EDGES_CSV = ".nodes.csv", ".edges.csv"
SHOWN_IDS = 8  # node ids named in a refusal that lists them


@dataclass(frozen=True)
class GraphFile:
    """One graph as its file gives it: node ids in order, features (n, F) (F = 0: none given), undirected edges as
    both directions (2, E), the node labels (None where a node has none; None: no node has one), the graph label,
    the feature names (None: not given), the nodes asked about ("node"), and notes on what was fixed."""

    name: str
    ids: tuple[str, ...]
    x: torch.Tensor
    edge_index: torch.Tensor
    node_labels: tuple[str | None, ...] | None
    label: str | None
    feature_names: tuple[str, ...] | None
    asked: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    truth: tuple[bool, ...] | None = None  # the nodes known to set the label (None: not given)

    @property
    def stem(self) -> str:
        """The graph's name: the file's name without .json, .nodes.csv or .edges.csv."""
        return graph_stem(self.name)

    def data(self) -> Any:
        """A PyG `Data` (x float32, edge_index, and `node_ids`: the file's ids, for the pages), a graph without
        features given one constant feature."""
        from torch_geometric.data import Data

        x = self.x if self.x.shape[1] else torch.ones(len(self.ids), 1)
        data = Data(x=x.float(), edge_index=self.edge_index, node_ids=list(self.ids), num_nodes=len(self.ids))
        if self.truth is not None:  # the truth nodes and the edges among them, as PyG marks a motif
            data.node_truth = torch.tensor(self.truth, dtype=torch.bool)
            data.edge_truth = data.node_truth[self.edge_index[0]] & data.node_truth[self.edge_index[1]]
        return data


def graph_stem(name: str) -> str:
    lower = name.lower()
    for suffix in (NODES_CSV, EDGES_CSV, ".json"):
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _id_text(value: Any, where: str) -> str:
    """A node id as text: a string, or a whole number (so 3 and "3" name one node)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DatasetError(f"{where}: a node id is a string or a whole number, not {json.dumps(value)}.")
    if isinstance(value, float):
        if not value.is_integer():
            raise DatasetError(f"{where}: a node id is a string or a whole number, not {value}.")
        value = int(value)
    text = str(value).strip()
    if not text:
        raise DatasetError(f"{where}: a node id is empty.")
    return text


def _label_text(value: Any, where: str) -> str | None:
    """A label as text (a whole number 2.0 as "2"); None: no label."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, (str, int, float)):
        raise DatasetError(f"{where}: a label is a word or a number, not {json.dumps(value)}.")
    text = str(value).strip()
    return text or None


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DatasetError(f"{where} is {json.dumps(value)}, not a number: node features are numbers.")
    return float(value)


def _shown(ids: Sequence[str]) -> str:
    return ", ".join(repr(i) for i in ids[:SHOWN_IDS]) + (
        f", ... ({len(ids):,} in all)" if len(ids) > SHOWN_IDS else ""
    )


@dataclass
class _Nodes:
    """Nodes as they are read, checked one at a time."""

    name: str
    ids: list[str]
    rows: list[list[float]]
    labels: list[str | None]
    where: dict[str, int]  # id -> position
    notes: list[str]
    truth: list[bool] = field(default_factory=list)
    truth_given: bool = False

    def add(self, node: str, features: list[float], label: str | None, place: str, truth: bool | None = None) -> None:
        """One node; a node listed twice must say the same both times (it is then kept once, with a note)."""
        if node in self.where:
            first = self.where[node]
            if self.labels[first] != label:
                raise DatasetError(
                    f"{self.name}: node {node!r} is labelled twice, {self.labels[first]!r} and {label!r} ({place}): "
                    "a node has one label."
                )
            if self.rows[first] != features or self.truth[first] != bool(truth):
                raise DatasetError(
                    f"{self.name}: node {node!r} is listed twice with different features or truth ({place})."
                )
            self.notes.append(f"{self.name}: node {node!r} is listed twice; kept once.")
            return
        if self.rows and len(features) != len(self.rows[0]):
            raise DatasetError(
                f"{self.name}: node {node!r} has {len(features)} feature(s), node {self.ids[0]!r} "
                f"{len(self.rows[0])}: every node needs the same number of features ({place})."
            )
        self.where[node] = len(self.ids)
        self.ids.append(node)
        self.rows.append(features)
        self.labels.append(label)
        self.truth.append(bool(truth))
        self.truth_given |= truth is not None


def _json_nodes(name: str, nodes: Any, notes: list[str]) -> _Nodes:
    if not isinstance(nodes, list):
        raise DatasetError(f'{name}: "nodes" is a list of nodes, e.g. [{{"id": "a", "features": [1.0]}}].')
    if not nodes:
        raise DatasetError(f'{name} has no nodes: a graph needs at least one node in "nodes".')
    read = _Nodes(name, [], [], [], {}, notes)
    for i, node in enumerate(nodes):
        place = f"node {i + 1} of its list"
        if not isinstance(node, dict):  # a bare id: a node without features or label
            read.add(_id_text(node, f"{name}, {place}"), [], None, place)
            continue
        unknown = sorted(set(node) - set(NODE_KEYS))
        if unknown:
            raise DatasetError(
                f"{name}, {place}: unknown field(s) {', '.join(map(repr, unknown))}; a node has "
                f"{', '.join(map(repr, NODE_KEYS))}."
            )
        node_id = _id_text(node.get("id", i), f"{name}, {place}")
        values = node.get("features", [])
        if not isinstance(values, list):
            raise DatasetError(f'{name}: the "features" of node {node_id!r} are a list of numbers.')
        features = [_number(v, f"{name}: feature {j + 1} of node {node_id!r}") for j, v in enumerate(values)]
        truth = node.get("truth")
        if truth is not None and not isinstance(truth, bool):
            raise DatasetError(f'{name}: the "truth" of node {node_id!r} is true or false, not {json.dumps(truth)}.')
        read.add(node_id, features, _label_text(node.get("label"), f"{name}, node {node_id!r}"), place, truth)
    return read


def _edge_index(name: str, pairs: list[tuple[str, str, str]], where: dict[str, int], notes: list[str]) -> torch.Tensor:
    """(2, E): both directions of each undirected edge once, sorted; `pairs` are (source, target, where given)."""
    kept: set[tuple[int, int]] = set()
    loops = repeats = 0
    for source, target, place in pairs:
        for end in (source, target):
            if end not in where:
                raise DatasetError(
                    f"{name}: {place} ({source!r} to {target!r}) names node {end!r}, which is not one of its nodes."
                )
        a, b = where[source], where[target]
        if a == b:
            loops += 1
        elif (a, b) in kept:
            repeats += 1
        else:
            kept |= {(a, b), (b, a)}
    if loops:
        notes.append(f"{name}: left out {loops} edge(s) from a node to itself (a model adds a node's own features).")
    if repeats:
        notes.append(f"{name}: {repeats} edge(s) given twice (or both ways) kept once: edges are undirected.")
    ordered = sorted(kept)
    return torch.tensor(ordered, dtype=torch.long).t().reshape(2, len(ordered))


def _json_edges(name: str, edges: Any) -> list[tuple[str, str, str]]:
    if not isinstance(edges, list):
        raise DatasetError(f'{name}: "edges" is a list of pairs of node ids, e.g. [["a", "b"], ["b", "c"]].')
    pairs = []
    for i, edge in enumerate(edges):
        place = f"edge {i + 1}"
        if not isinstance(edge, list) or len(edge) != 2:
            raise DatasetError(
                f"{name}: {place} is {json.dumps(edge)}; an edge is a pair of node ids, [source, target]."
            )
        pairs.append((_id_text(edge[0], f"{name}, {place}"), _id_text(edge[1], f"{name}, {place}"), place))
    return pairs


def _names(name: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise DatasetError(f'{name}: "feature_names" is a list of names, one per feature, e.g. ["mass", "charge"].')
    names = tuple(v.strip() for v in value)
    if len(set(names)) < len(names):
        raise DatasetError(f'{name}: "feature_names" names a feature twice; each name must be unique.')
    return names


def _asked(name: str, value: Any, where: dict[str, int]) -> tuple[str, ...]:
    """The node(s) named by "node" (one id or a list), each checked."""
    if value is None:
        return ()
    asked = tuple(_id_text(v, f'{name}, "node"') for v in (value if isinstance(value, list) else [value]))
    for node in asked:
        if node not in where:
            raise DatasetError(f'{name}: "node" names {node!r}, which is not one of its nodes.')
    return asked


def _finish(name: str, nodes: _Nodes, edges: torch.Tensor, label: Any, names: Any, asked: Any) -> GraphFile:
    """The checks every format shares (feature names against features, labels on graph or nodes), as a GraphFile."""
    features = len(nodes.rows[0])
    feature_names = _names(name, names)
    if feature_names is not None and len(feature_names) != features:
        raise DatasetError(
            f'{name}: "feature_names" names {len(feature_names)} feature(s) but its nodes have {features}.'
        )
    graph_label = _label_text(label, f"{name}, its label")
    labelled = any(lab is not None for lab in nodes.labels)
    if graph_label is not None and labelled:
        raise DatasetError(
            f"{name} has a graph label ({graph_label!r}) and node labels: give the graph a label (graph "
            "classification) or its nodes labels (node classification), not both."
        )
    x = torch.tensor(nodes.rows, dtype=torch.float32).reshape(len(nodes.ids), features)
    return GraphFile(
        name=name,
        ids=tuple(nodes.ids),
        x=x,
        edge_index=edges,
        node_labels=tuple(nodes.labels) if labelled else None,
        label=graph_label,
        feature_names=feature_names,
        asked=_asked(name, asked, nodes.where),
        notes=tuple(nodes.notes),
        truth=tuple(nodes.truth) if nodes.truth_given else None,
    )


def parse_json(path: Path) -> GraphFile:
    """One graph from a JSON file (the format of the module docstring)."""
    name = path.name
    text = decode_text(path.read_bytes(), name).text
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise DatasetError(f"{name} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}.") from None
    except RecursionError:
        raise DatasetError(f"{name} is not a graph file: it nests lists or objects too deeply.") from None
    if not isinstance(doc, dict):
        raise DatasetError(f'{name}: a graph file is a JSON object with "nodes" and "edges", e.g. {{"nodes": [...]}}.')
    unknown = sorted(set(doc) - set(GRAPH_KEYS))
    if unknown:
        raise DatasetError(
            f"{name}: unknown field(s) {', '.join(map(repr, unknown))}; a graph file has "
            f"{', '.join(map(repr, GRAPH_KEYS))}."
        )
    if "nodes" not in doc:
        raise DatasetError(f'{name} has no nodes: a graph file lists them in "nodes".')
    notes: list[str] = []
    nodes = _json_nodes(name, doc["nodes"], notes)
    edges = _edge_index(name, _json_edges(name, doc.get("edges", [])), nodes.where, notes)
    return _finish(name, nodes, edges, doc.get("label"), doc.get("feature_names"), doc.get("node"))


def _column(path: Path, header: Sequence[str], column: str, why: str) -> int:
    if column not in header:
        raise DatasetError(f"{path.name} has no {column!r} column ({why}); its columns are: {', '.join(header)}.")
    return list(header).index(column)


def parse_csv_pair(path: Path) -> GraphFile:
    """One graph from NAME.nodes.csv and NAME.edges.csv (`path` is either of them)."""
    # Imported here: importing data.sets registers every data set, this folder's among them (which read this module).
    from xaidash.data.sets._csv_read import read_table

    stem = graph_stem(path.name)
    nodes_path, edges_path = path.with_name(stem + NODES_CSV), path.with_name(stem + EDGES_CSV)
    for needed in (nodes_path, edges_path):
        if not needed.is_file():
            raise DatasetError(
                f"{path.name} needs {needed.name} beside it: a CSV graph is {stem}{NODES_CSV} and {stem}{EDGES_CSV}."
            )
    table = read_table(nodes_path)
    id_col = _column(nodes_path, table.header, "id", "each node's id")
    label_col = table.header.index("label") if "label" in table.header else None
    truth_col = table.header.index("truth") if "truth" in table.header else None
    feature_cols = [i for i in range(len(table.header)) if i not in (id_col, label_col, truth_col)]
    notes: list[str] = []
    nodes = _Nodes(nodes_path.name, [], [], [], {}, notes)
    for row, line in zip(table.rows, table.lines, strict=True):
        where = f"{nodes_path.name}, line {line}"
        features = []
        for i in feature_cols:
            try:
                features.append(_number(float(row[i]), f"{where}: {table.header[i]!r}"))
            except ValueError:
                raise DatasetError(
                    f"{where}: {table.header[i]!r} is {row[i]!r}, not a number: node features are numbers."
                ) from None
        label = row[label_col] if label_col is not None and row[label_col] else None
        truth = None
        if truth_col is not None:
            if row[truth_col].lower() not in TRUE + FALSE:
                raise DatasetError(f"{where}: 'truth' is {row[truth_col]!r}; write 1 or 0 (true or false).")
            truth = row[truth_col].lower() in TRUE
        nodes.add(_id_text(row[id_col], where), features, label, f"line {line}", truth)
    edges = read_table(edges_path)
    source = _column(edges_path, edges.header, "source", "one end of each edge")
    target = _column(edges_path, edges.header, "target", "the other end")
    pairs = [(row[source], row[target], f"line {line}") for row, line in zip(edges.rows, edges.lines, strict=True)]
    extra = [c for i, c in enumerate(edges.header) if i not in (source, target)]
    if extra:
        notes.append(f"{edges_path.name}: column(s) {', '.join(extra)} not read (edges have no weights or features).")
    names = [table.header[i] for i in feature_cols]
    return _finish(nodes_path.name, nodes, _edge_index(edges_path.name, pairs, nodes.where, notes), None, names, None)


def is_graph_file(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith((".json", NODES_CSV, EDGES_CSV))


def parse_graph_file(path: Path) -> GraphFile:
    """One graph from a .json file or a CSV pair; DatasetError for anything else."""
    if not path.is_file():
        raise DatasetError(f"Graph file {path} does not exist.")
    if not is_graph_file(path):
        raise DatasetError(
            f"{path.name} is not a graph file: give a .json graph, or NAME{NODES_CSV} with NAME{EDGES_CSV} "
            "(docs/graph-files.md)."
        )
    return parse_json(path) if path.name.lower().endswith(".json") else parse_csv_pair(path)


def graph_file_spec(spec: str) -> tuple[Path, str | None]:
    """`FILE` or `FILE:NODE` (the node to explain, by its id) -> (path, node id or None)."""
    head, sep, node = spec.strip().rpartition(":")
    if sep and is_graph_file(Path(head)) and node.strip():
        return Path(head).expanduser(), node.strip()
    return Path(spec.strip()).expanduser(), None


def _check_features(graph: GraphFile, info: DatasetInfo) -> None:
    assert info.graph is not None
    expected = info.graph.feature_names
    given = graph.x.shape[1] or 1  # no features: the one constant feature
    if given != len(expected) or (not graph.x.shape[1] and expected != (CONSTANT_FEATURE,)):
        have = f"{graph.x.shape[1]} feature(s) per node" if graph.x.shape[1] else "no node features"
        raise ExplainError(
            f"{graph.name} has {have}; the models of {info.name} read {len(expected)} ({_shown(expected)})."
        )
    if graph.feature_names is not None and graph.feature_names != expected:
        raise ExplainError(
            f"{graph.name} names its features {_shown(graph.feature_names)}; the models of {info.name} read "
            f"{_shown(expected)}, in that order."
        )


def read_graph_file(path: Path, info: DatasetInfo, node: str | None = None) -> list[Any]:
    """The inputs one graph file holds for a model of `info` (a graph data set), as `GraphInput`s sharing one graph:
    graph classification, the whole graph; node classification, the node named by `node` (its id, as in
    `FILE:NODE`), else the node(s) the file's "node" names, else every node in order. ExplainError (one line) for
    a file that cannot be read or does not fit the model; the notes on what was fixed are raised as DataNotes."""
    from xaidash.data.modalities.graph import GraphInput
    from xaidash.data.notes import warn_notes

    if info.graph is None:
        raise ExplainError(f"{info.name} is not a data set of graphs: a graph file cannot be explained by its models.")
    try:
        graph = parse_graph_file(Path(path))
    except DatasetError as err:
        raise ExplainError(str(err)) from None
    _check_features(graph, info)
    warn_notes(graph.notes, "graph file")
    data = graph.data()
    if info.graph.task == "graph":
        if node is not None:
            raise ExplainError(f"{info.name} classifies whole graphs: give {graph.name} without :{node}.")
        return [GraphInput(data, None)]
    where = {n: i for i, n in enumerate(graph.ids)}
    if node is not None and node not in where:
        raise ExplainError(f"{graph.name} has no node {node!r}; its nodes are {_shown(graph.ids)}.")
    asked = (node,) if node is not None else graph.asked or graph.ids
    return [GraphInput(data, where[n]) for n in asked]
