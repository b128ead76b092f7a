"""bench/graph_speed.py on a few BA-Shapes nodes: both methods print their line with the ratio, and the batched
occlusion equals the loop that deletes each edge and calls the model."""

from __future__ import annotations

import pytest
import torch
from bench_scripts import bench_module


def test_graph_speed_prints_ratios_and_equal_occlusion(capsys: pytest.CaptureFixture[str]) -> None:
    threads = torch.get_num_threads()
    try:
        with bench_module("graph_speed") as bench:
            ratios = bench.main(["--nodes", "4", "--loop-nodes", "2", "--epochs", "3", "--threads", "1"])
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert set(ratios) == {"occlusion", "gnnexplainer"} and all(r > 0 for r in ratios.values())
    assert "Occlusion of edges (gcn, 4 nodes, cpu)" in out and "equal (max diff" in out
    assert "GNNExplainer (3 epochs) (gcn, 4 nodes, cpu)" in out and "(timed on 2 nodes, scaled)" in out
    assert "NOT EQUAL" not in out
