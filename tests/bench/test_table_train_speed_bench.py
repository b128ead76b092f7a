"""bench/table_train_speed.py: on the CPU it prints the device and, per table, the engine's and a plain loop's
seconds per epoch and their ratio."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wine_prints_both_loops_and_their_ratio(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "table_train_speed.py"), "--datasets", "wine"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=True,
    ).stdout
    lines = out.strip().splitlines()
    assert lines[0] == "device: cpu, 1 threads"
    line = re.compile(
        r"^wine: 128 rows, batch 16, 40 epochs; engine ([\d.]+) s/epoch \(test acc ([\d.]+)%\), "
        r"plain loop ([\d.]+) s/epoch, engine/plain ([\d.]+) x$"
    )
    found = line.match(lines[-1])
    assert found, lines[-1]
    engine, acc, plain, ratio = (float(g) for g in found.groups())
    assert engine > 0 and plain > 0 and acc >= 90
    # the times are printed rounded to 1 ms (the ratio to 0.1): the ratio lies within what those roundings allow
    low, high = (engine - 0.0005) / (plain + 0.0005), (engine + 0.0005) / max(plain - 0.0005, 1e-9)
    assert low - 0.05 <= ratio <= high + 0.05, (engine, plain, ratio)
