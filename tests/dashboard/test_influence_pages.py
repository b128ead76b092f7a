"""Training-data attribution in the dashboard through AppTest: Explain's "Training samples behind this prediction"
panel (computed on request, both galleries, links to `?sample=train:N`, cached), `?sample=train:N` itself, the
Training data page (the background self-influence job, the ranked table, flags saved with the run, the exports), and
the refusals (an imported run, a run with one checkpoint)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pandas as pd
import pytest
from imported_models import import_external
from streamlit.testing.v1 import AppTest

from xaidash.dashboard.components import influence_table
from xaidash.dashboard.components.influence_panel import TITLE
from xaidash.explainers.influence import list_influence_methods
from xaidash.explainers.influence.flags import export_rows, read_flags, set_flag
from xaidash.models.runs.store import Run

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
TIMEOUT = 240  # the first run imports torch and captum; the panel computes the training features once


@pytest.fixture(scope="module")
def influence_root(trained_shapes_run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A copy of the shared trained shapes run (2 epochs, 2 checkpoints) that these tests may write caches, the
    self-influence job and flags into (the shared run is only read), and an imported model without a data set."""
    root = tmp_path_factory.mktemp("influence_runs")
    src = trained_shapes_run.run.path
    shutil.copytree(src, root / src.name, ignore=shutil.ignore_patterns(".lock", "influence"))
    imported = import_external("module", tmp_path_factory.mktemp("influence_module"), root)
    return {"root": str(root), "trained": src.name, "imported": imported.id}


def _app(run_id: str, page: str, query: dict[str, str] | None = None, errors: bool = False) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.session_state["xai_selected_run"] = run_id
    at.run()
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.switch_page(page).run()
    _ok(at, errors)
    return at


def _explain(run_id: str, query: dict[str, str] | None = None) -> AppTest:
    at = _app(run_id, "views/explain.py", query)
    at.multiselect(key="explain_methods").set_value(["saliency"]).run()  # one fast method: the panel is the subject
    _ok(at)
    return at


def _ok(at: AppTest, errors: bool = False) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert errors or not at.error, [e.value for e in at.error]


def _texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def _panel(at: AppTest):
    return next(e for e in at.expander if e.label == TITLE)


