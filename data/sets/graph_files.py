"""Your own graphs: `graphs:<path>`, a folder of graph files (or one file), in the format of docs/graph-files.md
(data/modalities/graph_read.py reads each file: NAME.json, or NAME.nodes.csv with NAME.edges.csv).

- The task comes from the labels: a label on each graph (a JSON file's "label", or a row of the folder's labels.csv:
  columns `graph` and `label`) is graph classification; labels on nodes are node classification. Both kinds in one
  folder are refused. In a node task a node without a label still passes messages, but is neither trained on nor
  tested (a note counts them); in a graph task every graph needs its label.
- Classes: the distinct labels, numbers in numeric order, else in text order; at least 2.
- The split is the stratified 80/20 split every data set uses (data/sets/_common.py, seed 0), the same on every load:
  of the graphs for a graph task, of the labelled nodes for a node task (whose graphs both splits share, as the
  built-in node sets do).
- Ground truth: nodes marked `"truth": true` (a CSV `truth` column) and the edges among them, where given; the
  maps' motif outline and the edge-mask AUC read them as they read a generated set's motifs.
- Features: every graph has the same number of node features (and, where a file names them, the same names); none
  at all gives each node one constant feature. The model standardises them with the training split's mean and std
  (a node task's: every node's, as its graphs are in both splits).
Every refusal is one DatasetError line naming the file (and the node, edge or line), raised before anything loads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.modalities.graph import feature_stats
from xaidash.data.modalities.graph_read import (
    CONSTANT_FEATURE,
    EDGES_CSV,
    NODES_CSV,
    GraphFile,
    graph_stem,
    is_graph_file,
    parse_graph_file,
)
from xaidash.data.notes import warn_notes
from xaidash.data.registry import DatasetInfo, GraphFacts, GraphSplit, SplitName, register_factory
from xaidash.data.sets._common import NotedDatasetSource, stratified_indices
from xaidash.data.sets.csv_table import _sorted_values
from xaidash.data.sets.user_data import parse_argument

LABELS_CSV = "labels.csv"  # graph labels of a folder: columns graph, label
HOPS = 3  # the neighbourhood an explanation draws: the depth of the graph models' message passing


@dataclass(frozen=True)
class _Scanned:
    task: Literal["node", "graph"]
    classes: tuple[str, ...]
    graphs: tuple[Any, ...]  # PyG Data, one per file
    graph_of: np.ndarray  # (samples,) the graph of each sample
    nodes: np.ndarray | None  # (samples,) the node of each sample (a node task)
    labels: np.ndarray  # (samples,) class codes
    splits: dict[str, np.ndarray]  # split -> sample indices
    feature_names: tuple[str, ...]
    notes: tuple[str, ...]


def _files(folder: Path, notes: list[str]) -> list[Path]:
    """The graph files of a folder, one per graph (a CSV pair by its nodes file), sorted; anything else noted."""
    entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    ignored = [p.name for p in entries if p.is_dir() or not (is_graph_file(p) or p.name.lower() == LABELS_CSV)]
    if ignored:
        notes.append(f"Ignored {len(ignored)} item(s) that are not graph files: {', '.join(ignored[:5])}.")
    files = [p for p in entries if p.is_file() and is_graph_file(p) and not p.name.lower().endswith(EDGES_CSV)]
    nodes = {graph_stem(p.name) for p in files if p.name.lower().endswith(NODES_CSV)}
    lone = [p.name for p in entries if p.name.lower().endswith(EDGES_CSV) and graph_stem(p.name) not in nodes]
    if lone:
        raise DatasetError(f"{lone[0]} has no {graph_stem(lone[0])}{NODES_CSV} beside it: a CSV graph is both files.")
    if not files:
        raise DatasetError(
            f"{folder} holds no graph files: put one NAME.json per graph there, or NAME{NODES_CSV} with "
            f"NAME{EDGES_CSV} (docs/graph-files.md)."
        )
    return files


def _folder_labels(folder: Path, graphs: Sequence[GraphFile]) -> dict[str, str]:
    """labels.csv's graph labels by graph name, each checked against the graphs and their own labels."""
    from xaidash.data.sets._csv_read import read_table

    path = folder / LABELS_CSV
    if not path.is_file():
        return {}
    table = read_table(path)
    for column in ("graph", "label"):
        if column not in table.header:
            raise DatasetError(f"{LABELS_CSV} has no {column!r} column; it has one row per graph: graph,label.")
    g, lab = table.header.index("graph"), table.header.index("label")
    own = {f.stem: f.label for f in graphs}
    labels: dict[str, str] = {}
    for row, line in zip(table.rows, table.lines, strict=True):
        name, label = row[g], row[lab]
        if name not in own:
            raise DatasetError(f"{LABELS_CSV}, line {line}: there is no graph {name!r} in the folder.")
        if (name in labels and labels[name] != label) or own[name] not in (None, label):
            other = labels.get(name, own[name])
            raise DatasetError(
                f"{LABELS_CSV}, line {line}: graph {name!r} is labelled {label!r} there and {other!r} elsewhere: a "
                "graph has one label."
            )
        if label:
            labels[name] = label
    return labels


