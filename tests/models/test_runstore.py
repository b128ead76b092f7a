"""Run folders: listing, resolving, deleting, and clear errors."""

from __future__ import annotations

import pytest

from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run, delete_run, list_runs, load_bundle, resolve_run, runs_root
from xaidash.models.runs.table import runs_table


def test_runs_root_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path / "elsewhere"))
    assert runs_root() == tmp_path / "elsewhere"


def test_create_resolve_list_delete():
    a = Run.create("imagefolder:/some/where", "resnet_small")
    b = Run.create("shapes", "resnet_small")
    assert "/" not in a.id and a.id != b.id
    for r in (a, b):
        r.write_config({"model": "resnet_small", "dataset": "shapes", "created": 0})
    assert {r.id for r in list_runs()} == {a.id, b.id}
    assert resolve_run(a.id).path == a.path and resolve_run(str(a.path)).path == a.path
    delete_run(a.id)
    assert [r.id for r in list_runs()] == [b.id]


def test_unknown_run_and_damaged_files_give_clear_errors():
    with pytest.raises(ModelError, match="not found"):
        resolve_run("nope")
    with pytest.raises(ModelError, match="No runs"):
        resolve_run("latest")
    r = Run.create("shapes", "resnet_small")
    r.file("config.json").write_text("{ broken")
    with pytest.raises(ModelError, match=r"config\.json is damaged: not JSON"):
        load_bundle(r.id)


def test_metrics_reader_skips_a_torn_line():
    r = Run.create("shapes", "mlp")
    r.write_metrics([{"kind": "epoch", "epoch": 1}])
    with open(r.file("metrics.jsonl"), "a") as f:
        f.write('{"kind": "ep')
    assert r.metrics() == [{"kind": "epoch", "epoch": 1}]


def test_runs_table_has_one_row_per_run_and_survives_a_damaged_one():
    good = Run.create("digits", "mlp")
    good.write_config(
        {
            "model": "mlp",
            "dataset": "digits",
            "dataset_info": {"name": "digits", "modality": "image", "classes": ["0", "1"]},
            "train": {"epochs": 3},
            "device": "cpu",
            "created": 1_700_000_000,
        }
    )
    good.update_summary(state="completed", epochs_done=3, val_acc=0.91234, test_acc=None)
    incomplete = Run.create("shapes", "mlp")
    incomplete.write_config({"dataset": "shapes"})  # no model, no train settings
    corrupt = Run.create("cues", "mlp")
    corrupt.file("config.json").write_text("{ torn")
    rows = {r["run"]: r for r in runs_table()}
    assert set(rows) == {good.id, incomplete.id, corrupt.id}
    assert rows[good.id] | {"date": "?"} == {
        "run": good.id,
        "model": "mlp",
        "dataset": "digits",
        "state": "completed",
        "epochs": "3/3",
        "val acc": "91.2%",
        "test acc": "–",
        "quality": "✓ good",
        "device": "cpu",
        "date": "?",
    }
    assert rows[good.id]["date"].startswith("2023-11-1")
    assert (
        rows[incomplete.id]["state"] == f"unreadable: {incomplete.id}/config.json is damaged: model is missing."
        and rows[incomplete.id]["model"] == "?"
    )
    assert (
        rows[corrupt.id]["state"].startswith("unreadable: ")
        and "config.json is damaged: not JSON" in rows[corrupt.id]["state"]
    )
