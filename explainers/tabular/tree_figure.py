"""The surrogate tree drawn as boxes and arrows (matplotlib, as the other global figures): each split's test, each
branch's condition, each node's training rows by the network's class, leaves coloured by the class they predict
(the legend names the colours) and shaded by how pure they are (a pale leaf mixes classes). A regression tree's
leaves are coloured by the value they predict (a colour bar in the target's units) and say the spread (±, one standard
deviation) of the network's predictions among their training rows."""

from __future__ import annotations

import matplotlib
from matplotlib.axes import Axes
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from xaidash.explainers.tabular.figures import DPI, png_of
from xaidash.explainers.tabular.surrogate import Surrogate, TreeNode


def _positions(nodes: list[TreeNode]) -> dict[int, tuple[float, float]]:
    """(x, y) of each node: leaves spaced evenly left to right in the tree's order, a split above its children's
    middle, one row per depth."""
    by_id = {n.id: n for n in nodes}
    x: dict[int, float] = {}
    leaves = 0

    def place(i: int) -> float:
        nonlocal leaves
        node = by_id[i]
        if node.yes is None or node.no is None:
            x[i] = float(leaves)
            leaves += 1
        else:
            x[i] = (place(node.yes) + place(node.no)) / 2.0
        return x[i]

    place(nodes[0].id)
    return {i: (x[i], -float(by_id[i].depth)) for i in x}


def _box_text(node: TreeNode) -> str:
    if node.value is not None:
        head = node.split if node.yes is not None else f"→ {node.predicted}"
        return f"{head}\n{node.rows} rows, ± {node.spread or 0.0:.3g}"
    head = node.split if node.yes is not None else f"→ {node.predicted} ({node.purity:.0%})"
    return f"{head}\n{node.rows} rows: " + " / ".join(str(c) for c in node.counts)


def _value_colours(nodes: list[TreeNode]) -> tuple[Colormap, Normalize]:
    values = [n.value for n in nodes if n.value is not None and n.yes is None]
    low, high = min(values), max(values)
    return matplotlib.colormaps["viridis"], Normalize(low, high if high > low else low + 1.0)


def surrogate_png(surrogate: Surrogate, classes: list[str]) -> bytes:
    """The tree as a PNG: splits in grey boxes, leaves in their class's colour, paler the less pure."""
    nodes = surrogate.nodes
    where = _positions(nodes)
    leaves = sum(n.yes is None for n in nodes)
    depth = max(n.depth for n in nodes)
    fig = Figure(figsize=(max(6.0, 2.3 * leaves), 1.6 + 1.5 * (depth + 1)), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    colours = matplotlib.colormaps["tab10"]
    values = surrogate.kind == "values"
    cmap, norm = _value_colours(nodes) if values else (colours, Normalize(0, 1))
    for node in nodes:
        px, py = where[node.id]
        for child, word in ((node.yes, "yes"), (node.no, "no")):
            if child is None:
                continue
            cx, cy = where[child]
            ax.annotate("", (cx, cy + 0.18), (px, py - 0.18), arrowprops={"arrowstyle": "->", "color": "0.4"})
            ax.text(
                (px + cx) / 2,
                (py + cy) / 2,
                word,
                fontsize=7,
                color="0.3",
                ha="center",
                va="center",
                bbox={"boxstyle": "round", "fc": "white", "ec": "none", "pad": 0.1},
            )
        leaf = node.yes is None
        if values:
            face = cmap(norm(node.value or 0.0)) if leaf else "0.93"
        else:
            face = colours(classes.index(node.predicted) % 10) if leaf else "0.93"
        ax.text(
            px,
            py,
            _box_text(node),
            fontsize=7.5,
            ha="center",
            va="center",
            bbox={"boxstyle": "round", "fc": face, "alpha": 0.35 + 0.65 * node.purity if leaf else 1.0, "ec": "0.3"},
        )
    ax.set_xlim(-0.7, leaves - 0.3)
    ax.set_ylim(-depth - 0.5, 0.5)
    if values:
        _value_legend(fig, ax, surrogate, cmap, norm, classes)
        return png_of(fig)
    handles = [Patch(color=colours(i % 10), label=name) for i, name in enumerate(classes)]
    ax.legend(
        handles=handles, title="leaf: the class the tree predicts", loc="upper right", fontsize=7, title_fontsize=7
    )
    ax.set_title(
        f"Surrogate tree (depth {surrogate.depth}): fidelity {surrogate.fidelity:.1%} on {surrogate.held_out} "
        f"held-out rows; counts: training rows per class ({' / '.join(classes)}) by the network's prediction",
        fontsize=8,
    )
    return png_of(fig)


def _value_legend(
    fig: Figure, ax: Axes, surrogate: Surrogate, cmap: Colormap, norm: Normalize, names: list[str]
) -> None:
    """A regression tree's colour bar (the leaf's predicted value) and its title (fidelity as R²)."""
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, shrink=0.8)
    bar.set_label(f"leaf: the predicted {names[0]} (mean of the network's predictions)", fontsize=7)
    ax.set_title(
        f"Surrogate regression tree (depth {surrogate.depth}): fidelity R² {surrogate.fidelity:.3f} against the "
        f"network's predictions on {surrogate.held_out} held-out rows; ±: the network's spread in a node",
        fontsize=8,
    )
