"""Drawing a graph's map (registers nothing): the explained subgraph laid out once per structure (networkx's spring
layout, seed 0, cached, so every method's map of one input has its nodes in the same places), nodes filled and edges
coloured and widened by their values on the map's colour scale, the node asked about ringed in black, the ground-truth
motif outlined in green ('graph'); the node x feature values as a heatmap ('heatmap'); and the interactive Altair chart
a page shows (hovering a node gives its id, features and value)."""

from __future__ import annotations

from functools import lru_cache

import altair as alt
import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from PIL import Image

from xaidash.explainers.figures.scales import colorize
from xaidash.explainers.modalities.graph_maps import GraphLayout
from xaidash.explainers.modalities.series_draw import DPI, _image

WIDTH_PX = 560  # the drawn graph's side at upscale 224; the enlarged view scales it
MOTIF_COLOUR = "#1a9641"  # the ground truth's outline: green, apart from both colour maps
ASKED_COLOUR = "#000000"
RAMP_STOPS = 11


@lru_cache(maxsize=64)
def layout(structure: tuple[tuple[int, ...], tuple[tuple[int, int], ...]]) -> np.ndarray:
    """(n, 2) positions in [0, 1] of a subgraph's nodes (ids, edges as position pairs): networkx's spring layout with
    seed 0, computed once per structure."""
    import networkx as nx

    nodes, edges = structure
    g = nx.Graph()
    g.add_nodes_from(range(len(nodes)))
    g.add_edges_from(edges)
    if len(nodes) == 1:
        return np.full((1, 2), 0.5)
    pos = nx.spring_layout(g, seed=0, k=1.5 / np.sqrt(len(nodes)))
    p = np.array([pos[i] for i in range(len(nodes))], np.float64)
    lo, span = p.min(0), np.ptp(p, 0)
    return (p - lo) / np.where(span > 0, span, 1.0) * 0.9 + 0.05


def undirected(g: GraphLayout, edge_values: np.ndarray) -> tuple[list[tuple[int, int]], np.ndarray, list[bool]]:
    """Each pair of nodes joined by an edge once: (pairs, the mean of its directions' values, whether any direction
    is in the motif)."""
    seen: dict[tuple[int, int], list[int]] = {}
    for k, (a, b) in enumerate(g.edges):
        seen.setdefault((min(a, b), max(a, b)), []).append(k)
    pairs = list(seen)
    values = np.array([float(np.mean(edge_values[seen[p]])) for p in pairs], np.float32)
    motif = [any(g.motif_edges[k] for k in seen[p]) for p in pairs]
    return pairs, values, motif


def draw_graph(g: GraphLayout, values: np.ndarray, *, signed: bool, scale: float, width: int = WIDTH_PX) -> Image.Image:
    """The subgraph with nodes and edges coloured by the map (edges also widened by |value| / scale)."""
    node_v, edge_v = g.split(values)
    pos = layout(g.structure)
    s = scale if scale > 0 else None
    keys = _keys(g)
    top = 0.92 if keys else 0.98  # a strip above the graph for the key, clear of its nodes
    fig = Figure(figsize=(width / DPI, width / DPI), dpi=DPI)
    ax = fig.add_axes((0.01, 0.01, 0.98, top))
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    pairs, pair_v, motif = undirected(g, np.nan_to_num(edge_v))
    big = len(g.nodes) > 60  # a large neighbourhood: smaller marks, no ids
    if pairs:
        segments = [(pos[a], pos[b]) for a, b in pairs]
        strength = np.clip(np.abs(pair_v) / (scale if scale > 0 else 1.0), 0, 1)
        halo = [seg for seg, m in zip(segments, motif, strict=True) if m]
        ax.add_collection(LineCollection(halo, colors=MOTIF_COLOUR, linewidths=7.0, alpha=0.45, zorder=1))
        colours = colorize(pair_v, signed, s)
        widths = 0.8 + 3.7 * strength
        # a grey rim under each edge: an edge near 0 (white on a signed scale) is still seen on the white page
        ax.add_collection(LineCollection(segments, colors="#8c8c8c", linewidths=widths + 1.2, zorder=1.5))
        ax.add_collection(LineCollection(segments, colors=colours, linewidths=widths, zorder=2))
    size = 24.0 if big else 260.0
    fills = colorize(np.nan_to_num(node_v), signed, s)
    outline = [MOTIF_COLOUR if m else "#666666" for m in g.motif_nodes]
    lw = [2.6 if m else 0.6 for m in g.motif_nodes]
    ax.scatter(pos[:, 0], pos[:, 1], s=size, c=fills, edgecolors=outline, linewidths=lw, zorder=3)
    if g.asked is not None:  # on top of everything, haloed in white: found at once even in a crowd of nodes
        a, ring = pos[g.asked], max(size * 2.6, 420.0)
        ax.scatter([a[0]], [a[1]], s=ring, facecolors="none", edgecolors="white", linewidths=6.0, zorder=6)
        ax.scatter([a[0]], [a[1]], s=ring, facecolors="none", edgecolors=ASKED_COLOUR, linewidths=2.6, zorder=7)
    if not big:
        for i, v in enumerate(g.nodes):
            ax.annotate(str(v), pos[i], fontsize=7, ha="center", va="center", zorder=5, color=_ink(fills[i]))
    if keys:
        fig.legend(handles=keys, loc="upper center", ncol=len(keys), fontsize=9, frameon=False, handletextpad=0.3)
    return _image(fig)


