"""A global surrogate: a shallow scikit-learn decision tree fitted to the NETWORK's predicted classes on the training
rows (not to the true labels), so its rules describe what the network does. Its fidelity is the share of held-out
rows where the tree predicts the class the network predicts: a rule set is only a description of the network as far
as that share goes.

A model that predicts a number gets a regression tree (DecisionTreeRegressor) fitted to the network's predicted
VALUES, and its fidelity is the R² of the tree's predictions against the network's on the held-out rows (1: the rules
reproduce the network's predictions; 0: no better than predicting their mean); each leaf predicts a value in the
target's units (`fit_value_surrogate`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics import r2_score
from sklearn.pipeline import Pipeline
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor, export_text

from xaidash.data.registry import RegressionTarget, TableColumn
from xaidash.explainers.tabular.encoding import encoded_names, encoded_owner, encoder

DEFAULT_DEPTH = 3
MAX_DEPTH = 8  # deeper trees are no longer readable as rules


@dataclass
class TreeNode:
    """One node, for drawing: `split` is its test (a leaf's is ""), `condition` what holds on the way from its parent
    (the root's is ""); `yes`/`no` the node where the test holds / fails; `counts` training rows per class reaching it
    (by the network's predicted class), `predicted` the tree's class there. A regression tree's node: `counts` empty,
    `predicted` its value as text, `value` that value in the target's units and `spread` the standard deviation of
    the network's predictions among its training rows (`purity` 1 - spread / the root's spread)."""

    id: int
    depth: int
    parent: int | None
    condition: str
    split: str
    column: str | None
    threshold: float | None
    yes: int | None
    no: int | None
    rows: int
    counts: list[int]
    predicted: str
    purity: float
    value: float | None = None
    spread: float | None = None


@dataclass
class Surrogate:
    """The tree, how faithfully it follows the network, and its rules. For a number to predict (`kind` 'values'):
    `fidelity` is R² against the network's predictions, `agree` 0 (no rows 'agree' on a number), `accuracy` the
    tree's R² against the true values; `fidelity_name` / `score_name` name them."""

    depth: int
    fidelity: float  # share of held-out rows where the tree and the network predict the same class (values: R²)
    agree: int
    held_out: int
    train_fidelity: float  # the same on the rows it was fitted to
    fitted_rows: int
    accuracy: float  # the tree's accuracy on the held-out rows' true labels (values: its R² against them)
    rules: str  # sklearn.tree.export_text with column and category names
    nodes: list[TreeNode]
    kind: str = "classes"  # 'classes' (a classification tree) or 'values' (a regression tree)
    fidelity_name: str = "agreement"  # 'agreement' (share of rows) or 'R²'
    score_name: str = "accuracy"  # what `accuracy` is: 'accuracy' or 'R²'

    def fidelity_text(self) -> str:
        """One line stating the fidelity as what it is."""
        if self.kind == "values":
            return (
                f"fidelity R² {self.fidelity:.3f}: the tree's predictions against the network's on {self.held_out} "
                "held-out rows (1: the rules reproduce the network; 0: no better than the network's mean prediction)"
            )
        return f"fidelity {self.fidelity:.3f} ({self.agree} of {self.held_out} held-out rows agree with the network)"

    def to_json(self) -> dict[str, list[str]]:
        """What the JSON adds to the fields: the rules one line per leaf."""
        return {"leaf_rules": self.leaf_rules()}

    def leaf_rules(self) -> list[str]:
        """One line per leaf: the conditions on the path to it and its class."""
        by_id = {n.id: n for n in self.nodes}
        lines = []
        for leaf in (n for n in self.nodes if n.yes is None):
            path, node = [], leaf
            while node.parent is not None:
                path.append(node.condition)
                node = by_id[node.parent]
            conditions = " and ".join(reversed(path)) or "always"
            if leaf.value is not None:
                lines.append(
                    f"if {conditions}: {leaf.predicted} ({leaf.rows} training rows; the network's predictions there "
                    f"spread ± {leaf.spread or 0.0:.4g})"
                )
                continue
            lines.append(
                f"if {conditions}: {leaf.predicted!r} ({leaf.rows} training rows, {leaf.purity:.0%} of them "
                "predicted so by the network)"
            )
        return lines


def _readable(name: str, column: TableColumn, threshold: float) -> tuple[str, str]:
    """(what holds on the `yes` branch, on the `no` branch) of the test `name <= threshold`."""
    if column.kind == "categorical":  # a one-hot feature `column=category` <= 0.5: the row is not of that category
        category = name.split("=", 1)[1]
        return f"{column.name} is not {category}", f"{column.name} is {category}"
    return f"{column.name} <= {threshold:.4g}", f"{column.name} > {threshold:.4g}"


def _walk(
    tree: DecisionTreeClassifier | DecisionTreeRegressor,
    columns: Sequence[TableColumn],
    outcome: Callable[[int], dict[str, Any]],
) -> list[TreeNode]:
    """A fitted tree's nodes in id order, each with its split in the columns' words; `outcome(i)` gives what node `i`
    predicts (counts, predicted, purity and, for a number, value and spread)."""
    t, names, owner = tree.tree_, encoded_names(columns), encoded_owner(columns)
    nodes: list[TreeNode] = []
    stack: list[tuple[int, int, int | None, str]] = [(0, 0, None, "")]
    while stack:
        i, depth, parent, condition = stack.pop()
        leaf = t.children_left[i] == -1
        split, column, threshold, yes_no = "", None, None, ("", "")
        if not leaf:
            f, threshold = int(t.feature[i]), float(t.threshold[i])
            column = columns[owner[f]].name
            yes_no = _readable(names[f], columns[owner[f]], threshold)
            split = f"{names[f]} <= {threshold:.4g}"
        nodes.append(
            TreeNode(
                id=i,
                depth=depth,
                parent=parent,
                condition=condition,
                split=split,
                column=column,
                threshold=threshold,
                yes=None if leaf else int(t.children_left[i]),
                no=None if leaf else int(t.children_right[i]),
                rows=int(t.n_node_samples[i]),
                **outcome(i),
            )
        )
        if not leaf:
            stack.append((int(t.children_right[i]), depth + 1, i, yes_no[1]))
            stack.append((int(t.children_left[i]), depth + 1, i, yes_no[0]))
    return sorted(nodes, key=lambda n: n.id)


def _nodes(tree: DecisionTreeClassifier, columns: Sequence[TableColumn], class_names: Sequence[str]) -> list[TreeNode]:
    """A classification tree's nodes: each predicts the class most of its training rows were predicted."""
    t = tree.tree_

    def outcome(i: int) -> dict[str, Any]:
        counts = np.zeros(len(class_names), dtype=np.int64)
        counts[tree.classes_] = np.rint(t.value[i, 0] / max(t.value[i, 0].sum(), 1e-12) * t.n_node_samples[i])
        top = int(counts.argmax())
        return {
            "counts": [int(c) for c in counts],
            "predicted": class_names[top],
            "purity": float(counts[top] / max(counts.sum(), 1)),
        }

    return _walk(tree, columns, outcome)


def _value_nodes(
    tree: DecisionTreeRegressor, columns: Sequence[TableColumn], target: RegressionTarget
) -> list[TreeNode]:
    """A regression tree's nodes: each predicts the mean of the network's values among its training rows."""
    t = tree.tree_
    root = float(np.sqrt(max(t.impurity[0], 0.0))) or 1.0

    def outcome(i: int) -> dict[str, Any]:
        value, spread = float(t.value[i, 0, 0]), float(np.sqrt(max(t.impurity[i], 0.0)))
        return {
            "counts": [],
            "predicted": f"{target.name} {target.value_text(value)}",
            "purity": max(0.0, 1.0 - spread / root),
            "value": value,
            "spread": spread,
        }

    return _walk(tree, columns, outcome)


def fit_surrogate(
    train_rows: np.ndarray,
    train_predicted: np.ndarray,
    test_rows: np.ndarray,
    test_predicted: np.ndarray,
    test_labels: np.ndarray,
    columns: Sequence[TableColumn],
    class_names: Sequence[str],
    *,
    depth: int = DEFAULT_DEPTH,
    seed: int = 0,
) -> Surrogate:
    """A depth-`depth` tree fitted to the network's classes `train_predicted` on `train_rows` (raw values), scored
    against the network's classes `test_predicted` on the held-out `test_rows`."""
    model = Pipeline(
        [
            ("encode", encoder(columns, scale=False)),
            ("tree", DecisionTreeClassifier(max_depth=depth, random_state=seed)),
        ]
    )
    model.fit(train_rows, train_predicted)
    tree: DecisionTreeClassifier = model.named_steps["tree"]
    on_test = model.predict(test_rows)
    agree = int((on_test == test_predicted).sum())
    names = [class_names[c] for c in tree.classes_]
    return Surrogate(
        depth=int(depth),
        fidelity=agree / max(len(test_rows), 1),
        agree=agree,
        held_out=len(test_rows),
        train_fidelity=float((model.predict(train_rows) == train_predicted).mean()),
        fitted_rows=len(train_rows),
        accuracy=float((on_test == test_labels).mean()),
        rules=export_text(tree, feature_names=encoded_names(columns), class_names=names, decimals=3),
        nodes=_nodes(tree, columns, class_names),
    )


def fit_value_surrogate(
    train_rows: np.ndarray,
    train_predicted: np.ndarray,
    test_rows: np.ndarray,
    test_predicted: np.ndarray,
    test_values: np.ndarray,
    columns: Sequence[TableColumn],
    target: RegressionTarget,
    *,
    depth: int = DEFAULT_DEPTH,
    seed: int = 0,
) -> Surrogate:
    """A depth-`depth` regression tree fitted to the network's predicted values `train_predicted` on `train_rows`
    (raw), its fidelity the R² of its predictions against the network's `test_predicted` on the held-out rows."""
    model = Pipeline(
        [
            ("encode", encoder(columns, scale=False)),
            ("tree", DecisionTreeRegressor(max_depth=depth, random_state=seed)),
        ]
    )
    model.fit(train_rows, train_predicted)
    tree: DecisionTreeRegressor = model.named_steps["tree"]
    on_test = model.predict(test_rows)
    return Surrogate(
        depth=int(depth),
        fidelity=float(r2_score(test_predicted, on_test)),
        agree=0,
        held_out=len(test_rows),
        train_fidelity=float(r2_score(train_predicted, model.predict(train_rows))),
        fitted_rows=len(train_rows),
        accuracy=float(r2_score(test_values, on_test)),
        rules=export_text(tree, feature_names=encoded_names(columns), decimals=3),
        nodes=_value_nodes(tree, columns, target),
        kind="values",
        fidelity_name="R²",
        score_name="R²",
    )
