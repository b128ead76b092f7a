"""The surrogate tree: fitted to the network's classes (not the labels), its fidelity counted on held-out rows, its
rules and drawing structure in the columns' and categories' own names."""

from __future__ import annotations

import numpy as np

from xaidash.data.registry import TableColumn
from xaidash.explainers.tabular.surrogate import fit_surrogate

COLUMNS = (
    TableColumn("age", low=-3.0, high=3.0),
    TableColumn("noise", low=-3.0, high=3.0),
    TableColumn("colour", kind="categorical", categories=("red", "green", "blue")),
)


def _rows(n: int, rng: np.random.Generator, gap: float = 0.0) -> np.ndarray:
    age = rng.uniform(gap, 3.0, n) * rng.choice([-1.0, 1.0], n)
    return np.column_stack([age, rng.normal(0, 1, n), rng.integers(0, 3, n)]).astype(np.float64)


def _network(rows: np.ndarray) -> np.ndarray:
    """The 'network': class 1 where age > 0, class 2 where the colour is blue and age <= 0, else class 0."""
    out = (rows[:, 0] > 0).astype(np.int64)
    out[(rows[:, 0] <= 0) & (rows[:, 2] == 2)] = 2
    return out


def test_fidelity_is_the_hand_counted_share_of_agreeing_held_out_rows() -> None:
    rng = np.random.default_rng(0)
    train, test = _rows(600, rng), _rows(100, rng, gap=0.5)  # held-out rows away from the split point
    test_network = _network(test)
    flipped = np.array([3, 17, 42, 58, 71, 80, 99])  # the network disagrees with any rule here: 7 of 100 rows
    test_network[flipped] = (test_network[flipped] + 1) % 3
    labels = np.zeros(100, dtype=np.int64)  # true labels: only the accuracy uses them
    s = fit_surrogate(train, _network(train), test, test_network, labels, COLUMNS, ("low", "high", "blue"), depth=2)
    assert s.held_out == 100 and s.agree == 93 and s.fidelity == 0.93
    assert s.train_fidelity == 1.0 and s.fitted_rows == 600
    assert s.accuracy == float((_network(test) == 0).mean()), "accuracy: the tree's classes against the true labels"


def test_rules_and_nodes_name_the_columns_and_categories() -> None:
    rng = np.random.default_rng(1)
    train, test = _rows(400, rng), _rows(50, rng)
    s = fit_surrogate(train, _network(train), test, _network(test), _network(test), COLUMNS, ("low", "high", "blue"))
    assert "age <= " in s.rules and "colour=blue" in s.rules and "class: blue" in s.rules
    assert "noise" not in s.rules, "the noise column sets nothing: a depth-3 tree should not split on it"
    root = s.nodes[0]
    assert root.parent is None and root.condition == "" and root.rows == 400 and sum(root.counts) == 400
    conditions = {n.condition for n in s.nodes}
    assert {"colour is blue", "colour is not blue"} <= conditions
    assert any(c.startswith("age <= ") for c in conditions) and any(c.startswith("age > ") for c in conditions)
    by_id = {n.id: n for n in s.nodes}
    for node in s.nodes:
        if node.yes is not None:
            assert node.no is not None and node.split and node.column in ("age", "colour")
            assert by_id[node.yes].rows + by_id[node.no].rows == node.rows
            assert by_id[node.yes].depth == node.depth + 1
        else:
            assert node.split == "" and node.predicted in ("low", "high", "blue")
    lines = s.leaf_rules()
    assert len(lines) == sum(n.yes is None for n in s.nodes)
    assert any("colour is blue" in line and "'blue'" in line for line in lines)


def test_a_network_that_predicts_one_class_gives_a_single_leaf() -> None:
    rng = np.random.default_rng(2)
    train, test = _rows(50, rng), _rows(10, rng)
    ones = np.ones(50, dtype=np.int64)
    s = fit_surrogate(train, ones, test, np.ones(10, dtype=np.int64), ones[:10], COLUMNS, ("a", "b", "c"))
    assert len(s.nodes) == 1 and s.nodes[0].predicted == "b" and s.fidelity == 1.0
    assert s.leaf_rules() == ["if always: 'b' (50 training rows, 100% of them predicted so by the network)"]
