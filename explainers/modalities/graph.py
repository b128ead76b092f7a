"""Graphs, explained: an input is a graph and, for a node task, the node asked about; a map is one value per node of
the explained subgraph (`explained_subgraph`: the node's neighbourhood within the model's hops, or the whole graph),
then one per edge (graph_maps.py: the labels carry the subgraph, so a report draws it again without the input); drawn
on a layout fixed per subgraph with the node asked ringed and the ground-truth motif outlined, or as a feature x node
heatmap (graph_draw.py); scored by removing edges (graph_curves.py), against the motif's edges and by PyG's fidelity
(explainers/metrics/graph_truth.py).

Inputs a user names (`xaidash explain --input`), besides a data set's samples (`test:N`): `node:K` is node K of the
data set's graph (a node task whose test split is one graph: BA-Shapes' nodes are all in it); a graph file
(docs/graph-files.md, read by `read_graph_file`): its graph, or for a node task `FILE:NODE` its node of that id (the
file's own "node" when none is named)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import torch
from PIL import Image

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.graph import GRAPH, GraphInput, GraphModality
from xaidash.explainers.figures.png import png_bytes
from xaidash.explainers.modalities.base import ADAPTERS, Drawing, Maps, extend
from xaidash.explainers.modalities.graph_curves import graph_perturbation_curve, hops_of
from xaidash.explainers.modalities.graph_draw import WIDTH_PX, draw_graph, draw_heatmap, graph_chart
from xaidash.explainers.modalities.graph_maps import one_map, parse_graph_labels
from xaidash.explainers.modalities.row_maps import RowMaps
from xaidash.explainers.modalities.series_draw import with_bar
from xaidash.explainers.perturbation_curves import CurveResult, Mode
from xaidash.explainers.registry import MethodOutput
from xaidash.models.bundle import ModelBundle

_NODE_SPEC = re.compile(r"^node:(\d+)$")


def _task(bundle: ModelBundle) -> str:
    return bundle.info.graph.task if bundle.info.graph is not None else "graph"


def _file_inputs(spec: str, bundle: ModelBundle) -> list[tuple[GraphInput, str]]:
    """The inputs a graph file holds (data/modalities/graph_read.py: `FILE`, or `FILE:NODE` a node of it by its id)."""
    from xaidash.data.modalities.graph_read import read_graph_file

    path, node = Path(spec).expanduser(), None
    if not path.exists() and ":" in spec:
        head, _, node = spec.rpartition(":")
        path = Path(head).expanduser()
    if not path.exists() and not Path(str(path) + ".nodes.csv").exists():
        raise ExplainError(f"Graph file {str(path)!r} does not exist.")
    inputs = read_graph_file(path, bundle.info, node)
    return [(inp, f"{path.name}: {GRAPH.one_line(inp, bundle.info)}") for inp in inputs]


@dataclass(frozen=True)
class GraphAdapter(RowMaps, GraphModality):
    # ---- reading inputs ----------------------------------------------------------------------------------------
    def read_input(self, spec: str, bundle: ModelBundle, fit: str = "crop") -> tuple[Any, str]:
        """`node:K` (node K of the data set's graph), or a graph file (see the module docstring)."""
        every = self.read_inputs(spec, bundle)
        if len(every) > 1:
            name = Path(spec.strip()).name
            raise ExplainError(f"{name} asks about {len(every)} nodes: name one as {name}:NODE (its id).")
        return every[0]

    def read_inputs(self, spec: str, bundle: ModelBundle) -> list[tuple[Any, str]]:
        """Every input a graph file holds (each node it asks about, or its graph), or the one `spec` names."""
        spec = spec.strip()
        node = _NODE_SPEC.match(spec)
        if node:
            return [self._data_set_node(int(node.group(1)), bundle)]
        return list(_file_inputs(spec, bundle))

    def _data_set_node(self, node: int, bundle: ModelBundle) -> tuple[GraphInput, str]:
        from xaidash.data.registry import GraphSplit, load_split

        if _task(bundle) != "node":
            raise ExplainError(f"node:K names a node; {bundle.spec.name} classifies whole graphs: use test:N.")
        reason = bundle.no_dataset_reason(f"node:{node}")
        if reason:
            raise ExplainError(reason)
        split = load_split(bundle.info.name, "test")
        if not isinstance(split, GraphSplit) or len(split.graphs) != 1:
            raise ExplainError(f"node:K needs a data set of one graph; {bundle.info.name} has several: use test:N.")
        inp = GraphInput(split.graphs[0], node)
        if not 0 <= node < inp.nodes:
            raise ExplainError(f"node:{node} is out of range: the graph of {bundle.info.name} has {inp.nodes} nodes.")
        return inp, f"{bundle.info.name} node {node} ({self.one_line(inp, bundle.info)})"

    def checked(self, bundle: ModelBundle, inputs: Any) -> list[GraphInput]:
        graphs = self.as_batch(inputs)
        if not graphs:
            raise ExplainError("No graphs to explain: pick at least one.")
        features = len(bundle.info.graph.feature_names) if bundle.info.graph is not None else None
        node_task = _task(bundle) == "node"
        for inp in graphs:
            x, ei = inp.graph.x, torch.as_tensor(inp.graph.edge_index)
            if x is None or x.dim() != 2 or (features is not None and x.shape[1] != features):
                shape = None if x is None else tuple(x.shape)
                raise ExplainError(f"A graph of {bundle.info.name} has {features} feature(s) per node; got {shape}.")
            if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= inp.nodes):
                raise ExplainError(f"A graph's edges name nodes outside its {inp.nodes} nodes.")
            if node_task and (inp.node is None or not 0 <= inp.node < inp.nodes):
                raise ExplainError(f"{bundle.spec.name} explains one node of a graph: node {inp.node} is not one.")
            if not node_task and inp.node is not None:
                raise ExplainError(f"{bundle.spec.name} classifies whole graphs, not node {inp.node}.")
        return graphs

    # ---- maps --------------------------------------------------------------------------------------------------
    def to_maps(self, bundle: ModelBundle, raw: Any, out: MethodOutput) -> Maps:
        """One `GraphAttribution` per input -> its map over the subgraph's nodes then edges (graph_maps.py), with
        the node x feature values kept (a list: inputs' subgraphs differ in size) where the method scores features."""
        graphs, parts = self.as_batch(raw), list(out.attributions)
        if len(parts) != len(graphs):
            raise ExplainError(f"A graph method gave {len(parts)} attributions for {len(graphs)} inputs.")
        names = bundle.info.graph.feature_names if bundle.info.graph is not None else ()
        maps, labels, channels = [], [], []
        for inp, part in zip(graphs, parts, strict=True):
            values, words, per_feature = one_map(inp, hops_of(bundle), part, names)
            maps.append(values)
            labels.append(words)
            channels.append(per_feature)
        kept = [c for c in channels if c is not None]
        return Maps(maps, labels, kept if len(kept) == len(channels) else None)

    def map_labels(self, labels: list[list[str]] | None, index: int) -> list[str] | None:
        return None if not labels else labels[index]

    def stored(self, maps: Any, labels: list[str] | None) -> tuple[Any, list[list[str]] | None]:
        return [np.asarray(maps, dtype=np.float32).reshape(-1)], None if labels is None else [list(labels)]

    def display_values(self, explanation: Any, index: int, display: str) -> np.ndarray:
        """'heatmap': the node x feature values where the method made them (else the map, drawn as one row)."""
        channels = explanation.channel_attributions
        if display == "heatmap" and channels is not None:
            return np.asarray(channels[index], np.float32)
        return np.asarray(explanation.item(index), np.float32)

    # ---- drawing -----------------------------------------------------------------------------------------------
    def _picture(self, values: np.ndarray, labels: Sequence[str] | None, signed: bool, scale: float, display: str,
                 width: int) -> Image.Image:  # fmt: skip
        g = parse_graph_labels(labels)
        if g is None:
            raise ExplainError("A graph map is drawn from its labels (its nodes and edges); this one has none.")
        v = np.asarray(values, np.float32)
        if display == "heatmap":
            heat = v if v.ndim == 2 else g.split(v)[0]
            return draw_heatmap(g, heat, signed=signed, scale=scale, width=width)
        return draw_graph(g, v, signed=signed, scale=scale, width=width)

    def draw(
        self,
        values: np.ndarray,
        *,
        signed: bool,
        scale: float,
        clipped: bool,
        units: str,
        display: str,
        background: np.ndarray | None,
        labels: Sequence[str] | None,
        upscale: int,
    ) -> Drawing:
        img = self._picture(values, labels, signed, scale, display, WIDTH_PX)
        figure = with_bar(img, signed=signed, scale=scale, clipped=clipped, units=units)
        return Drawing(
            map_png=png_bytes(img), figure_png=png_bytes(figure), labels=None if labels is None else tuple(labels)
        )

    def redraw(
        self,
        values: np.ndarray,
        *,
        signed: bool,
        scale: float,
        display: str,
        background: np.ndarray | None,
        upscale: int | None,
    ) -> Image.Image | None:
        return None  # a graph is drawn from its labels, which a redraw is not given: the figure's PNG is its view

    def chart(
        self,
        values: np.ndarray,
        raw: Any,
        *,
        signed: bool,
        scale: float,
        units: str,
        channels: Any = None,
        step_name: str = "step",
        labels: Sequence[str] | None = None,
    ) -> alt.Chart | None:
        g = parse_graph_labels(labels)
        if g is None or np.ndim(values) != 1:  # the heatmap's node x feature values: its PNG shows them
            return None
        return graph_chart(g, np.asarray(values, np.float32), signed=signed, scale=scale, units=units)

    def figure_json(self, values: np.ndarray, labels: Sequence[str] | None) -> dict[str, Any]:
        v = np.asarray(values, np.float64)
        cells = [[float(a) if np.isfinite(a) else None for a in row] for row in v] if v.ndim == 2 else None
        flat = [float(a) if np.isfinite(a) else None for a in v.ravel()] if v.ndim != 2 else None
        return {"words": list(labels or ()), "attributions": flat if cells is None else cells}

    def values_from_json(self, d: dict[str, Any]) -> np.ndarray | None:
        if "attributions" not in d:
            return None
        return np.asarray(d["attributions"], dtype=np.float64).astype(np.float32)

    # ---- metrics (the maps: RowMaps) -------------------------------------------------------------------------
    def perturbation_curve(
        self, bundle: ModelBundle, raw: Any, attributions: Any, *, mode: Mode, steps: int, batch_size: int = 256
    ) -> CurveResult:
        """The subgraph's edges removed in order of their value, highest first (deletion), or put back into the graph
        without them (insertion); graph_curves.py."""
        graphs = self.checked(bundle, raw)
        return graph_perturbation_curve(bundle, graphs, attributions, mode=mode, steps=steps, batch_size=batch_size)


GRAPH_ADAPTER = ADAPTERS.register(
    extend(
        GRAPH,
        GraphAdapter,
        displays=("graph", "heatmap"),
        metrics=(
            "deletion_auc",
            "insertion_auc",
            "edge_auc",
            "fidelity_plus",
            "fidelity_minus",
            "characterization",
            "sparseness",
            "complexity",
            "random_logit",
            "seconds",
        ),
        region="edge",
        gradient_unit="standardised feature",
        map_files="png",
        stores_values=True,
        attackable=False,
    )
)