def _ink(rgb: np.ndarray) -> str:
    """Black on a light fill, white on a dark one."""
    return "black" if float(np.dot(rgb[:3], (0.299, 0.587, 0.114))) > 0.5 else "white"


def _keys(g: GraphLayout) -> list[Line2D]:
    keys = []
    if g.asked is not None:
        keys.append(_key("node explained", "none", ASKED_COLOUR, 13))
    if any(g.motif_nodes) or any(g.motif_edges):
        keys.append(_key("motif (ground truth)", "white", MOTIF_COLOUR, 9))
    return keys


def _key(label: str, face: str, edge: str, size: float) -> Line2D:
    return Line2D([], [], marker="o", linestyle="", markersize=size, markerfacecolor=face, markeredgecolor=edge,
                  markeredgewidth=2.2, label=label)  # fmt: skip


def draw_heatmap(
    g: GraphLayout, per_feature: np.ndarray, *, signed: bool, scale: float, width: int = WIDTH_PX
) -> Image.Image:
    """Feature x node: one row per node feature (one row, 'node value', where a method scores no features), one column
    per node of the subgraph, the explained node's and the motif's columns marked under the axis."""
    m = np.asarray(per_feature, np.float32)
    rows = m.T if m.ndim == 2 else m.reshape(1, -1)
    names = [k for k, _ in g.features[0]] if g.features and m.ndim == 2 else []
    if len(names) != len(rows):
        names = [f"feature {i}" for i in range(len(rows))] if m.ndim == 2 else ["node value"]
    height = 1.2 + 0.22 * len(rows)
    fig = Figure(figsize=(width / DPI, height), dpi=DPI)
    ax = fig.add_subplot()
    cols = rows.shape[1]
    ax.imshow(colorize(np.nan_to_num(rows), signed, scale if scale > 0 else None), aspect="auto",
              interpolation="nearest", extent=(-0.5, cols - 0.5, len(rows) - 0.5, -0.5))  # fmt: skip
    step = max(1, cols // 30)
    ticks = list(range(0, cols, step))
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(g.nodes[i]) if i < len(g.nodes) else str(i) for i in ticks], fontsize=7, rotation=90)
    for i, label in zip(ticks, ax.get_xticklabels(), strict=True):
        if i == g.asked:
            label.set_fontweight("bold")
        elif i < len(g.motif_nodes) and g.motif_nodes[i]:
            label.set_color(MOTIF_COLOUR)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(names if len(rows) <= 40 else ["" for _ in names], fontsize=7)
    ax.set_xlabel("node (bold: explained; green: motif)", fontsize=8)
    fig.subplots_adjust(left=min(0.3, 0.05 + 0.012 * max((len(t) for t in names), default=4)), right=0.98,
                        top=1 - 0.15 / height, bottom=0.75 / height)  # fmt: skip
    return _image(fig)