def _features(graphs: Sequence[GraphFile]) -> tuple[str, ...]:
    """The node features' names, the same number (and names, where given) in every graph."""
    first = graphs[0]
    for graph in graphs[1:]:
        if graph.x.shape[1] != first.x.shape[1]:
            raise DatasetError(
                f"{graph.name} has {graph.x.shape[1]} feature(s) per node, {first.name} {first.x.shape[1]}: every "
                "graph needs the same features."
            )
    named = [g for g in graphs if g.feature_names is not None]
    for graph in named[1:]:
        if graph.feature_names != named[0].feature_names:
            raise DatasetError(
                f"{graph.name} names its features {', '.join(graph.feature_names or ())}, {named[0].name} "
                f"{', '.join(named[0].feature_names or ())}: every graph needs the same features, in the same order."
            )
    if not first.x.shape[1]:
        return (CONSTANT_FEATURE,)
    return named[0].feature_names if named else tuple(f"feature {i + 1}" for i in range(first.x.shape[1]))  # type: ignore[return-value]


def _task(graphs: Sequence[GraphFile], labels: dict[str, str]) -> Literal["node", "graph"]:
    """ "graph" or "node", from where the labels are; a folder with both kinds, or none, refused."""
    by_graph = [g for g in graphs if g.label is not None or g.stem in labels]
    by_node = [g for g in graphs if g.node_labels is not None]
    if by_graph and by_node:
        raise DatasetError(
            f"{by_graph[0].name} has a graph label but {by_node[0].name} has node labels: label every graph (graph "
            "classification) or nodes (node classification), not both in one folder."
        )
    if by_node:
        return "node"
    if not by_graph:
        raise DatasetError(
            f'No labels in {len(graphs)} graph file(s): give each graph a "label" (graph classification) or its '
            f'nodes "label"s (node classification); see docs/graph-files.md.'
        )
    missing = [g.name for g in graphs if g.label is None and g.stem not in labels]
    if missing:
        raise DatasetError(
            f"{missing[0]} has no label ({len(missing)} of {len(graphs)} graphs have none): in graph classification "
            f'every graph needs its "label" (or a row in {LABELS_CSV}).'
        )
    return "graph"


def _samples(
    graphs: Sequence[GraphFile], labels: dict[str, str], task: str, notes: list[str]
) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """(graph of each sample, node of each sample or None, label text of each sample)."""
    if task != "node":  # whole graphs
        texts = [g.label or labels[g.stem] for g in graphs]
        return np.arange(len(graphs)), None, texts
    graph_of, nodes, texts = [], [], []
    for i, g in enumerate(graphs):
        for n, label in enumerate(g.node_labels or ()):
            if label is not None:
                graph_of.append(i)
                nodes.append(n)
                texts.append(label)
    unlabelled = sum(len(g.ids) for g in graphs) - len(texts)
    if unlabelled:
        notes.append(f"{unlabelled:,} node(s) have no label: they pass messages but are neither trained on nor tested.")
    return np.asarray(graph_of, dtype=np.int64), np.asarray(nodes, dtype=np.int64), texts


