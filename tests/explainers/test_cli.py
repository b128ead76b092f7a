"""`explain` and `methods` subcommands end to end, on tiny runs trained by the engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from train_configs import tiny_run

from xaidash.explainers import explain
from xaidash.explainers.cli import main
from xaidash.explainers.inputs import resolve_sample
from xaidash.explainers.metrics import CURVE_STEPS
from xaidash.explainers.samples import DEFAULT_BACKGROUND, background_samples
from xaidash.explainers.scoring import explain_and_score
from xaidash.models.runs.store import load_bundle


def _report(out: Path) -> dict:
    """The report `xaidash explain` wrote (docs/report-format.md)."""
    report = json.loads((out / "report.json").read_text())
    assert report["format_version"] == 1 and report["kind"] == "xaidash.explain_report"
    return report


def _methods(report: dict) -> dict[str, dict]:
    """method id -> its entry for the one input."""
    return {e["method"]: e for e in report["explanations"] if e["input"] == 0}


@pytest.fixture(scope="module")
def cli_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runs root of this module's runs: run ids and paths are resolved inside the runs root only."""
    return tmp_path_factory.mktemp("cli_runs")


@pytest.fixture(autouse=True)
def _runs_in_cli_root(_isolated_roots: None, cli_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(cli_root))


@pytest.fixture(scope="module")
def image_run(cli_root: Path) -> Path:
    return tiny_run(cli_root, "shapes", "resnet_small")


@pytest.fixture(scope="module")
def text_run(cli_root: Path) -> Path:
    return tiny_run(cli_root, "cues", "text_cnn")


