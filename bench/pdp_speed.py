"""Partial dependence and ICE speed: xaidash's batched sweep against scikit-learn's
`partial_dependence(method="brute", kind="both")` calling the SAME network through a minimal estimator wrapper.

The network is a `tabular_mlp` built for `--dataset` (default `planted`) and seeded; its weights do not change the
time, and equal values are checked whatever they are. The rows are the first `--rows` rows of the training split
(then the test split); the grid is `--grid` points even over a column's training range, passed to scikit-learn as
`custom_values` so both sweep the same values. For each of `--columns` columns:

- xaidash: `explainers.tabular.pdp.partial_dependence` on the model's device: the rows x grid copies built there
  and scored in passes of 65,536 rows on a GPU, 4,096 on a CPU (`passes.default_batch_rows`);
- scikit-learn: one `predict_proba` per grid point through `NetworkEstimator` (raw rows -> the bundle's
  probabilities on the CPU, as any scikit-learn caller gets them); for a data set with a number to predict
  (`--dataset diabetes`, 442 rows: `--rows 442` at most) one `predict` per grid point through `NetworkRegressor`
  (the predicted values in the target's units), the values compared in those units.

It prints both times (best of `--repeats`, after a warm-up), the ratio (goal: >= 5x) and the largest |difference|
of the PDP and ICE values (should be ~0: float32 through both paths).

    python bench/pdp_speed.py --device cpu
    python bench/pdp_speed.py --device cuda --rows 1000 --grid 50
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from xaidash.data.argtypes import int_range
from xaidash.data.registry import TableSplit, get_info, load_split
from xaidash.explainers.guard import evaluating
from xaidash.explainers.tabular.grids import column_grid
from xaidash.explainers.tabular.passes import bundle_predict, default_batch_rows
from xaidash.explainers.tabular.pdp import PDPResult, partial_dependence
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import best_time, device_label, pick_device
from xaidash.models.registry import build_model, get_spec


class NetworkEstimator(ClassifierMixin, BaseEstimator):
    """The bundle's network as a fitted scikit-learn classifier: `predict_proba` of raw rows, nothing learned."""

    def __init__(self, bundle: ModelBundle | None = None) -> None:
        self.bundle = bundle

    def fit(self, x: np.ndarray, y: np.ndarray | None = None) -> NetworkEstimator:
        assert self.bundle is not None
        self.classes_ = np.arange(self.bundle.info.num_classes)
        self.n_features_in_ = len(self.bundle.info.columns)
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        assert self.bundle is not None
        return self.bundle.predict_proba(torch.as_tensor(np.asarray(x, dtype=np.float32))).numpy()

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.predict_proba(x).argmax(1))


class NetworkRegressor(RegressorMixin, BaseEstimator):
    """A regression network as a fitted scikit-learn regressor: `predict` gives its values in the target's units."""

    def __init__(self, bundle: ModelBundle | None = None) -> None:
        self.bundle = bundle

    def fit(self, x: np.ndarray, y: np.ndarray | None = None) -> NetworkRegressor:
        assert self.bundle is not None
        self.n_features_in_ = len(self.bundle.info.columns)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        assert self.bundle is not None
        return self.bundle.predict_proba(torch.as_tensor(np.asarray(x, dtype=np.float32)))[:, 0].numpy()


@dataclass
class Timing:
    column: str
    ours_s: float
    sklearn_s: float
    max_diff: float

    @property
    def ratio(self) -> float:
        return self.sklearn_s / self.ours_s if self.ours_s > 0 else float("inf")


def network(dataset: str, device: torch.device, seed: int = 0) -> ModelBundle:
    """A seeded `tabular_mlp` for the data set, in eval mode on `device`."""
    torch.manual_seed(seed)
    info = get_info(dataset)
    return ModelBundle(build_model("tabular_mlp", info).to(device).eval(), get_spec("tabular_mlp"), info, device)


