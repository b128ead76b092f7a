"""The data-set report through AppTest: Compare's "Whole data set" view for a run with an attribution store
(header, metrics over all samples, per class, distributions, the sortable table) and the how-to for a run
without one; a row click opens the sample on Explain with its stored maps, nothing recomputed; Recompute
live hands the sample and methods to the live page."""

from __future__ import annotations

import pytest
from app_pages import assert_ok, make_app, texts
from dataset_stores import HIGHEST_LOSS, WORST_DELETION, write_store
from inspect_runs import make_run
from streamlit.testing.v1 import AppTest

from xaidash.data.registry import get_info
from xaidash.models.runs.store import Run

TIMEOUT = 180
VIEW = "compare_view"


@pytest.fixture(scope="module")
def report_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("report_runs")
    stored = make_run(root, "shapes", "mlp", epochs=1)
    write_store(stored, n=40, methods=("saliency", "ig"), chunk=20)
    partial = make_run(root, "shapes", "mlp", epochs=1)
    write_store(partial, n=40, methods=("saliency",), chunk=20, done=20)
    text = make_run(root, "cues", "text_cnn", epochs=1)
    write_store(text, n=12, methods=("saliency", "ig"), chunk=6)
    bare = make_run(root, "shapes", "mlp", epochs=1)
    return {"stored": stored, "partial": partial, "text": text, "bare": bare}