def test_explain_image_run_writes_files_and_report(image_run, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "explain",
            "--run",
            str(image_run),
            "--input",
            "dataset:2",
            "--methods",
            "saliency,gradcam,ig,attention_rollout",
            "--param",
            "ig.steps=8",
            "--param",
            "ig.baseline=blur",
            "--metrics",
            "--steps",
            "8",
            "--out",
            str(out),
            "--device",
            "cpu",
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "attention_rollout: failed" in err  # does not apply to a CNN: reported, the others still ran
    for m in ("saliency", "gradcam", "ig"):
        attr = np.load(out / "attributions" / f"input_00_{m}.npy")
        assert attr.shape == (32, 32) and np.isfinite(attr).all()
        assert Image.open(out / "maps" / f"input_00_{m}.png").size[0] >= 224  # the map with its colour bar
    assert not (out / "attributions" / "input_00_attention_rollout.npy").exists()
    assert Image.open(out / "inputs" / "input_00.png").size == (32, 32)

    report = _report(out)
    first = report["inputs"][0]
    assert "shapes test #2" in first["name"] and first["label"]["name"] in ("circle", "square", "triangle", "cross")
    assert report["runs"][0]["device"] == "cpu" and report["runs"][0]["model"] == "resnet_small"
    probs = [p["probability"] for p in first["predictions"]["A"]]
    assert len(probs) == 4 and probs == sorted(probs, reverse=True) and sum(probs) == pytest.approx(1.0, abs=1e-4)
    methods = _methods(report)
    assert methods["attention_rollout"]["error"] and methods["attention_rollout"]["figure"] is None
    assert methods["ig"]["params"] == {"baseline": "blur", "steps": 8}
    assert "convergence_delta" in methods["ig"]["diagnostics"]
    for m in ("saliency", "gradcam", "ig"):
        metrics = methods[m]["metrics"]
        assert 0.0 <= metrics["deletion_auc"] <= 1.0 and 0.0 <= metrics["insertion_auc"] <= 1.0
        assert metrics["pointing_game"] in (0.0, 1.0) or 0 < metrics["pointing_game"] < 1
        assert methods[m]["wall_seconds"] >= methods[m]["seconds"] > 0
    assert isinstance(methods["ig"]["metrics"]["completeness_gap"], float)


def test_explain_image_file_and_target(image_run, tmp_path):
    path = tmp_path / "photo.png"
    Image.fromarray((np.random.default_rng(0).random((50, 70, 3)) * 255).astype(np.uint8)).save(path)
    out = tmp_path / "out"
    assert (
        main(
            [
                "explain",
                "--run",
                str(image_run),
                "--input",
                str(path),
                "--target",
                "triangle",
                "--methods",
                "saliency",
                "--out",
                str(out),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    report = _report(out)
    assert report["inputs"][0]["label"] is None and report["settings"]["target"] == {"class": 2, "name": "triangle"}
    saliency = _methods(report)["saliency"]
    assert saliency["figure"]["target"] == {"class": 2, "name": "triangle"} and saliency["metrics"] == {}
    assert (out / "attributions" / "input_00_saliency.npy").exists()


def test_explain_text_run(text_run, tmp_path):
    out = tmp_path / "text"
    assert (
        main(
            [
                "explain",
                "--run",
                str(text_run),
                "--input",
                "the plot was superb and the cast clever",
                "--methods",
                "saliency,ig",
                "--metrics",
                "--out",
                str(out),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    report = _report(out)
    methods = _methods(report)
    for m in ("saliency", "ig"):
        figure = methods[m]["figure"]
        assert len(figure["scores"]) == 8 and len(figure["words"]) == 8  # one score per word
        html = (out / methods[m]["files"]["map"]).read_text()
        assert "superb" in html and "<span" in html and "xai-cbar" in html
    assert report["inputs"][0]["name"].startswith("text") and "superb" in report["inputs"][0]["text"]
    assert 0 <= methods["ig"]["metrics"]["deletion_auc"] <= 1

    out2 = tmp_path / "text2"
    assert (
        main(
            [
                "explain",
                "--run",
                str(text_run),
                "--input",
                "dataset:1",
                "--methods",
                "saliency",
                "--metrics",
                "--out",
                str(out2),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    metrics = _methods(_report(out2))["saliency"]["metrics"]
    assert 0 <= metrics["rationale_energy"] <= 1 and 0 <= metrics["rationale_pointing"] <= 1


def test_explain_refuses_bad_input_and_params(image_run, tmp_path, capsys):
    out = str(tmp_path / "x")
    assert (
        main(
            [
                "explain",
                "--run",
                str(image_run),
                "--input",
                str(tmp_path / "none.png"),
                "--methods",
                "saliency",
                "--out",
                out,
            ]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    assert (
        main(
            [
                "explain",
                "--run",
                str(image_run),
                "--input",
                "dataset:0",
                "--methods",
                "saliency",
                "--param",
                "saliency.steps=3",
                "--out",
                out,
            ]
        )
        == 2
    )
    assert "no parameter" in capsys.readouterr().err
    assert (
        main(["explain", "--run", str(image_run), "--input", "dataset:0", "--methods", "no_such_method", "--out", out])
        == 2
    )
    assert "Unknown method" in capsys.readouterr().err
    assert main(["explain", "--run", str(image_run), "--input", "dataset:0", "--target", "hexagon", "--out", out]) == 2
    assert main(["explain", "--run", str(tmp_path / "no_run"), "--input", "dataset:0", "--out", out]) == 2


def test_methods_lists_ids_and_parameters(capsys):
    assert main(["methods", "--modality", "text"]) == 0
    text = capsys.readouterr().out
    assert "Integrated Gradients  [text" in text and "steps (int" in text and "gradcam" not in text
    assert main(["methods"]) == 0
    everything = capsys.readouterr().out
    assert "gradcam" in everything and "layer (layer" in everything and "Integrated Gradients  [image" in everything


def test_mean_baseline_gives_one_map_from_the_cli_the_api_and_the_page(image_run, tmp_path):
    """IG's 'mean' baseline is the mean of the default background wherever it is asked for: `xaidash
    explain`, `explain()` and the Explain page's path (`explain_and_score`) load the same training images."""
    out = tmp_path / "out"
    args = ["explain", "--run", str(image_run), "--input", "dataset:2", "--methods", "ig", "--out", str(out)]
    assert main([*args, "--param", "ig.baseline=mean", "--param", "ig.steps=8", "--device", "cpu"]) == 0
    assert _report(out)["settings"]["background"] == f"{DEFAULT_BACKGROUND} training images"
    cli = np.load(out / "attributions" / "input_00_ig.npy")

    bundle = load_bundle(image_run, device="cpu")
    raw = resolve_sample("dataset:2", bundle).raw
    api = explain(bundle, raw, method="ig", baseline="mean", steps=8).item(0)
    page = explain_and_score(bundle, raw[None], "ig", {"baseline": "mean", "steps": 8}, with_metrics=False)
    np.testing.assert_allclose(cli, api, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(page.explanation.item(0), api, rtol=1e-5, atol=1e-7)
    # ... and those images are the training split's, not the data set's declared mean
    given = explain(bundle, raw, method="ig", baseline="mean", steps=8, background=background_samples(bundle))
    np.testing.assert_allclose(given.item(0), api, rtol=1e-5, atol=1e-7)
    no_images = torch.zeros(0, 3, 32, 32)  # an empty background: the data set's declared per-channel mean instead
    declared = explain(bundle, raw, method="ig", baseline="mean", steps=8, background=no_images)
    assert not np.allclose(declared.item(0), api)


def test_steps_default_is_the_shared_curve_steps():
    import argparse

    from xaidash.explainers.cli import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    args = parser.parse_args(["explain", "--run", "r", "--input", "i", "--out", "o"])
    assert args.steps == CURVE_STEPS and args.background == DEFAULT_BACKGROUND


def test_text_exports_show_markup_as_text(text_run, tmp_path):
    # captum's text visualiser once rendered input words as HTML; typed markup must stay text in every export
    out = tmp_path / "out"
    attack = "<img src=x onerror=alert(1)> great <script>alert(2)</script>"
    args = ["explain", "--run", str(text_run), "--input", attack, "--methods", "saliency,lime", "--out", str(out)]
    assert main([*args, "--param", "lime.samples=40"]) == 0
    pages = sorted((out / "maps").glob("*.html"))
    assert [p.name for p in pages] == ["input_00_lime.html", "input_00_saliency.html"]
    for page in pages:
        html = page.read_text()
        assert "<img" not in html and "<script>" not in html, page.name
        assert "&lt;img" in html or "&lt;" in html, page.name


def test_a_text_longer_than_the_model_reads_is_said_in_the_terminal_and_the_report(text_run, tmp_path, capsys):
    out = tmp_path / "long"
    words = 400  # far beyond the model's max_length
    text = " ".join(["the plot was superb"] * (words // 4))
    args = ["explain", "--run", str(text_run), "--input", text, "--methods", "saliency", "--out", str(out)]
    assert main([*args, "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert f"of {words:,} words" in err and "note: The model reads only the first" in err, err
    assert any(f"of {words:,} words" in n for n in _report(out)["notes"])


def test_a_failed_completeness_promise_is_printed_with_the_method(text_run, tmp_path, capsys, monkeypatch):
    import xaidash.explainers.figures.map_figure as map_figure

    monkeypatch.setattr(map_figure, "completeness_of", lambda spec, e, i: ("values do not add up (test)", True))
    out = tmp_path / "gap"
    args = ["explain", "--run", str(text_run), "--input", "a clever cast", "--methods", "ig", "--out", str(out)]
    assert main([*args, "--device", "cpu"]) == 0
    assert "ig: ⚠ values do not add up (test)" in capsys.readouterr().err


def test_an_image_path_no_file_can_have_is_refused_in_one_line(image_run, tmp_path, capsys):
    out = tmp_path / "long_name"
    args = ["explain", "--run", str(image_run), "--input", "x" * 300 + ".png", "--methods", "saliency"]
    assert main([*args, "--out", str(out), "--device", "cpu"]) == 2
    assert "does not exist" in capsys.readouterr().err
