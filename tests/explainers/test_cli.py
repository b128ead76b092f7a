"""`explain` and `methods` subcommands end to end, on tiny runs trained by the engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from xaidash.explainers.cli import main
from xaidash.models.engine import TrainConfig, train


def _train(tmp_path_factory: pytest.TempPathFactory, dataset: str, model: str) -> Path:
    """A 1-epoch run on a few samples (the weights barely matter here: the files and the report do)."""
    root = tmp_path_factory.mktemp(f"runs_{dataset}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XAIDASH_RUNS", str(root))
        mp.setenv("XAIDASH_OFFLINE", "1")
        result = train(
            TrainConfig(
                dataset=dataset, model=model, epochs=1, batch_size=32, max_train_samples=64, device="cpu", seed=0
            )
        )
    assert result.ok, result.error
    return result.run_dir


@pytest.fixture(scope="module")
def image_run(tmp_path_factory) -> Path:
    return _train(tmp_path_factory, "shapes", "resnet_small")


@pytest.fixture(scope="module")
def text_run(tmp_path_factory) -> Path:
    return _train(tmp_path_factory, "cues", "text_cnn")


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
        attr = np.load(out / f"{m}.npy")
        assert attr.shape == (32, 32) and np.isfinite(attr).all()
        assert Image.open(out / f"{m}.png").size[0] >= 32
    assert not (out / "attention_rollout.npy").exists()
    assert Image.open(out / "input.png").size == (32, 32)

    report = json.loads((out / "metrics.json").read_text())
    assert "shapes test #2" in report["input"] and report["true_label"]["name"] in (
        "circle",
        "square",
        "triangle",
        "cross",
    )
    assert report["device"] == "cpu" and report["model"] == "resnet_small"
    probs = [p["probability"] for p in report["predictions"]]
    assert len(probs) == 4 and probs == sorted(probs, reverse=True) and sum(probs) == pytest.approx(1.0, abs=1e-4)
    methods = report["methods"]
    assert "error" in methods["attention_rollout"]
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
    report = json.loads((out / "metrics.json").read_text())
    assert report["true_label"] is None and report["target"] == {"class": 2, "name": "triangle"}
    assert report["methods"]["saliency"]["target"] == 2 and "metrics" not in report["methods"]["saliency"]
    assert (out / "saliency.npy").exists()


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
    for m in ("saliency", "ig"):
        scores = np.load(out / f"{m}.npy")
        assert scores.shape == (8,)  # one score per word
        html = (out / f"{m}.html").read_text()
        assert "superb" in html and "<span" in html
    report = json.loads((out / "metrics.json").read_text())
    assert report["input"].startswith("text")
    assert 0 <= report["methods"]["ig"]["metrics"]["deletion_auc"] <= 1

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
    metrics = json.loads((out2 / "metrics.json").read_text())["methods"]["saliency"]["metrics"]
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
