"""The Features page (AppTest) on a copy of the session's SmolLM2 run: its SAEs' held-out metrics in the table, the
browser of the one picked (or the one a link names), Start training from the form with the live panel and Stop,
Resume to the end with the new SAE's metrics; settings that cannot work get one line and leave nothing."""

from __future__ import annotations

import shutil

import pytest
from app_pages import assert_ok, open_run_page, texts
from tiny_sae import tiny_sae

from xaidash.dashboard.sae_jobs import sae_job
from xaidash.models.language.sae import store

SMALL = {  # seconds on one core: layer 1, 1,024 tokens of cues in 8 steps
    "sae_layer": 1,
    "sae_width": 32,
    "sae_k": 4,
    "sae_tokens": 1024,
    "sae_epochs": 1,
    "sae_context": 32,
    "sae_batch": 128,
    "sae_heldout": 256,
    "sae_corpus": "cues",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A copy of the SmolLM2 run holding a copy of the tiny SAE (the page writes under its run)."""
    from xaidash.models.runs.store import Run

    lm_run, sae_id = tiny_sae(tmp_path_factory)
    root = tmp_path_factory.mktemp("features_page") / lm_run.id
    shutil.copytree(lm_run.path, root, ignore=shutil.ignore_patterns("saes"))
    shutil.copytree(store.sae_folder(lm_run, sae_id), store.sae_folder(root, sae_id))
    return Run(root), sae_id


def page(run, monkeypatch, **params: str):
    at = open_run_page(run, "features", monkeypatch, timeout=240)
    if params:
        for k, v in params.items():
            at.query_params[k] = v
        at.run()
        assert_ok(at)
    return at


def fill(at, values: dict[str, int | str]):
    for key, value in values.items():
        widget = at.number_input(key=key) if isinstance(value, int) else at.selectbox(key=key)
        widget.set_value(value)
    at.run()
    assert_ok(at)
    return at


def button(at, label: str):
    return next(b for b in at.button if b.label == label)


def test_the_table_shows_held_out_metrics_and_the_browser_opens_the_linked_feature(run, monkeypatch):
    lm_run, sae_id = run
    record = store.read_record(lm_run, sae_id)
    at = page(lm_run, monkeypatch, sae=sae_id, feature="3")
    table = at.dataframe[0].value
    row = table[table["SAE"] == sae_id].iloc[0]
    assert row["status"] == "finished"
    assert row["explained variance"] == pytest.approx(record.metrics["explained_variance"])
    assert row["loss recovered"] == pytest.approx(record.metrics["loss_recovered"])
    assert row["L0"] == pytest.approx(record.metrics["l0"])
    assert f"Features of {sae_id}" in texts(at.subheader)
    assert "Feature 3" in texts(at.subheader)
    assert at.query_params["feature"] == "3"


def test_settings_that_cannot_work_get_one_line_and_leave_nothing(run, monkeypatch, tmp_path):
    lm_run, _ = run
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    at = page(lm_run, monkeypatch)
    before = sorted(p.name for p in store.saes_root(lm_run).iterdir())
    at.selectbox(key="sae_corpus").set_value("a text file or folder…").run()
    at.text_input(key="sae_corpus_path").set_value(str(empty)).run()
    button(at, "Start SAE training").click().run()
    assert_ok(at)
    assert len(at.error) == 1 and "is empty" in at.error[0].value
    fill(at, {"sae_corpus": "cues", "sae_tokens": 100, "sae_batch": 1024})
    button(at, "Start SAE training").click().run()
    assert len(at.error) == 1 and "fewer than one batch" in at.error[0].value
    assert sorted(p.name for p in store.saes_root(lm_run).iterdir()) == before
    assert not sae_job().snapshot().active


def test_start_stop_and_resume_from_the_page(run, monkeypatch):
    lm_run, _ = run
    before = {r.id for r in store.list_saes(lm_run)}
    at = page(lm_run, monkeypatch)
    fill(at, SMALL)
    assert any("Expected about" in c.value and "8 steps" in c.value for c in at.caption)
    button(at, "Start SAE training").click().run()
    assert_ok(at)
    job = sae_job()
    assert not at.error, texts(at.error)
    assert job.snapshot().active and job.snapshot().run_id == lm_run.id
    assert "Training an SAE" in texts(at.subheader)
    button(at, "Stop").click().run()  # Stop's callback, as the live panel's button calls it
    snap = job.wait(240)
    assert snap.state == "stopped", snap
    (new,) = {r.id for r in store.list_saes(lm_run)} - before
    assert store.read_record(lm_run, new).status == "stopped"

    at.run()
    assert_ok(at)
    assert any("keeps what it did" in i.value for i in at.info)
    assert at.selectbox(key="features_sae").value == new  # the SAE that just stopped, not the one picked before
    button(at, "Resume").click().run()
    assert_ok(at)
    snap = job.wait(240)
    assert snap.state == "finished" and snap.sae_id == new, snap
    at.run()
    assert_ok(at)
    assert any(f"SAE {new} is trained" in s.value for s in at.success)
    record = store.read_record(lm_run, new)
    assert record.status == "finished" and record.metrics is not None
    table = at.dataframe[0].value
    row = table[table["SAE"] == new].iloc[0]
    assert row["explained variance"] == pytest.approx(record.metrics["explained_variance"])
    assert f"Features of {new}" in texts(at.subheader)
