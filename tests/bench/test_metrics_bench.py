"""bench/metrics_speed.py: a tiny run prints xaidash's time beside Quantus's for every metric, and the metrics whose
definitions agree give equal values."""

from __future__ import annotations

import math

import pytest
import torch
from bench_scripts import bench_module


def test_bench_prints_both_libraries_and_equal_values(offline_data, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("quantus")
    with bench_module("metrics_speed") as bench:
        rows = bench.run(3, "gradcam", torch.device("cpu"), repeats=1)
        bench.print_table(rows, 3, "gradcam", torch.device("cpu"))
    by_name = {r.metric.split(" ")[0]: r for r in rows}
    assert {"sparseness", "complexity", "road_morf", "road_lerf", "local_lipschitz", "max_sensitivity"} <= set(by_name)
    for name in ("sparseness", "complexity"):
        r = by_name[name]
        assert r.agree == "equal" and math.isclose(r.ours, r.quantus, rel_tol=1e-4, abs_tol=1e-5)
    assert all(r.ours_s > 0 for r in rows)
    out = capsys.readouterr().out
    assert "Quantus s" in out and "speed-up" in out and "sparseness" in out
