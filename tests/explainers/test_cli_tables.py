"""`xaidash explain` on a table run trained by the engine: `--input row:N` is row N of the test split (`row:train:N`
of the train split), the row is printed in its columns' units beside the prediction, and the report keeps the row's
values (report.json round trip) and shows it in words."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from train_configs import tiny_run

from xaidash.data.registry import load_split
from xaidash.explainers.cli import main
from xaidash.explainers.figures.report import ExplainReport
from xaidash.models.runs.store import load_bundle


@pytest.fixture(scope="module")
def cli_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("table_cli_runs")


@pytest.fixture(autouse=True)
def _runs_in_cli_root(_isolated_roots: None, cli_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(cli_root))


@pytest.fixture(scope="module")
def table_run(cli_root: Path) -> Path:
    return tiny_run(cli_root, "planted", "tabular_mlp")


def test_a_test_row_is_explained_and_printed_with_its_prediction(table_run, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    args = ["explain", "--run", table_run.name, "--input", "row:3", "--methods", "ig,occlusion", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out.splitlines()
    row = load_split("planted", "test").rows[3]
    bundle = load_bundle(table_run.name, device="cpu")
    probs = bundle.predict_proba(row)[0]
    top = int(probs.argmax())
    words = bundle.adapter.one_line(row, bundle.info, 4000)
    assert printed[-2] == f"row: {words}" and words.startswith(f"x0 {row[0].item():.4g}, x1 ")
    assert words.endswith(f"group {bundle.info.columns[-1].categories[int(row[-1])]}")
    assert printed[-1].startswith(
        f"planted test #3 (label {bundle.info.classes[int(load_split('planted', 'test').labels[3])]}): "
        f"predicted {bundle.info.classes[top]} ({probs[top].item():.1%}); 2/2 methods written to "
    )
    report = json.loads((out / "report.json").read_text())
    (shown,) = report["inputs"]
    assert shown["file"] is None and shown["text"] == words
    np.testing.assert_allclose(shown["values"], row.numpy(), rtol=1e-6)
    back = ExplainReport.read_dir(out)
    raw = back.inputs[0].raw()
    assert isinstance(raw, np.ndarray) and torch.equal(torch.from_numpy(raw), row)
    assert {e["method"] for e in report["explanations"]} == {"ig", "occlusion"}


def test_row_train_n_is_the_training_split_and_bad_rows_are_one_line(table_run, tmp_path, capsys) -> None:
    out = tmp_path / "train_row"
    args = ["explain", "--run", table_run.name, "--input", "row:train:7", "--methods", "ig", "--out", str(out)]
    assert main(args) == 0
    report = json.loads((out / "report.json").read_text())
    np.testing.assert_allclose(report["inputs"][0]["values"], load_split("planted", "train").rows[7].numpy())
    assert report["inputs"][0]["name"].startswith("planted train #7")
    capsys.readouterr()
    for spec, message in [
        ("row:400", "error: row:400 is out of range: the test split of planted has 400 samples."),
        (
            "row:x",
            "error: 'row:x': write row:INDEX or row:train:INDEX (INDEX a non-negative integer; the test split "
            "unless train: is given).",
        ),
    ]:
        assert main(["explain", "--run", table_run.name, "--input", spec, "--out", str(tmp_path / "no")]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [message]
        assert not (tmp_path / "no").exists()
