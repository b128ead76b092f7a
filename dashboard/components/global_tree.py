"""The surrogate tree drawn for the page (Graphviz, laid out and scaled by the browser, so it stays readable at any
width): each split names its column and the training rows reaching it by the network's class, each branch is
labelled with its condition, each leaf is coloured by the class the tree predicts there and paler the more mixed its
rows are."""

from __future__ import annotations

from collections.abc import Sequence

from xaidash.explainers.tabular.surrogate import Surrogate, TreeNode

# matplotlib's tab10 (the colours of glob's PNG of the same tree) and their names, for the caption
PALETTE = (
    ("#1f77b4", "blue"),
    ("#ff7f0e", "orange"),
    ("#2ca02c", "green"),
    ("#d62728", "red"),
    ("#9467bd", "purple"),
    ("#8c564b", "brown"),
    ("#e377c2", "pink"),
    ("#7f7f7f", "grey"),
    ("#bcbd22", "olive"),
    ("#17becf", "cyan"),
)
SPLIT_FILL = "#eeeeee"


def _tint(hex_colour: str, strength: float) -> str:
    """`hex_colour` mixed with white: strength 1 is the colour itself, 0 white."""
    rgb = [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]
    mixed = [round(255 - (255 - c) * strength) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in mixed)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _counts(node: TreeNode) -> str:
    """'773 / 827': the node's training rows per class, in the classes' order (the caption names it)."""
    return " / ".join(str(c) for c in node.counts)


def class_colour(classes: Sequence[str], name: str) -> tuple[str, str]:
    """(hex, colour name) of a class's leaves."""
    return PALETTE[list(classes).index(name) % len(PALETTE)]


def _node(node: TreeNode, classes: Sequence[str]) -> str:
    if node.yes is None:
        fill = _tint(class_colour(classes, node.predicted)[0], 0.2 + 0.6 * node.purity)
        label = f"→ {node.predicted} ({node.purity:.0%})\n{node.rows} rows: {_counts(node)}"
    else:
        fill = SPLIT_FILL
        label = f"{node.column}\n{node.rows} rows: {_counts(node)}"
    return f"  n{node.id} [label={_quote(label)}, fillcolor={_quote(fill)}];"


def tree_dot(surrogate: Surrogate, classes: Sequence[str]) -> str:
    """The tree in Graphviz's DOT language."""
    by_id = {n.id: n for n in surrogate.nodes}
    lines = [
        "digraph surrogate {",
        "  rankdir=LR; nodesep=0.15; ranksep=0.35;",  # left to right: a deep tree grows down the page, not off it
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11, color="#555555"];',
        '  edge [fontname="Helvetica", fontsize=10, color="#777777"];',
    ]
    lines += [_node(n, classes) for n in surrogate.nodes]
    for n in surrogate.nodes:
        for child in (n.yes, n.no):
            if child is not None:
                lines.append(f"  n{n.id} -> n{child} [label={_quote(' ' + by_id[child].condition + ' ')}];")
    lines.append("}")
    return "\n".join(lines)


def colour_key(classes: Sequence[str]) -> str:
    """'negative: blue, positive: orange'."""
    return ", ".join(f"{name}: {class_colour(classes, name)[1]}" for name in classes)