@lru_cache(maxsize=8)
def _scan(path: Path, signature: tuple) -> _Scanned:
    notes: list[str] = []
    files = _files(path, notes) if path.is_dir() else [path]
    parsed = [parse_graph_file(f) for f in files]
    for graph in parsed:
        notes += graph.notes
    names = _features(parsed)
    labels = _folder_labels(path, parsed) if path.is_dir() else {}
    task = _task(parsed, labels)
    graph_of, nodes, texts = _samples(parsed, labels, task, notes)
    classes = tuple(_sorted_values(set(texts)))
    if len(classes) < 2:
        raise DatasetError(f"Every {task} is labelled {classes[0]!r}: a classifier needs at least 2 classes.")
    index = {c: i for i, c in enumerate(classes)}
    codes = np.asarray([index[t] for t in texts], dtype=np.int64)
    splits = {s: np.sort(stratified_indices(codes, s)) for s in ("train", "test")}
    data = tuple(g.data() for g in parsed)
    return _Scanned(task, classes, data, graph_of, nodes, codes, splits, names, tuple(notes))


def _signature(path: Path) -> tuple:
    """Modification times and sizes of the path and the files in it: they change when a graph is edited."""
    if path.is_file():
        stat = path.stat()
        return ((path.name, stat.st_mtime_ns, stat.st_size),)
    with os.scandir(path) as entries:
        files = sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in entries if e.is_file())
    return (path.stat().st_mtime_ns, *files)


def _split(scanned: _Scanned, split: SplitName) -> GraphSplit:
    idx = scanned.splits[split]
    labels = torch.from_numpy(scanned.labels[idx].copy())
    if scanned.nodes is None:  # a graph task: the split's own graphs
        return GraphSplit([scanned.graphs[i] for i in idx], labels, torch.arange(len(idx)), None)
    graph_of = torch.from_numpy(scanned.graph_of[idx].copy())
    return GraphSplit(list(scanned.graphs), labels, graph_of, torch.from_numpy(scanned.nodes[idx].copy()))


def _describe(path: Path, scanned: _Scanned) -> str:
    n_train, n_test = (len(scanned.splits[s]) for s in ("train", "test"))
    nodes = sum(int(g.num_nodes) for g in scanned.graphs)
    what = "node classification" if scanned.task == "node" else "graph classification"
    unit = "labelled nodes" if scanned.task == "node" else "graphs"
    features = ", ".join(scanned.feature_names[:8]) + (", ..." if len(scanned.feature_names) > 8 else "")
    truth = sum(getattr(g, "node_truth", None) is not None for g in scanned.graphs)
    return (
        f"Graphs from {path}: {what}, {len(scanned.graphs):,} graph(s) of {nodes:,} nodes in all, "
        f"{len(scanned.classes)} classes, {len(scanned.feature_names)} node feature(s) ({features}); "
        f"{n_train:,} train / {n_test:,} test {unit} (stratified, seed 0)."
        + (f" Ground truth (the nodes marked truth) in {truth:,} graph(s)." if truth else "")
    )


def graphs_source(arg: str) -> NotedDatasetSource:
    """The source for 'graphs:<path>' (a folder of graph files, or one file)."""
    if "?" in arg:
        raise DatasetError(f"graphs:{arg}: graphs: takes a path and no options (what follows '?').")
    path, _ = parse_argument(arg, ())
    if not path.exists():
        raise DatasetError(f"Graph folder {path} does not exist.")
    path = path.resolve()
    scanned = _scan(path, _signature(path))
    warn_notes(scanned.notes, f"graphs {path}")
    train = _split(scanned, "train")
    mean, std = feature_stats(list(scanned.graphs) if scanned.task == "node" else train.graphs)

    def load(split: SplitName, root: Path, download: bool) -> GraphSplit:
        return _split(scanned, split)

    info = DatasetInfo(
        name=f"graphs:{arg}",
        modality="graph",
        classes=scanned.classes,
        input_shape=(len(scanned.feature_names),),
        mean=tuple(mean),
        std=tuple(std),
        description=_describe(path, scanned),
        has_rationales=any(getattr(g, "node_truth", None) is not None for g in scanned.graphs),
        graph=GraphFacts(task=scanned.task, feature_names=scanned.feature_names, hops=HOPS),
    )
    return NotedDatasetSource(info=info, loader=load, is_available=lambda root: path.exists(), notes=scanned.notes)


register_factory("graphs", graphs_source)
