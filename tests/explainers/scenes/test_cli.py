"""`xaidash scenes explain`: a run of each task explained end to end (maps, scene.json, the report), and every refusal
a user can cause said in one line, with nothing written."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

from xaidash.explainers.scenes import cli
from xaidash.models.scenes.bundle import SceneBundle
from xaidash.models.scenes.zoo import scene_model

CLASSES = ("circle", "square", "triangle", "cross")


def _random_bundle(model_id: str) -> SceneBundle:
    """The zoo's model with random weights (a detector then scores every box about 1/5: use --min-score 0)."""
    torch.manual_seed(0)
    spec = scene_model(model_id)
    model = spec.make(len(CLASSES), 96).eval()
    return SceneBundle(model, spec, CLASSES, 96, torch.device("cpu"), dataset="scenes")


@pytest.fixture(scope="module")
def detector() -> SceneBundle:
    return _random_bundle("fasterrcnn_small")


@pytest.fixture(scope="module")
def segmenter() -> SceneBundle:
    return _random_bundle("unet_small")


def _run(argv: list[str], bundle: SceneBundle | None, monkeypatch: pytest.MonkeyPatch) -> int:
    if bundle is not None:
        monkeypatch.setattr("xaidash.models.scenes.loading.load_scene_run", lambda run, device="auto": bundle)
    parser = argparse.ArgumentParser()
    cli.add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["explain", "--run", "r1", "--quiet", *argv])
    return int(args.func(args))


def test_a_detector_box_explained_with_files(detector, monkeypatch, capsys, tmp_path) -> None:
    out = tmp_path / "out"
    argv = ["--input", "test:2", "--min-score", "0", "--box", "1", "--methods", "drise,ig", "--param", "ig.steps=4"]
    code = _run([*argv, "--param", "drise.masks=16", "--out", str(out), "--report"], detector, monkeypatch)
    text = capsys.readouterr().out
    assert code == 0, text
    assert "test:2 of r1: 1 target(s), 2 method(s)" in text
    lines = text.splitlines()
    assert lines[1].startswith("box 1: ") and lines[2].startswith("  D-RISE ") and lines[3].startswith("  Integrated ")
    assert "Deletion AUC" in text or "not positive" in text
    doc = json.loads((out / cli.RESULT_JSON).read_text())
    assert doc["request"]["inputs"]["input"] == "test:2" and doc["task"] == "detect"
    assert [e["method"] for e in doc["explanations"]] == ["drise", "ig"]
    for entry in doc["explanations"]:
        assert entry["error"] is None and (out / entry["map_png"]).read_bytes().startswith(b"\x89PNG")
        assert entry["target"]["index"] == 0 and len(entry["target"]["box"]) == 4
    assert (out / "predictions.png").is_file()
    assert "<html" in (out / cli.REPORT_HTML).read_text().lower()


def test_a_segmenter_region_explained(segmenter, monkeypatch, capsys) -> None:
    present = segmenter.predict([_scene_image()])[0].classes_present()  # type: ignore[union-attr]
    name = CLASSES[present[0] - 1]
    code = _run(["--input", "test:0", "--class", name, "--methods", "ig", "--param", "steps=4"], segmenter, monkeypatch)
    text = capsys.readouterr().out
    assert code == 0, text
    assert f"{name}, its predicted mask" in text and "  Integrated Gradients  " in text
    assert "Pointing game" in text  # scored against the scene's true mask of the class (or said why not)


def _scene_image() -> torch.Tensor:
    from xaidash.data.scenes.registry import load_scene_set

    return load_scene_set("scenes", "test").images[0]


@pytest.mark.parametrize(
    ("argv", "task", "message"),
    [
        (["--min-score", "0", "--box", "999"], "detect", "There is no box 999: the model found boxes 1-"),
        (["--min-score", "0", "--class", "hexagon"], "detect", "Unknown class 'hexagon': the run's classes are circle"),
        (["--methods", "seg_gradcam"], "detect", "this run is a detector: pick among"),
        (["--methods", "drise"], "segment", "D-RISE (drise) explains a detector, and this run is a segmenter"),
        (["--methods", "nope"], "detect", "Unknown scene method 'nope'"),
        (["--input", "test:9999"], "detect", "Scene 9999 is out of range: the test split of scenes has 200"),
        (["--input", "somewhere/none.png"], "detect", "is neither split:index (e.g. test:3) nor an image file"),
        (["--methods", "drise", "--param", "drise.masks=0"], "detect", "masks=0 is outside"),
        (["--min-score", "0", "--box", "1"], "segment", "--box picks a detected box; this run is a segmenter"),
        (["--report"], "detect", "--report writes report.html into the --out folder"),
    ],
)
def test_refusals_are_one_line(argv, task, message, detector, segmenter, monkeypatch, capsys, tmp_path) -> None:
    out = tmp_path / "never"
    extra = [] if "--report" in argv else ["--out", str(out)]
    code = _run([*argv, *extra], detector if task == "detect" else segmenter, monkeypatch)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: ") and "\n" not in err and message in err, err
    assert not out.exists()


def test_a_trained_run_is_opened_from_its_folder(monkeypatch, capsys, tmp_path: Path) -> None:
    from scene_runs import tiny_scene_run

    run = tiny_scene_run("detect", tmp_path / "runs")
    parser = argparse.ArgumentParser()
    cli.add_commands(parser.add_subparsers(dest="command"))
    argv = ["explain", "--run", str(run.path), "--min-score", "0", "--box", "1", "--methods", "gradcam", "--quiet"]
    args = parser.parse_args(argv)
    code = args.func(args)
    text = capsys.readouterr()
    assert code in (0, 2), text
    # One epoch on 8 scenes: the model may find no box at all, which is said in one line; otherwise box 1 is explained.
    assert ("  Grad-CAM  " in text.out) or ("no box" in text.err), text
