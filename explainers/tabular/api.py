"""The global view of a table model, one entry point for the page and `xaidash global`: permutation importance of every
column, partial dependence and ICE of the chosen columns (by default the most important ones) and of a pair, a
surrogate tree fitted to the network's predictions with its fidelity, and the glassbox references beside the
network. Everything runs on the held-out (test) split's rows except the fits, which use the training split the
network was trained on.

A model that predicts a number (`bundle.regression`) is read in the target's units throughout: partial dependence
and ICE of its predicted value, permutation importance as the drop in R², global SHAP in units, a regression tree as
the surrogate (fidelity: R² against the network's predictions) and ridge regression and a regression tree as the
glassboxes (test R² beside the network's). `GlobalReport.task`, `score_name` and `value_axis` say which."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.registry import TableColumn, TableSplit, load_split
from xaidash.explainers.guard import guarded
from xaidash.explainers.params import ExplainError
from xaidash.explainers.tabular.glassbox import (
    DEFAULT_TREE_DEPTH,
    GlassboxComparison,
    compare_glassboxes,
    compare_value_glassboxes,
)
from xaidash.explainers.tabular.grids import DEFAULT_POINTS, GridKind, column_grid
from xaidash.explainers.tabular.importance import (
    DEFAULT_REPEATS,
    REGRESSION_SCORINGS,
    SCORINGS,
    PermutationImportance,
    Scoring,
    permutation_importance,
)
from xaidash.explainers.tabular.passes import Predict, bundle_predict, default_batch_rows, probabilities
from xaidash.explainers.tabular.pdp import PairResult, PDPResult, pair_dependence, partial_dependence, value_units
from xaidash.explainers.tabular.request import column_index, column_indices, pair_indices, table_columns, target_index
from xaidash.explainers.tabular.shap_global import (
    DEFAULT_METHOD,
    DEFAULT_SHAP_ROWS,
    GlobalShap,
    check_method,
    global_shap,
)
from xaidash.explainers.tabular.surrogate import DEFAULT_DEPTH, Surrogate, fit_surrogate, fit_value_surrogate
from xaidash.models.bundle import ModelBundle

DEFAULT_ROWS = 1000  # held-out rows swept by the partial dependence and shuffled by the importance
DEFAULT_TOP = 4  # columns given a partial dependence plot when none are named: the most important ones
PAIR_POINTS = 20  # grid points per column of a pair's map (20 x 20 values per row)

Progress = Callable[[float, str], None]


@dataclass
class GlobalOptions:
    """What a global report computes; the defaults are the page's and the command's."""

    columns: Sequence[str] | None = None  # None: the `top` most important columns
    pair: Sequence[str] | None = None  # two column names for a 2-D partial dependence, or None
    target: str | int | None = None  # a class name or index; None: the second of two classes, else the first
    rows: int = DEFAULT_ROWS
    top: int = DEFAULT_TOP
    grid_points: int = DEFAULT_POINTS
    grid_kind: GridKind = "even"
    pair_points: int = PAIR_POINTS
    repeats: int = DEFAULT_REPEATS
    scoring: Scoring | None = None  # None: log_loss for a classifier, r2 for a model that predicts a number
    surrogate_depth: int = DEFAULT_DEPTH
    tree_depth: int = DEFAULT_TREE_DEPTH
    seed: int = 0
    batch_rows: int = 0  # rows per model pass; 0: the device's default (passes.default_batch_rows)
    shap_rows: int = DEFAULT_SHAP_ROWS  # rows explained for global SHAP (a seeded pick of the swept rows); 0: none
    shap_method: str = DEFAULT_METHOD  # the table method whose per-row attributions global SHAP sums up


@dataclass
class GlobalReport:
    """Everything the global view shows. `rows` held-out rows were swept and shuffled; `units` is what a partial
    dependence value is; `seconds` the time of each part. `task`: 'classes', or 'values' for a model that predicts a
    number (its `target` is the target's name, `classes` that one name); `score_name` what `network_accuracy` holds
    ('accuracy' or 'R²', on the test split); `value_axis` a prediction's short name ('P(malignant)', 'predicted
    disease progression'); `target_unit` the target's declared unit ('' for classes or none declared)."""

    model: str
    dataset: str
    target: str
    target_index: int
    classes: list[str]
    units: str
    rows: int
    device: str
    network_accuracy: float
    importance: PermutationImportance
    dependence: list[PDPResult]
    pair: PairResult | None
    surrogate: Surrogate
    glassbox: GlassboxComparison
    shap: GlobalShap | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    task: str = "classes"
    score_name: str = "accuracy"
    value_axis: str = ""
    target_unit: str = ""

    @property
    def network_score(self) -> float:
        """The network's test score `score_name` names (accuracy, or R² for a number to predict)."""
        return self.network_accuracy


@dataclass
class _Splits:
    train: TableSplit
    test: TableSplit


def _splits(bundle: ModelBundle) -> _Splits:
    name = bundle.info.name
    try:
        train, test = load_split(name, "train"), load_split(name, "test")
    except DatasetError as err:
        raise ExplainError(f"Cannot load the splits of {name}: {err}") from None
    if not isinstance(train, TableSplit) or not isinstance(test, TableSplit) or not len(train) or not len(test):
        raise ExplainError(f"{name} has no table rows in both its training and test splits.")
    return _Splits(train, test)


def _sample(rows: torch.Tensor, count: int, seed: int) -> torch.Tensor:
    """At most `count` of the rows, a seeded pick in their order."""
    if count >= len(rows):
        return torch.arange(len(rows))
    return torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))[:count].sort().values


