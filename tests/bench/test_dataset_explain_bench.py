"""bench/dataset_explain.py: a tiny local-engine run prints the figure line the README quotes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bench_scripts import bench_module

from xaidash.models.training.config import TrainConfig
from xaidash.models.training.engine import train

REPO = Path(__file__).resolve().parents[2]


def test_bench_prints_samples_per_second(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = train(TrainConfig(dataset="shapes", model="resnet_small", epochs=1, max_train_samples=32, device="cpu"))
    assert result.ok, result.error
    with bench_module("dataset_explain") as bench:
        argv = ["--run", result.run_dir.name, "--n", "12", "--chunk-size", "6", "--param", "ig.steps=2"]
        assert bench.main([*argv, "--engines", "local", "--device", "cpu"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"local: 12 samples in \d+\.\d s, \d+\.\d\d samples/s", last), last
