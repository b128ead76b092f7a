"""bench/text_explain_speed.py: a tiny run times both paths of each method and prints the table and, last per
method, the summary line `METHOD (model, S samples) N texts: xaidash S s, reference S s, ratio R x`."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from bench_scripts import bench_module

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    with bench_module("text_explain_speed") as module:
        yield module


def test_tiny_run_prints_a_summary_line_per_method(bench, capsys) -> None:
    args = ["--device", "cpu", "--models", "text_cnn", "--texts", "3", "--repeats", "1"]
    report = bench.main([*args, "--lime-samples", "20", "--shap-samples", "20"])
    text = capsys.readouterr().out
    assert "device cpu" in text and "T" in report.header["timestamp"]
    assert [(r.model, r.method) for r in report.rows] == [("text_cnn", "lime"), ("text_cnn", "shap_kernel")]
    lines = text.splitlines()
    for row, name in zip(report.rows, ("LIME", "KernelSHAP"), strict=True):
        assert row.xaidash_s > 0 and row.reference_s > 0 and row.batch == 64  # a CPU starts at 64 rows
        assert math.isclose(row.ratio, row.reference_s / row.xaidash_s, rel_tol=1e-9)
        assert -1.0 <= row.agreement <= 1.0
        summary = next(line for line in lines if line.startswith(f"{name} (text_cnn, 20 samples) 3 texts:"))
        assert re.fullmatch(
            rf"{name} \(text_cnn, 20 samples\) 3 texts: xaidash [\d.]+ s, reference [\d.]+ s, ratio [\d.]+x", summary
        )
        assert summary == row.last_line()
    # the summary is the last line of each method's block: the next line is the other method's row or the end
    assert lines[-1] == report.rows[-1].last_line()


def test_unknown_model_is_refused(bench) -> None:
    with pytest.raises(SystemExit, match="Unknown models: nope"):
        bench.main(["--models", "nope"])
