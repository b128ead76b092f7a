"""The surrogate tree drawn for the page (Graphviz, laid out and scaled by the browser, so it stays readable at any
width): each split names its column and the training rows reaching it by the network's class, each branch is
labelled with its condition, each leaf is coloured by the class the tree predicts there and paler the more mixed its
rows are. A regression tree (a model that predicts a number) has no classes: each box says its training rows and the
spread (±, one standard deviation) of the network's predictions among them, and each leaf the value it predicts, in
the target's units, its blue the deeper the higher that value is among the leaves'."""

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
VALUE_COLOUR = PALETTE[0]  # a regression tree's leaves: pale (the lowest leaf value) to deep (the highest)


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


def _value_range(surrogate: Surrogate) -> tuple[float, float]:
    """The lowest and highest value a regression tree's leaves predict."""
    values = [n.value for n in surrogate.nodes if n.yes is None and n.value is not None]
    return (min(values), max(values)) if values else (0.0, 0.0)


def _value_node(node: TreeNode, low: float, high: float) -> str:
    """A regression tree's box: the column split on or the predicted value, the rows and the network's spread."""
    rows = f"{node.rows} rows, ± {node.spread or 0.0:.3g}"
    if node.yes is None:
        where = ((node.value or 0.0) - low) / (high - low) if high > low else 0.5
        fill = _tint(VALUE_COLOUR[0], 0.1 + 0.6 * where)  # at most 0.7: the black text stays readable
        label = f"→ {node.predicted}\n{rows}"
    else:
        fill = SPLIT_FILL
        label = f"{node.column}\n{rows}"
    return f"  n{node.id} [label={_quote(label)}, fillcolor={_quote(fill)}];"


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
    if surrogate.kind == "values":
        low, high = _value_range(surrogate)
        lines += [_value_node(n, low, high) for n in surrogate.nodes]
    else:
        lines += [_node(n, classes) for n in surrogate.nodes]
    for n in surrogate.nodes:
        for child in (n.yes, n.no):
            if child is not None:
                lines.append(f"  n{n.id} -> n{child} [label={_quote(' ' + by_id[child].condition + ' ')}];")
    lines.append("}")
    return "\n".join(lines)


def value_key(surrogate: Surrogate) -> str:
    """'pale blue: the lowest leaf, disease progression 76.5; deep blue: the highest, disease progression 246.5' (the
    leaves' own texts: the value with the target's name and unit)."""
    leaves = sorted((n for n in surrogate.nodes if n.yes is None and n.value is not None), key=lambda n: n.value or 0.0)
    if not leaves:
        return ""
    name = VALUE_COLOUR[1]
    return f"pale {name}: the lowest leaf, {leaves[0].predicted}; deep {name}: the highest, {leaves[-1].predicted}"


def colour_key(classes: Sequence[str]) -> str:
    """'negative: blue, positive: orange'."""
    return ", ".join(f"{name}: {class_colour(classes, name)[1]}" for name in classes)
