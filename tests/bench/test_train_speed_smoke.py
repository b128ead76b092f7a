"""bench/train_speed.py: a small run on the CPU prints both loops and one ratio line per engine variant."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"


@pytest.mark.skipif(not (SHARED / "MNIST" / "raw").is_dir(), reason="needs ../shared/data/MNIST")
def test_a_small_run_prints_each_variants_speed_up_and_accuracy(tmp_path):
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "train_speed.py"), "--epochs", "1", "--images", "1000"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        check=True,
    ).stdout
    lines = out.strip().splitlines()
    assert lines[0].startswith("device: cpu")
    assert re.match(r"seeds loop : [\d.]+ s/epoch \(1,000 images, batch 64\), test acc [\d.]+%", lines[1])
    ratio = re.compile(
        r"^(engine|batch512): seeds' loop [\d.]+ s/epoch, engine [\d.]+ s/epoch, per-image speed-up [\d.]+ x, "
        r"accuracy [+-][\d.]+ points$"
    )
    assert [ratio.match(line).group(1) for line in lines[-2:]] == ["engine", "batch512"]
    engine = next(line for line in lines if line.startswith("engine     :"))
    assert "(1,000 images, batch 256)" in engine  # the engine trains on as many images as the seeds' loop
