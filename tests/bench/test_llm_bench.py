"""bench/llm_explain_speed.py on a tiny imported Llama run: every method with a captum reference is timed on both
sides, the one-pass captum call agrees with xaidash, and the summary line per method is printed last."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from bench_scripts import bench_module
from tiny_lm import save_tiny_folder


@pytest.fixture(scope="module")
def bench():
    with bench_module("llm_explain_speed") as module:
        yield module


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from xaidash.models.language.convert import import_language_model

    root = tmp_path_factory.mktemp("llm_bench")
    folder = save_tiny_folder(root / "tiny")
    return import_language_model(f"hf:{folder}", root=root / "runs").path


def test_tiny_run_prints_a_summary_line_per_method(bench, tiny_run: Path, capsys) -> None:
    args = ["--run", str(tiny_run), "--device", "cpu", "--prompt", "what is the capital of france ?"]
    report = bench.main([*args, "--answer-tokens", "3", "--shapley-samples", "2", "--lime-samples", "12"])
    text = capsys.readouterr().out
    assert "device cpu" in text and "T" in report.header["timestamp"]
    assert {"feature_ablation", "shapley_sampling", "lime", "kernel_shap"} <= {r.method for r in report.rows}
    lines = text.splitlines()
    for row in report.rows:
        assert row.xaidash_s > 0 and row.captum_s > 0 and row.features == 7 and row.steps == 3
        assert math.isclose(row.ratio, row.captum_s / row.xaidash_s, rel_tol=1e-9)
        if row.seq_diff is not None:  # the perturbation methods: equal draws, equal results
            assert row.seq_diff < 1e-4
        summary = next(line for line in lines if line.startswith(f"{row.label} ("))
        assert re.match(
            rf"{re.escape(row.label)} \(\S+, 7 features, 3 answer tokens\): xaidash [\d.]+ s, captum", summary
        )
        assert summary == row.last_line()
    assert lines[-1] == report.rows[-1].last_line()


def test_unknown_method_is_refused(bench) -> None:
    with pytest.raises(SystemExit, match="Unknown methods: nope"):
        bench.main(["--methods", "nope"])
