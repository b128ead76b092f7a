"""Flags of mislabelled training samples (explainers/influence/flags.py): kept under the run in one JSON file written
atomically, indices checked against the train split, a damaged or unwritable file reported without losing a flag,
and the rows the Training data page offers for download."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pandas as pd
import pytest
from inspect_runs import make_run

from xaidash.explainers.influence import flags
from xaidash.explainers.params import ExplainError
from xaidash.models.runs.store import Run

SHAPES_TRAIN = 6000  # the shapes data set's train split


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return make_run(tmp_path / "runs", "shapes", "mlp", epochs=1)


def test_set_read_unset(run: Run) -> None:
    assert flags.read_flags(run) == {}
    flags.set_flag(run, 12, True, "looks like a square")
    flags.set_flag(run, 3, True)
    assert flags.read_flags(run) == {3: "", 12: "looks like a square"}
    document = json.loads((run.path / "influence" / "flags.json").read_text())
    assert document["flags"] == {"3": "", "12": "looks like a square"} and document["version"] == 1
    flags.set_flag(run, 12, False)
    flags.set_flag(run, 99, False)  # never flagged: nothing to do
    assert flags.read_flags(run) == {3: ""}
    assert not [p for p in (run.path / "influence").iterdir() if p.name.endswith(".tmp")], "no temporary file left"


@pytest.mark.parametrize("index", [-1, SHAPES_TRAIN, 10**9, True, 2.0, "4"])
def test_bad_index_is_refused_and_nothing_written(run: Run, index) -> None:
    with pytest.raises(ExplainError) as err:
        flags.set_flag(run, index, True)
    assert "training sample" in str(err.value) or "whole number" in str(err.value)
    assert not (run.path / "influence" / "flags.json").exists()
    flags.set_flag(run, SHAPES_TRAIN - 1, True)  # the last one is valid
    assert flags.read_flags(run) == {SHAPES_TRAIN - 1: ""}


def test_damaged_file_is_reported_not_overwritten(run: Run) -> None:
    path = run.path / "influence" / "flags.json"
    path.parent.mkdir(parents=True)
    for damage in ("{not json", json.dumps({"flags": {"x": 1}}), json.dumps([1, 2])):
        path.write_text(damage)
        with pytest.raises(ExplainError, match="damaged"):
            flags.read_flags(run)
        with pytest.raises(ExplainError, match="damaged"):
            flags.set_flag(run, 1, True)
        assert path.read_text() == damage, "a damaged list is kept for the user to look at"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_folder_is_a_clear_message(run: Run) -> None:
    flags.set_flag(run, 1, True, "kept")
    folder = run.path / "influence"
    folder.chmod(0o500)
    try:
        with pytest.raises(ExplainError, match="previous list is kept"):
            flags.set_flag(run, 2, True)
    finally:
        folder.chmod(0o700)
    assert flags.read_flags(run) == {1: "kept"}


def test_concurrent_flags_are_all_kept(run: Run) -> None:
    threads = [threading.Thread(target=flags.set_flag, args=(run, i, True, f"n{i}")) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert flags.read_flags(run) == {i: f"n{i}" for i in range(12)}


def test_export_rows(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    table = pd.DataFrame(
        {
            "rank": [1, 2, 3],
            "index": [40, 7, 300],
            "label": [1, 0, 2],
            "dataset_label": [0, 0, 2],
            "predicted": [0, 0, 3],
            "probability": [0.9, 0.8, 0.5],
            "score": [3.5, 1.25, 0.5],
        }
    )
    monkeypatch.setattr(flags, "self_influence_table", lambda r, method: table if method == "m" else None)
    flags.set_flag(run, 40, True, "a circle")
    flags.set_flag(run, 5000, True)  # flagged, not in the (partial) ranking
    classes = run.info.classes
    rows = flags.export_rows(run, "m", only_flagged=False)
    assert [r["index"] for r in rows] == [40, 7, 300] and [r["rank"] for r in rows] == [1, 2, 3]
    first = rows[0]
    assert first["label"] == classes[1] and first["dataset_label"] == classes[0] and first["label_differs"]
    assert first["predicted"] == classes[0] and first["score"] == 3.5 and first["method"] == "m"
    assert first["flagged"] and first["note"] == "a circle"
    assert not rows[1]["flagged"] and not rows[1]["label_differs"]
    only = flags.export_rows(run, "m", only_flagged=True)
    assert [r["index"] for r in only] == [40, 5000]
    assert only[1]["rank"] is None and only[1]["flagged"]
    assert all(list(r) == list(flags.EXPORT_COLUMNS) for r in rows + only), "one column order for the CSV"
    never = flags.export_rows(run, "other", only_flagged=True)  # not computed: the flags alone
    assert [r["index"] for r in never] == [40, 5000]
    assert flags.export_rows(run, "other", only_flagged=False) == []
    json.dumps(rows), json.dumps(only)  # plain JSON values