def open_report(run: Run, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    at = make_app(run.id, TIMEOUT)
    at.run()
    at.switch_page("views/compare.py").run()
    assert_ok(at)
    at.session_state[VIEW] = "Whole data set"
    at.run()
    assert_ok(at)
    return at


def sample_table(at: AppTest):
    found = [d for d in at.dataframe if (d.key or "").startswith("dsr_table_")]
    assert len(found) == 1, [d.key for d in at.dataframe]
    return found[0]


def no_recomputation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any explanation computed from here on fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the stored view recomputed an explanation")

    monkeypatch.setattr("xaidash.explainers.scoring.explain_and_score", refuse)
    monkeypatch.setattr("xaidash.explainers.api.explain", refuse)


def test_compare_shows_the_report_of_a_run_with_a_store(report_runs, monkeypatch):
    run = report_runs["stored"]
    at = open_report(run, monkeypatch)
    assert [m.label for m in at.metric][:2] == ["Samples explained of 40", "Accuracy on them"]
    assert (at.metric[0].label, at.metric[0].value) == ("Samples explained of 40", "40")
    assert not any("Incomplete" in w for w in texts(at.warning))
    captions = "\n".join(texts(at.caption))
    assert "methods: **saliency, ig**" in captions and "`--input dataset:0:40`" in captions
    assert [s.value for s in at.main.subheader] == ["Metrics over all samples", "Per class", "Distributions", "Samples"]
    summary = next(d.value for d in at.dataframe if "Integrated Gradients" in list(d.value.columns))
    assert list(summary.columns) == ["Saliency", "Integrated Gradients"]
    assert list(summary.index) == ["Deletion AUC ↓", "Insertion AUC ↑", "Runtime (s) ↓"]
    assert sum("★" in str(v) for v in summary.loc["Deletion AUC ↓"]) == 1
    assert all(" · sd " in str(v) for v in summary.loc["Insertion AUC ↑"])
    # per class heatmap, then a box plot and a histogram per quality metric (deletion, insertion; not runtime)
    charts = [str(c.proto.spec) for c in at.main.get("vega_lite_chart")]
    assert len(charts) == 1 + 2 * 2
    assert '"true class"' in charts[0] and "lower is better: bright = better" in charts[0]  # axis and legend titles
    assert all('"title": "Deletion AUC (0' in c and '1, lower is better)"' in c for c in charts[1:3])  # unit, way
    assert all('"title": "Insertion AUC (0' in c and '1, higher is better)"' in c for c in charts[3:5])
    assert '"samples per bin"' in charts[2]
    classes = next(d.value for d in at.dataframe if "accuracy" in d.value.columns)
    assert classes["samples"].sum() == 40

    table = sample_table(at).value
    assert len(table) == 40 and table["index"].iloc[0] == WORST_DELETION  # worst deletion AUC first
    assert {"Saliency deletion AUC", "Integrated Gradients insertion AUC", "disagreement", "loss"} <= set(table.columns)
    at.selectbox(key="dsr_sort").set_value("highest loss").run()
    assert sample_table(at).value["index"].iloc[0] == HIGHEST_LOSS
    at.radio(key="dsr_which").set_value("misclassified").run()
    shown = sample_table(at).value
    assert len(shown) < 40 and not shown["correct"].any()
    first_class = shown["label"].iloc[0]
    at.multiselect(key="dsr_classes_shapes_test").set_value([first_class]).run()
    assert set(sample_table(at).value["label"]) == {first_class}
    # Another run, of another data set, with its own store: its report, no class left over from shapes.
    at.session_state["xai_selected_run"] = report_runs["text"].id
    at.run()
    assert_ok(at)
    assert at.multiselect(key="dsr_classes_cues_test").value == []
    cues = sample_table(at).value  # still misclassified only, highest loss first: those filters apply anywhere
    assert 0 < len(cues) < 12 and set(cues["label"]) <= set(get_info("cues").classes) and not cues["correct"].any()


def test_an_incomplete_store_says_how_to_resume(report_runs, monkeypatch):
    run = report_runs["partial"]
    at = open_report(run, monkeypatch)
    assert (at.metric[0].label, at.metric[0].value) == ("Samples explained of 40", "20")
    assert any("Incomplete: 20 of 40" in w for w in texts(at.warning))
    codes = texts(at.code)
    assert (
        f"xaidash explain --run {run.id} --input dataset:0:40 --split test --methods saliency --metrics --chunk-size 20"
        in codes
    )
    assert len(sample_table(at).value) == 20


def test_a_run_without_a_store_gets_the_command_not_empty_charts(report_runs, monkeypatch):
    run = report_runs["bare"]
    at = open_report(run, monkeypatch)
    assert any("no attribution store yet" in i for i in texts(at.info))
    assert any(c.startswith(f"xaidash explain --run {run.id} --input dataset:all --split test") for c in texts(at.code))
    assert not at.main.get("vega_lite_chart") and not at.metric
    # the other view is the live comparison, as before
    at.session_state[VIEW] = "Sample of inputs"
    at.run()
    assert_ok(at)
    assert any(b.label == "Compare" for b in at.button)


def test_a_row_click_opens_the_stored_maps_on_explain(report_runs, monkeypatch):
    run = report_runs["stored"]
    at = open_report(run, monkeypatch)
    table = sample_table(at)
    row = list(table.value["index"]).index(WORST_DELETION)
    no_recomputation(monkeypatch)
    at.session_state[table.key] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    assert_ok(at)
    assert at.title[0].value == "Explain"
    assert at.query_params["stored"] in (f"test:{WORST_DELETION}", [f"test:{WORST_DELETION}"])
    note = texts(at.info)[0]
    assert f"test #{WORST_DELETION}: stored by `xaidash explain --input dataset:0:40 --split test`" in note
    assert "not recomputed" in note
    bars = [v for v in texts(at.markdown) if 'class="xai-cbar"' in v]
    assert any("logit contribution per pixel" in b and "red = raises" in b for b in bars)  # IG: signed
    assert any("∂ logit / ∂ pixel" in b and "red =" not in b for b in bars)  # saliency: unsigned
    captions = texts(at.caption)
    assert captions.count("**Saliency**") == 1 and captions.count("**Integrated Gradients**") == 1
    assert sum(c.startswith("target ") and "· stored" in c for c in captions) == 2
    metrics = next(d.value for d in at.dataframe if "Deletion AUC ↓" in list(d.value.columns))
    assert list(metrics.index) == ["Saliency", "Integrated Gradients"]
    assert metrics["Deletion AUC ↓"].tolist() == ["0.990", "0.990"]
    assert not any(b.label == "Download all (.zip)" for b in at.get("download_button"))  # the live page is not drawn
    # The browser is on Explain now (AppTest itself stays on the page it was told to open): so is the test.
    at.switch_page("views/explain.py")
    # heatmap instead of overlay: still the stored maps
    at.radio(key="explain_stored_display").set_value("heatmap").run()
    assert_ok(at)
    assert any("not recomputed" in i for i in texts(at.info))
    monkeypatch.undo()  # the live page may compute again

    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    at.button(key="explain_stored_recompute").click().run()
    assert_ok(at)
    assert "stored" not in at.query_params
    assert at.multiselect(key="explain_methods").value == ["saliency", "ig"]
    assert at.multiselect(key="explain_samples_shapes__all").value == [WORST_DELETION]
    assert sum(c.startswith("target ") and "stored" not in c for c in texts(at.caption)) == 2


def test_text_stored_view_highlights_the_stored_words(report_runs, monkeypatch):
    run = report_runs["text"]
    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    no_recomputation(monkeypatch)
    at = make_app(run.id, TIMEOUT)
    at.query_params["stored"] = "test:4"
    at.run()
    at.switch_page("views/explain.py").run()
    assert_ok(at)
    assert any("not recomputed" in i for i in texts(at.info))
    assert sum("xai-tokens" in v for v in texts(at.markdown)) == 2
    assert any("logit contribution per word" in v for v in texts(at.markdown))


def test_a_bad_stored_link_falls_back_to_the_live_page(report_runs, monkeypatch):
    run = report_runs["bare"]
    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    at = make_app(run.id, TIMEOUT)
    at.query_params["stored"] = "test:3"
    at.run()
    at.switch_page("views/explain.py").run()
    assert_ok(at)
    assert any("has no store for that split" in w for w in texts(at.warning))
    assert at.multiselect(key="explain_methods").value  # the live page is drawn
