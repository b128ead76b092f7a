"""bench/sae_speed.py on a tiny imported Llama run: it harvests, trains through xaidash's loop and SAELens's fit
on the same activations (reaching the same weights), and prints tokens/s and the ratio."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from bench_scripts import bench_module
from tiny_lm import save_tiny_folder


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from xaidash.models.language.convert import import_language_model

    root = tmp_path_factory.mktemp("sae_bench")
    folder = save_tiny_folder(root / "tiny")
    return import_language_model(f"hf:{folder}", root=root / "runs").path


def test_the_bench_prints_harvest_and_training_speeds_with_the_ratio(tiny_run: Path, capsys) -> None:
    with bench_module("sae_speed") as bench:
        args = ["--run", str(tiny_run), "--layer", "1", "--width", "32", "--k", "4", "--tokens", "2048"]
        result = bench.main([*args, "--train-tokens", "4096", "--batch-tokens", "256", "--device", "cpu"])
    out = capsys.readouterr().out
    assert "harvest: " in out and "tokens/s" in out and "ratio SAELens/xaidash" in out
    assert all(math.isfinite(v) for v in result.values())
    assert result["ratio"] > 0 and result["harvest_tokens_s"] > 0
    # the same SAE trained on the same batches both ways: xaidash's loop is SAELens's
    assert result["max_weight_diff"] < 1e-4
    assert abs(result["xaidash_ev"] - result["saelens_ev"]) < 1e-4