def _dependence(
    predict: Predict,
    rows: torch.Tensor,
    columns: Sequence[TableColumn],
    chosen: Sequence[int],
    target: int,
    target_name: str,
    options: GlobalOptions,
    units: tuple[str, str],
) -> list[PDPResult]:
    out = []
    for j in chosen:
        grid, labels = column_grid(columns[j], rows[:, j], options.grid_points, options.grid_kind)
        out.append(
            partial_dependence(
                predict,
                rows,
                j,
                grid,
                target,
                name=columns[j].name,
                target_name=target_name,
                labels=labels,
                batch_rows=options.batch_rows,
                units=units,
            )
        )
    return out


def _pair(
    predict: Predict,
    rows: torch.Tensor,
    columns: Sequence[TableColumn],
    pair: tuple[int, int],
    target: int,
    target_name: str,
    options: GlobalOptions,
    units: tuple[str, str],
) -> PairResult:
    made = [column_grid(columns[j], rows[:, j], options.pair_points, options.grid_kind) for j in pair]
    return pair_dependence(
        predict,
        rows,
        pair,
        (made[0][0], made[1][0]),
        target,
        names=(columns[pair[0]].name, columns[pair[1]].name),
        target_name=target_name,
        labels=(made[0][1], made[1][1]),
        batch_rows=options.batch_rows,
        units=units,
    )


def _check(options: GlobalOptions) -> None:
    for name, low in (
        ("rows", 1),
        ("top", 1),
        ("grid_points", 2),
        ("pair_points", 2),
        ("repeats", 1),
        ("shap_rows", 0),
    ):
        if int(getattr(options, name)) < low:
            raise ExplainError(f"{name} must be at least {low}, not {getattr(options, name)}.")
    if not 1 <= options.surrogate_depth <= 8:
        raise ExplainError(f"The surrogate tree's depth must be 1..8 (readable rules), not {options.surrogate_depth}.")


def scorings(bundle: ModelBundle) -> tuple[Scoring, ...]:
    """The permutation importance scores that apply to the model, its default last: accuracy and log-loss for a
    classifier, R² for a number to predict (`importance.UNITS` words each)."""
    return SCORINGS if bundle.regression is None else REGRESSION_SCORINGS


def _scoring(bundle: ModelBundle, scoring: Scoring | None) -> Scoring:
    """The permutation importance's score: the one asked, checked against what the model predicts; by default
    log-loss for a classifier, R² for a number to predict."""
    allowed = scorings(bundle)
    if scoring is None:
        return allowed[-1]
    if scoring not in allowed:
        what = "a number" if bundle.regression is not None else "classes"
        raise ExplainError(
            f"Scoring {scoring!r} does not apply to a model that predicts {what}; choose {', '.join(allowed)}."
        )
    return scoring


def _value_units(bundle: ModelBundle, target: int) -> tuple[str, str]:
    """(units, axis) of a predicted value: a class's probability, or the target's value in its units."""
    return value_units(bundle.info.classes[target], bundle.regression)


