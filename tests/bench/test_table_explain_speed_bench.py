"""bench/table_explain_speed.py: a tiny run times both paths of table LIME and KernelSHAP, finds LIME equal to lime's
own call and KernelSHAP close to shap's, and prints the summary line per method."""

from __future__ import annotations

import re

from bench_scripts import bench_module


def test_tiny_run_prints_a_summary_line_per_method(capsys) -> None:
    with bench_module("table_explain_speed") as bench:
        rows = bench.main(
            ["--device", "cpu", "--rows", "3", "--lime-samples", "100", "--shap-samples", "200", "--repeats", "1"]
        )
    lines = capsys.readouterr().out.splitlines()
    assert [r.method for r in rows] == ["lime", "shap_kernel"]
    assert rows[0].agreement == 0.0  # the same seed gives lime's own weights
    assert rows[1].agreement > 0.8
    for row, name, samples in zip(rows, ("LIME", "KernelSHAP"), (100, 200), strict=True):
        assert row.xaidash_s > 0 and row.reference_s > 0
        assert re.fullmatch(
            rf"{name} \(tabular_mlp, {samples} samples\) 3 rows: xaidash [\d.e-]+ s, reference [\d.e-]+ s, ratio [\d.]+x",
            row.last_line(),
        )
        assert row.last_line() in lines