def _ramp(signed: bool, span: float) -> tuple[list[float], list[str]]:
    """The PNG's colour map sampled at RAMP_STOPS values: the chart's colours are the drawing's."""
    domain = [float(d) for d in np.linspace(-span if signed else 0.0, span, RAMP_STOPS)]
    return domain, [to_hex(tuple(colorize(np.array([d]), signed, span)[0][:3])) for d in domain]


def graph_chart(
    g: GraphLayout, values: np.ndarray, *, signed: bool, scale: float, units: str, width: int = 360
) -> alt.Chart:
    """Edges as lines and nodes as circles at the drawing's positions, on the drawing's colour scale; hovering a node
    shows its id, role, features and value, hovering an edge its nodes and value."""
    node_v, edge_v = g.split(values)
    pos = layout(g.structure)
    span = float(scale) if scale > 0 else float(np.nanmax(np.abs(values)) if np.size(values) else 1.0) or 1.0
    domain, ramp = _ramp(signed, span)
    colour_scale = alt.Scale(domain=domain, range=ramp, clamp=True, interpolate="rgb")
    pairs, pair_v, motif = undirected(g, np.nan_to_num(edge_v))
    edges = pd.DataFrame(
        {
            "x": [pos[a][0] for a, _ in pairs],
            "y": [pos[a][1] for a, _ in pairs],
            "x2": [pos[b][0] for _, b in pairs],
            "y2": [pos[b][1] for _, b in pairs],
            "edge": [
                f"{g.nodes[a]}–{g.nodes[b]}" + (" (motif)" if m else "")
                for (a, b), m in zip(pairs, motif, strict=False)
            ],
            "value": pair_v.astype(float),
            "width": 1.0 + 4.0 * np.clip(np.abs(pair_v) / span, 0, 1),
        }
    )
    roles = [", ".join(r for r, on in (("explained", i == g.asked), ("motif", g.motif_nodes[i])) if on) or "–"
             for i in range(len(g.nodes))]  # fmt: skip
    nodes = pd.DataFrame(
        {
            "x": pos[:, 0],
            "y": pos[:, 1],
            "node": list(g.nodes),
            "role": roles,
            "features": ["; ".join(f"{k}={v:.4g}" for k, v in f) or "all 0" for f in g.features],
            "value": node_v.astype(float),
            "ring": [2.5 if i == g.asked else 1.8 if g.motif_nodes[i] else 0.5 for i in range(len(g.nodes))],
            "outline": [
                ASKED_COLOUR if i == g.asked else MOTIF_COLOUR if g.motif_nodes[i] else "#666666"
                for i in range(len(g.nodes))
            ],
        }
    )
    axis = alt.Scale(domain=[0, 1])
    lines = (
        alt.Chart(edges)
        .mark_rule()
        .encode(
            x=alt.X("x:Q", axis=None, scale=axis), y=alt.Y("y:Q", axis=None, scale=axis), x2="x2:Q", y2="y2:Q",
            color=alt.Color("value:Q", scale=colour_scale, legend=None),
            strokeWidth=alt.StrokeWidth("width:Q", scale=None, legend=None),
            tooltip=[alt.Tooltip("edge:N"), alt.Tooltip("value:Q", format=".4g", title=units or "value")],
        )
    )  # fmt: skip
    circles = (
        alt.Chart(nodes)
        .mark_circle(size=160 if len(g.nodes) <= 60 else 40, opacity=1)
        .encode(
            x=alt.X("x:Q", axis=None, scale=axis), y=alt.Y("y:Q", axis=None, scale=axis),
            color=alt.Color("value:Q", scale=colour_scale, legend=None),
            stroke=alt.Stroke("outline:N", scale=None), strokeWidth=alt.StrokeWidth("ring:Q", scale=None),
            tooltip=[alt.Tooltip("node:Q"), alt.Tooltip("role:N"), alt.Tooltip("features:N"),
                     alt.Tooltip("value:Q", format=".4g", title=units or "value")],
        )
    )  # fmt: skip
    return (lines + circles).properties(width=width, height=width).configure_view(stroke=None)