def _predicted(bundle: ModelBundle, predict: Predict, rows: torch.Tensor, batch_rows: int) -> np.ndarray:
    """The network's predicted class of each raw row, or its predicted value (a number to predict)."""
    out = probabilities(predict, rows, batch_rows)
    return (out[:, 0] if bundle.regression is not None else out.argmax(1)).cpu().numpy()


@dataclass
class _NetworkSide:
    """What the network's passes give: the rows swept, the importances, the dependence, and its predicted classes."""

    rows: int
    swept: torch.Tensor  # the held-out rows swept and shuffled (raw, on the CPU)
    chosen: list[int]
    importance: PermutationImportance
    dependence: list[PDPResult]
    pair: PairResult | None
    train_predicted: np.ndarray
    test_predicted: np.ndarray


def _network_side(
    bundle: ModelBundle,
    splits: _Splits,
    chosen: list[int] | None,
    pair: tuple[int, int] | None,
    target: int,
    options: GlobalOptions,
    seconds: dict[str, float],
    say: Progress,
) -> _NetworkSide:
    """Every pass through the network, on its device, in eval mode and seeded."""
    columns = table_columns(bundle)
    names, target_name = [c.name for c in columns], bundle.info.classes[target]
    with guarded(bundle.model, options.seed, bundle.device), torch.no_grad():
        predict = bundle_predict(bundle)
        test = splits.test.rows.to(bundle.device, torch.float32)
        picked = _sample(test, options.rows, options.seed).to(bundle.device)
        rows, labels = test[picked], splits.test.labels.to(bundle.device)[picked]
        say(0.05, f"permutation importance of {len(names)} columns over {len(rows)} rows")
        start = time.perf_counter()
        importance = permutation_importance(
            predict,
            rows,
            labels,
            names,
            repeats=options.repeats,
            seed=options.seed,
            scoring=_scoring(bundle, options.scoring),
            batch_rows=options.batch_rows,
        )
        seconds["importance"] = time.perf_counter() - start
        chosen = chosen or [names.index(c.column) for c in importance.ranked()[: options.top]]
        say(0.4, f"partial dependence of {len(chosen)} columns" + (" and a pair" if pair else ""))
        start = time.perf_counter()
        units = _value_units(bundle, target)
        dependence = _dependence(predict, rows, columns, chosen, target, target_name, options, units)
        paired = _pair(predict, rows, columns, pair, target, target_name, options, units) if pair else None
        seconds["partial_dependence"] = time.perf_counter() - start
        train = splits.train.rows.to(bundle.device, torch.float32)
        return _NetworkSide(
            rows=len(rows),
            swept=rows.cpu(),
            chosen=chosen,
            importance=importance,
            dependence=dependence,
            pair=paired,
            train_predicted=_predicted(bundle, predict, train, options.batch_rows),
            test_predicted=_predicted(bundle, predict, test, options.batch_rows),
        )


def _references(
    bundle: ModelBundle, splits: _Splits, net: _NetworkSide, options: GlobalOptions
) -> tuple[float, Surrogate, GlassboxComparison]:
    """The network's test score (accuracy, or R² for a number to predict), the surrogate tree fitted to its
    predictions and the glassboxes trained on the same split."""
    train_rows, test_rows = splits.train.rows.double().numpy(), splits.test.rows.double().numpy()
    train_labels, test_labels = splits.train.labels.numpy(), splits.test.labels.numpy()
    depth, seed = options.surrogate_depth, options.seed
    columns = table_columns(bundle)
    if bundle.regression is not None:
        y = test_labels.astype(np.float64)
        score = float(1.0 - ((net.test_predicted - y) ** 2).sum() / max(float(((y - y.mean()) ** 2).sum()), 1e-12))
        surrogate = fit_value_surrogate(
            train_rows, net.train_predicted, test_rows, net.test_predicted, y, columns, bundle.regression,
            depth=depth, seed=seed,
        )  # fmt: skip
        compare = compare_value_glassboxes
    else:
        score = float((net.test_predicted == test_labels).mean())
        surrogate = fit_surrogate(
            train_rows, net.train_predicted, test_rows, net.test_predicted, test_labels, columns,
            list(bundle.info.classes), depth=depth, seed=seed,
        )  # fmt: skip
        compare = compare_glassboxes
    glassbox = compare(
        (train_rows, train_labels),
        (test_rows, test_labels),
        columns,
        score,
        net.importance.means(),
        tree_depth=options.tree_depth,
        seed=seed,
    )
    return score, surrogate, glassbox


