"""`--out DIR` of the commands that print results (influence, concepts, attack, counterfactual, generate): one JSON
document per command under one envelope (schema, schema_version, the run, inputs and parameters), every field of
the result object (a field added later appears by itself), large arrays as .npy files, and one line for a bad
folder. The commands' own runs are tiny (an untrained mlp on shapes, a tiny text_cnn on cues)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from inspect_runs import make_run

from xaidash.dashboard.cli import main
from xaidash.explainers.figures.result_json import (
    INLINE,
    SCHEMA_VERSION,
    check_result_folder,
    result_document,
    result_json,
    write_result,
)
from xaidash.explainers.params import ExplainError


@dataclass
class _Inner:
    score: float
    added_later: str = "appears"  # what another helper adds to a result: no serialiser change needed

    @property
    def doubled(self) -> float:
        return self.score * 2


@dataclass
class _Result:
    name: str
    inner: list[_Inner]
    image: np.ndarray
    small: np.ndarray
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return f"{self.name}: {len(self.inner)}"

    def to_json(self) -> dict:
        return {"name": self.name.upper(), "inner": [{"score": round(i.score, 1)} for i in self.inner]}


def test_result_json_keeps_every_field_property_and_to_json() -> None:
    r = _Result("a", [_Inner(1.25), _Inner(2.0)], np.ones((3, 40, 40), np.float32), np.arange(4.0))
    data, files = result_json(r)
    assert data["name"] == "A" and data["verdict"] == "a: 2"  # to_json refines, properties come along
    assert data["inner"][0] == {"score": 1.2, "added_later": "appears", "doubled": 2.5}
    assert data["small"] == [0.0, 1.0, 2.0, 3.0]
    assert data["image"] == {"file": "arrays/result.image.npy", "shape": [3, 40, 40], "dtype": "float32"}
    assert r.image.size > INLINE and np.array_equal(
        np.load(__import__("io").BytesIO(files[data["image"]["file"]])), r.image
    )


def test_document_envelope_and_writer(tmp_path: Path) -> None:
    r = _Result("a", [], np.zeros((50, 50)), np.zeros(2))
    doc, files = result_document("demo", r, run="run1", inputs={"input": "test:0"}, parameters={"k": 3})
    assert doc["schema"] == "xaidash.demo" and doc["schema_version"] == SCHEMA_VERSION
    assert doc["request"] == {"run": "run1", "inputs": {"input": "test:0"}, "parameters": {"k": 3}}
    written = write_result(tmp_path / "o", "demo.json", doc, files)
    assert sorted(p.relative_to(tmp_path / "o").as_posix() for p in written) == ["arrays/result.image.npy", "demo.json"]
    assert json.loads((tmp_path / "o" / "demo.json").read_text())["name"] == "A"
    with pytest.raises(ValueError, match="collide"):
        result_document("demo", {"schema": 1}, run=None, inputs={}, parameters={})


def test_bad_folders_are_one_clear_message(tmp_path: Path) -> None:
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    for bad, says in (
        (a_file, "is a file"),
        (a_file / "sub", "no folder can be made"),
        (tmp_path / "tcav.json", "give a folder, not a .json file"),
    ):
        with pytest.raises(ExplainError, match=says):
            check_result_folder(bad, "x.json")


def _envelope(data: dict, command: str, run: str) -> None:
    assert data["schema"] == f"xaidash.{command}" and data["schema_version"] == SCHEMA_VERSION
    assert data["command"] == f"xaidash {command}" and data["request"]["run"] == run
    assert data["request"]["parameters"] and "func" not in data["request"]["parameters"]


def test_influence_out_writes_proponents_and_opponents(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    run = make_run(tmp_path / "runs", "shapes", "mlp", epochs=2)
    out = tmp_path / "inf"
    argv = ["influence", "--run", run.id, "--input", "test:3", "-k", "4", "--device", "cpu"]
    assert main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
    data = json.loads((out / "influence.json").read_text())
    _envelope(data, "influence", run.id)
    assert data["request"]["inputs"]["input"] == "test:3" and data["request"]["parameters"]["k"] == 4
    assert data["method"] == "tracin_fast" and data["classes"] == list(run.info.classes)
    assert len(data["proponents"]) == 4 and len(data["opponents"]) == 4
    first = data["proponents"][0]
    assert {"index", "label", "dataset_label", "predicted", "probability", "score"} <= set(first)
    assert first["score"] >= data["proponents"][-1]["score"] and data["opponents"][0]["score"] <= 0
    assert data["target_name"] == data["classes"][data["target"]]
    assert "influence.json" in capsys.readouterr().out
    a_file = tmp_path / "taken"
    a_file.write_text("")
    assert main([*argv, "--out", str(a_file)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "is a file" in err and len(err.splitlines()) == 1


@pytest.mark.slow  # trains 3 random sets of CAVs
def test_concepts_out_is_a_folder(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    run = make_run(tmp_path / "runs", "shapes", "resnet_small", epochs=1)
    out = tmp_path / "tcav"
    argv = [
        "concepts",
        "--run",
        run.id,
        "--concept",
        "dataset:shapes:square",
        "--class",
        "circle",
        "--layers",
        "layers.2",
    ]
    argv += ["--random-sets", "2", "--examples", "8", "--inputs", "8", "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
    data = json.loads((out / "concepts.json").read_text())
    _envelope(data, "concepts", run.id)
    assert data["request"]["inputs"]["concepts"] == ["dataset:shapes:square"]
    assert data["target"] == "circle" and data["results"]
    row = data["results"][0]
    assert {"scores", "random_scores", "p_value", "p_adjusted", "cav_accuracy", "mean", "verdict"} <= set(row)
    assert main([*argv, "--out", str(tmp_path / "x.json")]) == 2
    assert "give a folder, not a .json file" in capsys.readouterr().err


def test_counterfactual_out_has_the_envelope_and_every_field(tmp_path: Path, monkeypatch, capsys) -> None:
    from train_configs import tiny_run

    root = tmp_path / "runs"
    run = tiny_run(root, "cues", "text_cnn")
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    out = tmp_path / "cf"
    text = "the plot was good and the cast was great"
    code = main(["counterfactual", "--run", str(run), "--input", text, "--to", "0", "--budget", "2", "--out", str(out)])
    if code == 2:  # a tiny model may already predict the class asked for
        assert "already predicts" in capsys.readouterr().err
        code = main(
            ["counterfactual", "--run", str(run), "--input", text, "--to", "1", "--budget", "2", "--out", str(out)]
        )
    assert code in (0, 1)
    data = json.loads((out / "counterfactual.json").read_text())
    _envelope(data, "counterfactual", data["run"])
    assert data["request"]["inputs"]["input"] == text and data["request"]["parameters"]["budget"] == "2"
    assert {"found", "summary", "search", "original_words", "probs_before", "target_name"} <= set(data)


def test_self_influence_out_writes_the_top_rows(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "runs"))
    run = make_run(tmp_path / "runs", "cues", "text_cnn", epochs=2)
    out = tmp_path / "self"
    assert main(["influence", "--run", run.id, "--self", "-k", "3", "--out", str(out), "--device", "cpu"]) == 0
    data = json.loads((out / "self_influence.json").read_text())
    _envelope(data, "influence", run.id)
    assert data["request"]["inputs"] == {"self": True} and data["status"]["complete"] is True
    assert [r["rank"] for r in data["ranking"]] == [1, 2, 3] and data["classes"] == list(run.info.classes)
    assert data["ranking"][0]["score"] >= data["ranking"][2]["score"]
