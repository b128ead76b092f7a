"""bench/scenes_truth.py: parts of the test split measured apart join into one table of means per method."""

from __future__ import annotations

import json
from pathlib import Path

from bench_scripts import bench_module


def _part(rows: list[dict[str, float]], seconds: float) -> dict:
    return {"detect": {"methods": ["drise", "ig"], "rows": {"drise": rows}, "seconds": {"drise": seconds}}}


def test_parts_join_into_one_table(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_part([{"pointing_game": 1.0, "energy": 0.5}], 2.0)))
    b.write_text(json.dumps(_part([{"pointing_game": 0.0, "energy": 0.25, "deletion": 0.1}], 4.0)))
    with bench_module("scenes_truth") as bench:
        joined = bench.merged([str(a), str(b)])
        text = bench.table(joined["detect"], "detect")
    drise = next(line for line in text.splitlines() if line.strip().startswith("drise")).split()
    # targets 2; pointing 0.5; energy 0.375; off-object none; deletion 0.1 (one value); insertion none; 3 s per target
    assert drise == ["drise", "2", "0.500", "0.375", "-", "0.100", "-", "3.00"]
    ig = next(line for line in text.splitlines() if line.strip().startswith("ig")).split()
    assert ig[1] == "0"
