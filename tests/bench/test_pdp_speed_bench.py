"""bench/pdp_speed.py: a tiny run prints xaidash's time beside scikit-learn's brute partial dependence over the same
network and grid, with equal values."""

from __future__ import annotations

import pytest
import torch
from bench_scripts import bench_module


def test_bench_prints_both_and_equal_values(capsys: pytest.CaptureFixture[str]) -> None:
    torch.set_num_threads(1)
    with bench_module("pdp_speed") as bench:
        timings = bench.run("planted", 60, 6, 9, torch.device("cpu"), repeats=1)
        bench.print_table(timings, "planted", 60, 6, torch.device("cpu"))
    assert [t.column for t in timings][-1] == "group", "the categorical column is swept too"
    assert all(t.max_diff < 1e-5 and t.ours_s > 0 and t.sklearn_s > 0 for t in timings)
    out = capsys.readouterr().out
    assert "xaidash s" in out and "sklearn s" in out and "(goal >= 5x)" in out and "max |diff|" in out


def test_bench_on_a_regression_table_compares_values_in_units() -> None:
    torch.set_num_threads(1)
    with bench_module("pdp_speed") as bench:
        timings = bench.run("diabetes", 50, 6, 3, torch.device("cpu"), repeats=1)
    # values in units of disease progression (about 150): float32 through both paths
    assert len(timings) == 3 and all(t.max_diff < 1e-3 and t.sklearn_s > 0 for t in timings)