def global_report(
    bundle: ModelBundle, options: GlobalOptions | None = None, progress: Progress | None = None
) -> GlobalReport:
    """The global view of `bundle` (a model of table rows); see the module's docstring. ExplainError in one line for a
    model that does not read table rows, an unknown column, a pair of one column, or a class out of range."""
    options = options or GlobalOptions()
    say = progress or (lambda fraction, text: None)
    columns = table_columns(bundle)
    chosen = column_indices(columns, options.columns)
    pair = pair_indices(columns, options.pair)
    target = target_index(bundle, options.target)
    _check(options)
    _scoring(bundle, options.scoring)  # a score that does not fit the task is refused before any work
    if options.shap_rows:
        check_method(bundle, options.shap_method)
    options = replace(options, batch_rows=options.batch_rows or default_batch_rows(bundle.device))
    classes = list(bundle.info.classes)
    splits = _splits(bundle)
    seconds: dict[str, float] = {}
    net = _network_side(bundle, splits, chosen, pair, target, options, seconds, say)
    say(0.7, "surrogate tree and glassbox models")
    start = time.perf_counter()
    network_score, surrogate, glassbox = _references(bundle, splits, net, options)
    seconds["surrogate_and_glassbox"] = time.perf_counter() - start
    shap = None
    if options.shap_rows:
        say(0.85, f"{options.shap_method} for {min(options.shap_rows, net.rows)} rows")
        start = time.perf_counter()
        picked = _sample(net.swept, options.shap_rows, options.seed)
        shap = global_shap(bundle, net.swept[picked], target, net.chosen, method=options.shap_method, seed=options.seed)
        seconds["shap"] = time.perf_counter() - start
    say(1.0, "done")
    return GlobalReport(
        model=bundle.spec.name,
        dataset=bundle.info.name,
        target=classes[target],
        target_index=target,
        classes=classes,
        units=_value_units(bundle, target)[0],
        rows=net.rows,
        device=str(bundle.device),
        network_accuracy=network_score,
        importance=net.importance,
        dependence=net.dependence,
        pair=net.pair,
        surrogate=surrogate,
        glassbox=glassbox,
        shap=shap,
        seconds=seconds,
        task="classes" if bundle.regression is None else "values",
        score_name="accuracy" if bundle.regression is None else "R²",
        value_axis=_value_units(bundle, target)[1],
        target_unit="" if bundle.regression is None else bundle.regression.unit,
    )


def _swept_rows(bundle: ModelBundle, options: GlobalOptions) -> torch.Tensor:
    """The held-out rows `global_report` sweeps (the same seeded pick), raw on the model's device."""
    test = _splits(bundle).test.rows.to(bundle.device, torch.float32)
    return test[_sample(test, options.rows, options.seed).to(bundle.device)]


def column_dependence(bundle: ModelBundle, column: str, options: GlobalOptions | None = None) -> PDPResult:
    """One column's partial dependence and ICE over the rows `global_report` sweeps, for a page that changes the
    column without computing the rest again. ExplainError in one line for a bad column or class."""
    options = options or GlobalOptions()
    columns = table_columns(bundle)
    j = column_index(columns, column)
    target = target_index(bundle, options.target)
    _check(options)
    options = replace(options, batch_rows=options.batch_rows or default_batch_rows(bundle.device))
    with guarded(bundle.model, options.seed, bundle.device), torch.no_grad():
        rows = _swept_rows(bundle, options)
        name, units = bundle.info.classes[target], _value_units(bundle, target)
        return _dependence(bundle_predict(bundle), rows, columns, [j], target, name, options, units)[0]


def pair_map(bundle: ModelBundle, pair: Sequence[str], options: GlobalOptions | None = None) -> PairResult:
    """The 2-D partial dependence of two different columns over the rows `global_report` sweeps."""
    options = options or GlobalOptions()
    columns = table_columns(bundle)
    found = pair_indices(columns, pair)
    if found is None:
        raise ExplainError("Name two columns for a pair.")
    target = target_index(bundle, options.target)
    _check(options)
    options = replace(options, batch_rows=options.batch_rows or default_batch_rows(bundle.device))
    with guarded(bundle.model, options.seed, bundle.device), torch.no_grad():
        rows = _swept_rows(bundle, options)
        name, units = bundle.info.classes[target], _value_units(bundle, target)
        return _pair(bundle_predict(bundle), rows, columns, found, target, name, options, units)
