"""bench/influence_speed.py: a tiny run prints xaidash's and captum's times side by side and their rank correlation,
which must agree (captum's definition: the same scores)."""

from __future__ import annotations

import re

import pytest
from bench_scripts import bench_module


def test_bench_prints_both_and_they_agree(capsys: pytest.CaptureFixture[str]) -> None:
    with bench_module("influence_speed") as bench:
        assert bench.main(["--epochs", "2", "--max-train-samples", "120", "--queries", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"108 training samples, 2 checkpoints", out), out
    assert re.search(r"self-influence, whole set \(cold cache\)\s+\d+\.\d s", out), out
    assert re.search(r"self-influence, whole set \(captum: no cache\)\s+\d+\.\d s", out), out
    rho = re.search(r"spearman vs captum, captum's definition \(min\)\s+(\d\.\d{4})", out)
    assert rho is not None and float(rho.group(1)) >= 0.99, out
