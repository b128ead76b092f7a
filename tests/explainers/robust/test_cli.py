"""`xaidash attack` and `xaidash counterfactual` end to end on the shared trained shapes run and a tiny cues run:
the printed verdict, the files written, and one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from train_configs import tiny_run

from xaidash.dashboard.cli import build_parser


def _run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


@pytest.mark.slow  # the session fixture trains resnet_small on shapes
def test_attack_writes_the_verdict_maps_and_json(trained_shapes_run, tmp_path: Path, monkeypatch, capsys) -> None:
    run = trained_shapes_run.run
    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    out = tmp_path / "attack"
    argv = ["attack", "--run", str(run.path), "--input", "dataset:0", "--attack", "pgd", "--epsilon", "8/255"]
    code = _run([*argv, "--steps", "5", "--explain", "saliency,gradcam", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "PGD (ε = 8.0/255" in printed.out and "→" in printed.out
    assert "saliency: map of" in printed.out and "Spearman" in printed.out
    data = json.loads((out / "attack.json").read_text())
    assert data["attack"] == "pgd" and data["linf"] <= 8 / 255 + 1e-6 and data["params"]["steps"] == 5
    assert [e["method"] for e in data["explanations"]] == ["saliency", "gradcam"]
    assert "captum.robust.PGD" in data["library"]
    assert data["schema"] == "xaidash.attack" and data["request"]["parameters"]["epsilon"] == "8/255"
    assert data["original"]["file"] == "arrays/result.original.npy" and (out / data["original"]["file"]).is_file()
    assert data["flipped"] in (True, False) and data["classes"] == list(run.info.classes)
    for name in (
        "original.png",
        "perturbed.png",
        "perturbation.png",
        "maps/saliency_before.png",
        "maps/gradcam_after.png",
    ):
        assert Image.open(out / name).size[0] > 0
    assert Image.open(out / "perturbation.png").height > 224  # the 224 px map with its colour bar below

    cf = tmp_path / "cf"
    code = _run(
        [
            "counterfactual",
            "--run",
            str(run.path),
            "--input",
            "dataset:0",
            "--to",
            "triangle",
            "--steps",
            "5",
            "--out",
            str(cf),
        ]
    )
    printed = capsys.readouterr()
    data = json.loads((cf / "counterfactual.json").read_text())
    assert code == (0 if data["found"] else 1)
    assert data["target"]["name"] == "triangle" and data["summary"] in printed.out
    assert data["name"] == "minimal adversarial example" and data["search"] == "perturbation"
    assert data["summary"].startswith(("Minimal adversarial example: ", "None found within"))

    patch = tmp_path / "patch"
    code = _run(
        [
            "counterfactual",
            *("--run", str(run.path), "--input", "dataset:0", "--to", "triangle", "--steps", "5"),
            *("--search", "patch", "--out", str(patch)),
        ]
    )
    printed = capsys.readouterr()
    data = json.loads((patch / "counterfactual.json").read_text())
    assert code == (0 if data["found"] else 1) and data["name"] == "patch counterfactual"
    assert data["summary"] in printed.out
    if data["found"]:
        assert data["summary"].startswith("Patch counterfactual: ") and data["visible"] is True
        assert set(data["patch"]) == {"top", "left", "height", "width"}
        assert Image.open(patch / "perturbation.png").height > 224  # the difference image with its colour bar
    else:
        assert data["summary"].startswith("None found within a patch of")

    # Refusals: one line each, no traceback.
    for bad, says in (
        ([*argv[:-2], "--epsilon", "0"], "0 allows no change"),
        ([*argv[:-2], "--epsilon", "2"], "at most 1"),
        ([*argv[:-4], "--attack", "fgsm", "--steps", "3"], "takes one step"),
        (["counterfactual", "--run", str(run.path), "--input", "dataset:0", "--to", "spiral"], "give a class index"),
    ):
        assert _run(bad) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and says in err and "Traceback" not in err


def test_text_runs_get_the_counterfactual(tmp_path: Path, monkeypatch, capsys) -> None:
    root = tmp_path / "runs"
    run = tiny_run(root, "cues", "text_cnn")
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    assert _run(["attack", "--run", str(run), "--input", "the film was dull"]) == 2
    assert "use the counterfactual" in capsys.readouterr().err
    code = _run(
        [
            "counterfactual",
            "--run",
            str(run),
            "--input",
            "the plot was good and the cast was great",
            "--to",
            "0",
            "--budget",
            "3",
            "--out",
            str(tmp_path / "cf"),
        ]
    )
    printed = capsys.readouterr()
    data = json.loads((tmp_path / "cf" / "counterfactual.json").read_text())
    if "already predicts" in printed.err:  # a one-epoch model on 64 samples may say negative already
        assert code == 2
        return
    assert code == (0 if data["found"] else 1)
    assert data["summary"] in printed.out
    if data["found"]:
        assert 1 <= data["edit_count"] <= 3 and "edited text:" in printed.out
    else:
        assert data["summary"].startswith("None found within 3 word edits")


def test_table_runs_get_column_changes(tmp_path: Path, monkeypatch, capsys) -> None:
    from table_bundles import split, trained_bundle
    from table_runs import table_run

    bundle = trained_bundle()
    root = tmp_path / "runs"
    run = table_run(root, bundle)
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    assert _run(["attack", "--run", str(run.path), "--input", "dataset:0"]) == 2
    assert "fewest changed columns" in capsys.readouterr().err
    row = split().rows[0]
    to = 1 - int(bundle.predict_proba(row.unsqueeze(0)).argmax())
    argv = ["counterfactual", "--run", str(run.path), "--input", "dataset:0", "--to", str(to), "--fixed", "x2"]
    code = _run([*argv, "--fixed", "group", "--budget", "3", "--out", str(tmp_path / "cf")])
    printed = capsys.readouterr()
    data = json.loads((tmp_path / "cf" / "counterfactual.json").read_text())
    assert code == 0 and data["found"] and data["search"] == "column changes"
    assert data["summary"] in printed.out and "changed row: x0 " in printed.out
    assert data["fixed"] == ["x2", "group"] and 1 <= data["change_count"] <= 3
    assert not {c["column"] for c in data["changes"]} & {"x2", "group"}
    assert _run([*argv, "--fixed", "x9"]) == 2
    assert "no column 'x9'" in capsys.readouterr().err
    assert _run([*argv, "--budget", "12"]) == 2
    assert "between 1 and 9 changed columns" in capsys.readouterr().err
