"""`xaidash global`: the summary, the figures and global.json with --out; bad input gives one line, exit 2, and
nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from inspect_runs import make_run
from PIL import Image
from table_runs import fitted_bundle, table_run

from xaidash.dashboard.cli import main


@pytest.fixture
def run_id(tmp_path: Path) -> str:
    torch.set_num_threads(1)
    return table_run(tmp_path / "runs", fitted_bundle("planted")).id


def test_summary_figures_and_json(run_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "global"
    argv = ["global", "--run", run_id, "--columns", "x2,group", "--pair", "x0,x1", "--repeats", "3", "--grid", "12"]
    assert main([*argv, "--pair-grid", "6", "--shap-rows", "12", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "Permutation importance (rise in log-loss of the true class (nats)" in text
    assert "x2" in text and "fidelity" in text and "logistic regression" in text and "|--- x2 <=" in text
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(
        [
            "arrays",
            "global.json",
            "ice_centred_group.png",
            "ice_centred_x2.png",
            "ice_group.png",
            "ice_x2.png",
            "importance.png",
            "pdp_x0_x1.png",
            "shap_dependence_group.png",
            "shap_dependence_x2.png",
            "shap_mean_abs.png",
            "surrogate_tree.png",
        ]
    )
    for png in out.glob("*.png"):
        with Image.open(png) as image:
            assert image.format == "PNG" and image.width >= 600
    doc = json.loads((out / "global.json").read_text())
    assert doc["schema"] == "xaidash.global" and doc["request"]["run"] == run_id
    assert doc["request"]["parameters"]["pair"] == "x0,x1"
    assert [d["column"] for d in doc["dependence"]] == ["x2", "group"]
    group = doc["dependence"][1]
    assert group["labels"] == ["red", "green", "blue"] and len(group["pdp"]) == 3
    ice = group["ice"]
    assert ice["shape"] == [400, 3] and np.load(out / ice["file"]).shape == (400, 3)
    assert np.allclose(np.load(out / ice["file"]).mean(0), group["pdp"])
    assert doc["pair"]["columns"] == ["x0", "x1"] and np.asarray(doc["pair"]["pdp"]).shape == (6, 6)
    assert any(rule.startswith("if x2 ") for rule in doc["surrogate"]["leaf_rules"])
    assert 0 < doc["surrogate"]["fidelity"] <= 1 and doc["units"] == "predicted probability of class 'positive'"
    assert doc["shap"]["rows"] == 12 and doc["shap"]["method"] == "shap_kernel"
    assert "Global shap_kernel over 12 rows" in text
    assert sorted(doc["figures"]) == sorted(p for p in written if p.endswith(".png"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--columns", "x0,height"], "Unknown column 'height'"),
        (["--pair", "x1,x1"], "two different columns"),
        (["--target", "2"], "Class index 2 is out of range"),
        (["--target", "purple"], "Class 'purple' is not one of the model's classes"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    run_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "global"
    assert main(["global", "--run", run_id, "--out", str(out), "--quiet", *extra]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1 and captured.out == ""
    assert not out.exists()


def test_a_run_that_is_not_a_table_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "runs", "shapes", "mlp", epochs=1)
    out = tmp_path / "global"
    assert main(["global", "--run", run.id, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "does not read table rows" in err and err.count("\n") == 1
    assert not out.exists()


def test_a_bad_out_folder_is_said_before_any_work(run_id: str, tmp_path: Path, capsys) -> None:
    file = tmp_path / "a_file"
    file.write_text("x")
    assert main(["global", "--run", run_id, "--out", str(file)]) == 2
    err = capsys.readouterr().err
    assert "is a file: give a folder" in err and err.count("\n") == 1