@pytest.mark.long(seconds=60)
def test_panel_and_training_data_page(influence_root, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", influence_root["root"])
    run_id = influence_root["trained"]
    run = Run(Path(influence_root["root"]) / run_id)

    # Explain: the panel is closed and computes nothing until asked.
    at = _explain(run_id)
    panel = _panel(at)
    assert not panel.proto.expanded
    assert not any("**Supporting**" in t for t in _texts(panel.markdown))
    featured = list_influence_methods()[0].id
    assert panel.selectbox(key="influence_0_method").value == featured, "the featured method is the default"
    panel.button(key="influence_0_go").click().run()
    _ok(at)
    panel = _panel(at)
    texts = _texts(panel.markdown)
    header = next(t for t in texts if "checkpoints: epochs 1, 2" in t)
    assert "`fc`" in header and "score units:" in header
    assert "**Supporting**" in texts and "**Opposing**" in texts
    links = [(str(e.proto.label), str(e.proto.query_string)) for e in panel.get("page_link")]
    assert 2 <= len(links) <= 16 and all(label.startswith("train #") for label, _ in links)
    index = int(links[0][0].removeprefix("train #"))
    assert f"sample=train%3A{index}" in links[0][1] or f"sample=train:{index}" in links[0][1]
    assert any(t.startswith("score **+") for t in texts) and any(t.startswith("score **-") for t in texts)
    assert any(t.startswith("label ") and " · predicted " in t for t in _texts(panel.caption))

    # Cached per run, input, method and target: a fresh session draws it at once, without the button.
    again = _explain(run_id)
    panel = _panel(again)
    assert "**Supporting**" in _texts(panel.markdown)
    assert not [b for b in panel.button if b.key == "influence_0_go"]

    # The supporting sample's link opens it on Explain as "train #N".
    linked = _explain(run_id, {"sample": f"train:{index}"})
    assert any(f"**train #{index}**" in t for t in _texts(linked.markdown))

    # The Training data page: not computed, Start runs the job in the background, then the ranked table.
    page = _app(run_id, "views/training_data.py")
    assert any("Not computed yet." in t for t in _texts(page.markdown))
    page.button(key="self_influence_start").click().run()
    _ok(page)
    deadline = time.time() + 180
    while not any("Complete:" in t for t in _texts(page.markdown)):
        assert time.time() < deadline, "the self-influence job did not finish in 3 minutes"
        time.sleep(1.0)
        page.run()
        _ok(page)
    assert any(s.value == "Possible label errors" for s in page.subheader)
    table = page.dataframe[0].value  # the data editor (AppTest lists it with the data frames)
    assert len(table) == influence_table.PAGE_ROWS and list(table["rank"]) == list(range(1, len(table) + 1))
    assert {"sample", "trained as", "data set label", "predicted", "score", "mislabelled", "note"} <= set(table.columns)
    assert str(table["sample"].iloc[0]).startswith("data:image/png;base64,"), "a thumbnail per row"
    first = int(table["index"].iloc[0])
    assert table["open"].iloc[0] == f"explain?sample=train:{first}&run={run_id}", "each row opens on Explain"
    assert any("0 flagged" in t for t in _texts(page.caption))

    # A flag is kept with the run and counted; the exports hold the ranking and the flagged samples.
    top = int(export_rows(run, "tracin_fast", only_flagged=False)[0]["index"])
    set_flag(run, top, True, "looks wrong")
    page.run()
    _ok(page)
    assert any("1 flagged" in t for t in _texts(page.caption))
    labels = [str(b.proto.label) for b in page.get("download_button")]
    assert "Flagged, 1 (CSV)" in labels and "Ranking (CSV)" in labels
    everything = export_rows(run, "tracin_fast", only_flagged=False)
    assert len(everything) == 5700 and [r["rank"] for r in everything[:3]] == [1, 2, 3]
    assert everything[0]["score"] >= everything[-1]["score"]
    flagged = export_rows(run, "tracin_fast", only_flagged=True)
    assert [(r["index"], r["note"], r["rank"]) for r in flagged] == [(top, "looks wrong", 1)]
    csv = influence_table._csv(flagged).decode()
    assert csv.splitlines()[0].startswith("rank,index,label,dataset_label") and "looks wrong" in csv


def test_editor_edits_are_saved_as_flags(influence_root, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's checkbox and note columns write through flags.py (the editor's output, as Streamlit returns it)."""
    monkeypatch.setenv("XAIDASH_RUNS", influence_root["root"])
    run = Run(Path(influence_root["root"]) / influence_root["trained"])
    before = pd.DataFrame({"index": [11, 12, 13], "mislabelled": [False, False, True], "note": ["", "", "x"]})
    set_flag(run, 13, True, "x")
    after = before.copy()
    after.loc[0, ["mislabelled", "note"]] = [True, "a cross"]
    after.loc[2, "mislabelled"] = False
    assert influence_table._save_edits(run, before, after) == 2
    assert read_flags(run).get(11) == "a cross" and 13 not in read_flags(run)
    assert influence_table._save_edits(run, after, after) == 0


def test_train_sample_links(runs) -> None:
    """?sample=train:N opens that training sample as the input (named "train #N", its label shown); a bad N is
    answered like a bad test index."""
    at = _explain(runs["image"], {"sample": "train:5"})
    assert any("**train #5**" in t and "true: **" in t for t in _texts(at.markdown))
    assert any("Training sample #5 of 6,000" in t for t in _texts(at.caption))
    assert at.radio(key="explain_source").value == "Training sample"

    text = _explain(runs["text"], {"sample": "train:3"})
    assert any("**train #3**" in t for t in _texts(text.markdown))

    at = _app(runs["image"], "views/explain.py", {"sample": "train:999999"}, errors=True)
    assert any("Cannot open train sample #999999" in e and "6,000 samples" in e for e in _texts(at.error))
    at = _app(runs["image"], "views/explain.py", {"sample": "train:x"}, errors=True)
    assert any("?sample=train:INDEX" in e for e in _texts(at.error))


def test_refusals(runs, influence_root, monkeypatch: pytest.MonkeyPatch) -> None:
    """One checkpoint: the panel and the page name the method that needs more and why; an imported model without a
    data set: the page says nothing applies and what to do."""
    at = _explain(runs["image"])
    panel = _panel(at)
    caption = next(t for t in _texts(panel.caption) if t.startswith("Not available for this run"))
    assert "TracIn (all layers, projected)" in caption and "needs at least 2" in caption
    page = _app(runs["image"], "views/training_data.py")
    assert any("needs at least 2" in t for t in _texts(page.caption))
    assert any("Not computed yet." in t for t in _texts(page.markdown))

    monkeypatch.setenv("XAIDASH_RUNS", influence_root["root"])
    page = _app(influence_root["imported"], "views/training_data.py")
    info = " ".join(_texts(page.info))
    assert "Self-influence cannot be computed for this run" in info and "imported" in info
    assert not page.dataframe


def test_background_job_stops_resumes_and_reports_failures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The Training data page's job (dashboard/influence_jobs.py): one at a time, Stop ends it after its chunk in the
    'stopped' state, a failure ends in 'failed' with the message; the library call is a stand-in here."""
    from xaidash.dashboard import influence_jobs
    from xaidash.explainers.influence import SelfInfluenceStatus
    from xaidash.explainers.params import ExplainError

    def fake(run, method, progress=None, stop=None, device="auto"):
        done = 0
        while not stop.is_set() and done < 10_000:
            done += 1
            status = SelfInfluenceStatus(method, done, 10_000, False, 0.01 * done, 1.0)
            progress(status)
            time.sleep(0.005)
        return status

    monkeypatch.setattr(influence_jobs, "run_self_influence", fake)
    job = influence_jobs.BackgroundSelfInfluence()
    run = Run(tmp_path / "r")
    assert job.start(run, "m") and not job.start(run, "m"), "one job at a time"
    deadline = time.time() + 10
    while job.snapshot().status is None:
        assert time.time() < deadline
        time.sleep(0.01)
    assert job.stop() and job.snapshot().state == "stopping"
    snap = job.wait(10)
    assert snap.state == "stopped" and snap.status is not None and 0 < snap.status.done < 10_000
    assert not job.stop(), "nothing to stop"

    def broken(run, method, progress=None, stop=None, device="auto"):
        raise ExplainError("no checkpoints")

    monkeypatch.setattr(influence_jobs, "run_self_influence", broken)
    assert job.start(run, "m")
    snap = job.wait(10)
    assert snap.state == "failed" and snap.error == "no checkpoints"