def table_rows(dataset: str, n: int) -> torch.Tensor:
    """The first `n` raw rows of the training split, then the test split."""
    parts = []
    for split in ("train", "test"):
        s = load_split(dataset, split)
        assert isinstance(s, TableSplit)
        parts.append(s.rows)
    rows = torch.cat(parts)
    if n > len(rows):
        sys.exit(f"error: {dataset} has {len(rows)} rows; asked for {n}")
    return rows[:n].float()


def time_column(bundle: ModelBundle, rows: torch.Tensor, j: int, points: int, target: int, repeats: int) -> Timing:
    """Both sweeps of column `j` over the same grid: their best times and the largest |difference| of their values."""
    from sklearn.inspection import partial_dependence as sk_partial_dependence

    column = bundle.info.columns[j]
    grid, _ = column_grid(column, rows[:, j], points)
    on_device = rows.to(bundle.device)
    predict = bundle_predict(bundle)
    wrapper = NetworkEstimator if bundle.regression is None else NetworkRegressor
    estimator = wrapper(bundle).fit(rows.numpy())
    x = rows.numpy()
    categorical = [j] if column.kind == "categorical" else None

    batch = default_batch_rows(bundle.device)

    def ours() -> PDPResult:
        return partial_dependence(predict, on_device, j, grid, target, batch_rows=batch)

    def theirs() -> dict:
        return sk_partial_dependence(
            estimator,
            x,
            [j],
            categorical_features=categorical,
            custom_values={j: grid.numpy()},
            method="brute",
            kind="both",
        )

    with evaluating(bundle.model), torch.no_grad():
        ours_s = best_time(ours, bundle.device, repeats)
        sklearn_s = best_time(theirs, torch.device("cpu"), repeats)
        mine, ref = ours(), theirs()
    # a binary classifier: scikit-learn gives the second class; a regressor its one output
    k = 0 if bundle.info.num_classes <= 2 else target
    diff = max(np.abs(mine.pdp - ref["average"][k]).max(), np.abs(mine.ice - ref["individual"][k]).max())
    return Timing(column.name, ours_s, sklearn_s, float(diff))


def run(dataset: str, n_rows: int, points: int, columns: int, device: torch.device, repeats: int) -> list[Timing]:
    bundle = network(dataset, device)
    rows = table_rows(dataset, n_rows)
    target = bundle.info.num_classes - 1
    return [time_column(bundle, rows, j, points, target, repeats) for j in range(min(columns, rows.shape[1]))]


def print_table(timings: list[Timing], dataset: str, n_rows: int, points: int, device: torch.device) -> None:
    print(
        f"PDP + ICE of tabular_mlp on {dataset}: {n_rows} rows x {points} grid points per column, {device_label(device)}"
    )
    print(f"{'column':<12} {'xaidash s':>10} {'sklearn s':>10} {'ratio':>8} {'max |diff|':>11}")
    for t in timings:
        print(f"{t.column:<12} {t.ours_s:>10.4f} {t.sklearn_s:>10.4f} {t.ratio:>7.1f}x {t.max_diff:>11.2e}")
    ours, theirs = sum(t.ours_s for t in timings), sum(t.sklearn_s for t in timings)
    worst = max(t.max_diff for t in timings)
    print(
        f"all {len(timings)} columns: xaidash {ours:.4f} s, sklearn {theirs:.4f} s, ratio {theirs / ours:.1f}x "
        f"(goal >= 5x), max |diff| {worst:.2e}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="planted", help="a built-in table (default planted: 2,000 rows)")
    ap.add_argument("--rows", type=int_range(1), default=1000)
    ap.add_argument("--grid", type=int_range(2), default=50)
    ap.add_argument("--columns", type=int_range(1), default=4, help="columns swept, the first ones (default 4)")
    ap.add_argument("--repeats", type=int_range(1), default=3)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args(argv)
    device = pick_device(args.device)
    print(f"load average {os.getloadavg()[0]:.2f}")
    timings = run(args.dataset, args.rows, args.grid, args.columns, device, args.repeats)
    print_table(timings, args.dataset, args.rows, args.grid, device)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
