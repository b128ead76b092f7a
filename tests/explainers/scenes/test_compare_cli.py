"""`xaidash scenes compare`: methods over test scenes printed as a table of means with 95% intervals, the best per
metric and the agreement, the JSON written; a refusal (a method of the other task, --json on a folder, a run
without a data set) in one line with nothing written."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest
import torch

from xaidash.explainers.scenes import compare_cli
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.zoo import scene_model

CLASSES = ("circle", "square", "triangle", "cross")


@pytest.fixture(scope="module")
def segmenter() -> SceneBundle:
    """The zoo's U-Net with random weights: its regions are wherever it happens to paint a class."""
    torch.manual_seed(0)
    spec = scene_model("unet_small")
    return SceneBundle(spec.make(len(CLASSES), 96).eval(), spec, CLASSES, 96, torch.device("cpu"), dataset="scenes")


def _run(argv: list[str], bundle: SceneBundle, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(compare_cli, "load_scene_run", lambda run, device="auto": bundle)
    parser = argparse.ArgumentParser()
    compare_cli.add_compare_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["compare", "--run", "r1", "--quiet", *argv])
    return int(args.func(args))


def test_a_segmenter_compared_over_scenes_prints_the_table_and_writes_json(segmenter, monkeypatch, capsys, tmp_path):
    out = tmp_path / "deep" / "comparison.json"
    code = _run(["--scenes", "3", "--methods", "seg_gradcam,eigencam", "--json", str(out)], segmenter, monkeypatch)
    printed = capsys.readouterr().out
    document = json.loads(out.read_text())
    assert code == 0
    assert document["scenes"] == [0, 1, 2] and document["methods"] == ["seg_gradcam", "eigencam"]
    assert document["dataset"] == "scenes" and document["run"] == "r1"
    n = len(document["targets"])
    assert f"{n} target(s) on 3 test scene(s)" in printed
    assert n > 0  # the random U-Net (seed 0) paints circles and squares, which scenes 0 and 1 hold
    assert "Seg-Grad-CAM" in printed and "Pointing game" in printed and "agreement" in printed
    assert all(len(rows) == n for rows in document["values"].values())
    for row in document["summary"]:
        if row["low"] is not None and row["metric"] in ("pointing_game", "energy", "off_object"):
            assert 0.0 <= row["low"] <= row["mean"] <= row["high"] <= 1.0


def test_refusals_are_one_line_and_write_nothing(segmenter, monkeypatch, capsys, tmp_path):
    assert _run(["--methods", "gradcam"], segmenter, monkeypatch) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "explains a detector" in err and "segmenter" in err
    assert _run(["--json", str(tmp_path)], segmenter, monkeypatch) == 2
    assert "is a folder: give a file name" in capsys.readouterr().err
    assert _run([], replace(segmenter, dataset=None), monkeypatch) == 2
    assert "names no data set" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
