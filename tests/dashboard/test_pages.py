"""Every page through streamlit's AppTest: training in the background, run selection, uploads,
methods side by side, per-method caching, comparison, and clear messages for bad input."""

from __future__ import annotations

import functools
import os
import time

import pytest
from app_pages import assert_ok, open_page
from app_pages import make_app as _make_app
from app_pages import texts as values
from streamlit.testing.v1 import AppTest

from xaidash.dashboard.services import job_manager

TIMEOUT = 120  # pages import torch and captum on their first run
make_app = functools.partial(_make_app, timeout=TIMEOUT)


def button(at: AppTest, label: str):
    found = [b for b in at.button if b.label == label]
    assert found, f"no button {label!r}; have {[b.label for b in at.button]}"
    return found[0]


def results_by_method(at: AppTest) -> dict[str, list[str]]:
    """Explain page: method label -> the caption under each of its maps (one per input)."""
    out: dict[str, list[str]] = {}
    current = None
    for c in values(at.caption):
        if c.startswith("**") and c.endswith("**"):
            current = c.strip("*")
        elif c.startswith("target ") and current:
            out.setdefault(current, []).append(c)
    return out


def wait_for_job(at: AppTest, predicate, timeout: float = 120) -> None:
    end = time.time() + timeout
    while not predicate(job_manager().current()):
        assert time.time() < end, f"job did not get there in time: {job_manager().current()}"
        time.sleep(0.3)
    at.run()
    assert_ok(at)


@pytest.fixture(autouse=True)
def _no_job_left_running():
    yield
    manager = job_manager()
    manager.stop()
    manager.wait(60)


def table(at: AppTest, key: str):
    found = [d for d in at.dataframe if d.key == key]
    assert found, f"no table {key!r}"
    return found[0].value


def click_row(at: AppTest, key: str, run_id: str) -> None:
    """What a click on a row does in the browser: the table's selection state names that row."""
    rows = list(table(at, key)["run"])
    at.session_state[key] = {"selection": {"rows": [rows.index(run_id)], "columns": [], "cells": []}}
    at.run()
    assert_ok(at)


def test_home_lists_data_sets_and_runs(runs):
    at = make_app()
    at.run()
    assert_ok(at)
    assert at.title[0].value == "xaidash"
    datasets = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert set(datasets["name"]) >= {"shapes", "digits", "cues"}
    assert datasets.set_index("name").loc["shapes", "status"] == "built in"
    assert set(table(at, "home_runs_table")["run"]) == {runs["image"], runs["text"]}
    assert any(b.label.startswith("Train the demo models") for b in at.button)  # the quick start
    sidebar = " ".join(values(at.sidebar.markdown) + values(at.sidebar.caption))
    assert "CPU" in sidebar or "GPU" in sidebar
    # A click on a row selects that run for every page (the sidebar shows it).
    other = runs["image"] if at.session_state["xai_selected_run"] == runs["text"] else runs["text"]
    click_row(at, "home_runs_table", other)
    assert at.session_state["xai_selected_run"] == other
    expected = "**mlp** on **shapes**" if other == runs["image"] else "**text_cnn** on **cues**"
    assert expected in values(at.sidebar.markdown)


def test_a_run_without_weights_gets_a_message(runs, tmp_path, monkeypatch):
    import shutil

    root = tmp_path / "runs"
    shutil.copytree(os.path.join(runs["root"], runs["image"]), root / "half-trained")
    (root / "half-trained" / "model.safetensors").unlink()
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    for page in ("views/explain.py", "views/compare.py"):
        at = open_page(make_app("half-trained"), page)
        assert any("has no weights yet" in v for v in values(at.error)), values(at.error)


def test_home_without_runs_says_how_to_start():
    at = make_app()
    at.run()
    assert_ok(at)
    assert any("No runs yet" in v and "quick start" in v for v in values(at.info))
    explain = open_page(make_app(), "views/explain.py")
    assert any("train a model first" in v for v in values(explain.info))


def test_train_form_warns_when_resnet18_would_start_from_random_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    at = open_page(make_app(), "views/train.py")
    at.selectbox(key="train_dataset").set_value("shapes").run()
    at.selectbox(key="train_model").set_value("resnet18").run()
    assert_ok(at)
    assert any("RANDOM weights" in str(w.value) for w in at.warning), [w.value for w in at.warning]


@pytest.mark.slow  # two training jobs through the job manager
def test_train_start_refuse_stop_finish_select_delete():
    at = open_page(make_app(), "views/train.py")
    at.selectbox(key="train_dataset").set_value("digits").run()
    at.selectbox(key="train_model").set_value("mlp").run()
    assert_ok(at)
    # A long job: a second Start is refused while it runs, then Stop ends it.
    at.number_input(key="train_epochs").set_value(500)
    at.number_input(key="train_batch").set_value(16)
    button(at, "Start training").click().run()
    assert_ok(at)
    assert job_manager().busy()
    button(at, "Start training").click().run()
    assert any("already running" in v for v in values(at.error)), values(at.error)
    wait_for_job(at, lambda j: j.state == "running" and j.step > 0)
    assert at.progress, "no progress bar while training"
    assert "ETA" in at.progress[0].text and "samples/s" in at.progress[0].text
    button(at, "Stop").click().run()
    wait_for_job(at, lambda j: not j.active)
    assert job_manager().current().state == "stopped"
    assert any("Stopped" in v for v in values(at.warning)), values(at.warning)

    stopped = job_manager().current().run_id
    assert stopped in set(table(at, "train_runs_table")["run"])

    # A short job runs to the end: test metrics, confusion matrix; the session that started it works with it.
    at.number_input(key="train_epochs").set_value(1)
    at.number_input(key="train_batch").set_value(64)
    at.number_input(key="train_max_samples").set_value(300)
    button(at, "Start training").click().run()
    wait_for_job(at, lambda j: not j.active)
    at.run()  # the page reruns once when it sees the job end
    job = job_manager().current()
    assert job.state == "completed", job.error
    assert any("Finished" in v for v in values(at.success)), values(at.success)
    assert at.session_state["xai_selected_run"] == job.run_id
    assert "Test accuracy" in [m.label for m in at.metric]
    assert any("mlp" in v for v in values(at.sidebar.markdown))

    # Delete the stopped run: select its row, then confirm.
    click_row(at, "train_runs_table", stopped)
    assert button(at, "Delete run").disabled
    at.checkbox(key="train_confirm_delete").check().run()
    button(at, "Delete run").click().run()
    assert_ok(at)
    assert any(f"Deleted run {stopped}" in v for v in values(at.success))
    assert list(table(at, "train_runs_table")["run"]) == [job.run_id]


def test_explain_uploaded_image_methods_side_by_side_and_param_cache(runs, make_png):
    at = open_page(make_app(runs["image"]), "views/explain.py")
    # The gallery (test split) works first: one sample is picked by default.
    assert results_by_method(at), values(at.caption)
    at.radio(key="explain_source").set_value("Upload images").run()
    at.file_uploader(key="explain_images").set_value(("red.png", make_png(40, 30), "image/png")).run()
    at.multiselect(key="explain_methods").set_value(["saliency", "ig", "occlusion"]).run()
    assert_ok(at)
    first = results_by_method(at)
    assert set(first) == {"Saliency", "Integrated Gradients", "Occlusion"}
    assert all(len(v) == 1 for v in first.values())
    assert any("red.png (40x30 RGB → 3x32x32)" in v for v in values(at.markdown))
    # Changing one method's parameter recomputes that method only.
    # The method choice survives a visit to another page.
    at.switch_page("views/home.py").run()
    at.switch_page("views/explain.py").run()
    at.radio(key="explain_source").set_value("Upload images").run()
    at.file_uploader(key="explain_images").set_value(("red.png", make_png(40, 30), "image/png")).run()
    assert at.multiselect(key="explain_methods").value == ["saliency", "ig", "occlusion"]
    at.number_input(key="explain_ig_steps").set_value(8).run()
    second = results_by_method(at)
    assert "cached" in second["Saliency"][0] and "cached" in second["Occlusion"][0]
    assert "cached" not in second["Integrated Gradients"][0]
    assert at.download_button, "no downloads"
    # A fixed target class and one colour scale.
    at.selectbox(key="explain_target_shapes").set_value("square")
    at.toggle(key="explain_shared").set_value(True).run()
    assert_ok(at)
    assert all(v[0].startswith("target square") for v in results_by_method(at).values())
    # Switching to a text run in the same session: only text methods remain, nothing breaks.
    at.session_state["xai_selected_run"] = runs["text"]
    at.run()
    assert_ok(at)
    assert set(at.multiselect(key="explain_methods").value) <= {"ig", "saliency", "lime", "shap_kernel"}
    assert any("xai-tokens" in v for v in values(at.markdown))


def test_explain_gallery_filters(runs):
    at = open_page(make_app(runs["image"]), "views/explain.py")
    at.radio(key="explain_show").set_value("misclassified").run()
    assert_ok(at)
    at.multiselect(key="explain_classes_shapes").set_value(["circle"]).run()
    assert_ok(at)
    headers = [v for v in values(at.markdown) if v.startswith("**test #")]
    assert (headers and all("true: **circle**" in h and "✗" in h for h in headers)) or any(
        "No test samples match" in v for v in values(at.info)
    )


def test_a_sample_link_opens_that_test_sample(runs):
    at = make_app(runs["image"])
    at.run()
    at.query_params["sample"] = "test:7"
    at.switch_page("views/explain.py").run()
    assert_ok(at)
    assert at.multiselect(key="explain_samples_shapes__all").value == [7]
    assert "sample" not in at.query_params  # used once, not stuck on the page
    assert any(v.startswith("**test #7") for v in values(at.markdown))


def test_explain_text_typed_and_csv(runs):
    at = open_page(make_app(runs["text"]), "views/explain.py")
    at.radio(key="explain_source").set_value("Type text").run()
    at.multiselect(key="explain_methods").set_value(["saliency", "ig"]).run()
    assert_ok(at)
    highlighted = [v for v in values(at.markdown) if "xai-tokens" in v]
    assert len(highlighted) == 2 * 2  # two lines x two methods
    assert "great" in highlighted[0]
    at.radio(key="explain_source").set_value("Upload .txt / .csv").run()
    csv = b"text,label\nthe acting was superb,positive\nthe plot was dull,negative\n"
    at.file_uploader(key="explain_textfile").set_value(("reviews.csv", csv, "text/csv")).run()
    assert_ok(at)
    headers = [v for v in values(at.markdown) if v.startswith("**reviews.csv")]
    assert len(headers) == 2 and "true: **positive**" in headers[0]


def test_bad_image_uploads_get_clear_messages(runs, make_png):
    big = make_png(10_000, 10_000, mode="1")
    good = make_png(32, 32)
    at = open_page(make_app(runs["image"]), "views/explain.py")
    at.radio(key="explain_source").set_value("Upload images").run()
    at.multiselect(key="explain_methods").set_value(["saliency"]).run()
    at.file_uploader(key="explain_images").set_value(
        [
            ("good.png", good, "image/png"),
            ("corrupt.png", good[: len(good) // 2], "image/png"),
            ("notes.png", b"these are my notes, not a picture\n" * 5, "image/png"),
            ("empty.png", b"", "image/png"),
            ("huge.png", big, "image/png"),
        ]
    ).run()
    assert_ok(at)
    errors = " | ".join(values(at.error))
    assert "corrupt.png is corrupt or truncated" in errors
    assert "notes.png is a text file, not an image" in errors
    assert "empty.png is empty (0 bytes)" in errors
    assert "huge.png is too large" in errors and "megapixels" in errors
    assert len(results_by_method(at)["Saliency"]) == 1  # the good file is still explained


def test_bad_text_inputs_get_clear_messages(runs):
    at = open_page(make_app(runs["text"]), "views/explain.py")
    at.radio(key="explain_source").set_value("Type text").run()
    at.text_area(key="explain_text").set_value("   \n  ").run()
    assert any("The text is empty" in v for v in values(at.warning))
    at.radio(key="explain_source").set_value("Upload .txt / .csv").run()
    at.file_uploader(key="explain_textfile").set_value(
        ("latin.txt", "café crème".encode("latin-1"), "text/plain")
    ).run()
    assert any("latin.txt is not UTF-8 text" in v for v in values(at.error))
    at.file_uploader(key="explain_textfile").set_value(("nothing.txt", b"", "text/plain")).run()
    assert any("nothing.txt is empty (0 bytes)" in v for v in values(at.error))
    at.file_uploader(key="explain_textfile").set_value(("blank.txt", b"\n  \n", "text/plain")).run()
    assert any("blank.txt contains no text" in v for v in values(at.error))
    # The app keeps working: a good file is explained.
    at.file_uploader(key="explain_textfile").set_value(("ok.txt", b"a wonderful film\n", "text/plain")).run()
    assert_ok(at)
    assert any("xai-tokens" in v for v in values(at.markdown))


def test_compare_metrics_agreement_and_sanity(runs):
    at = open_page(make_app(runs["image"]), "views/compare.py")
    at.multiselect(key="compare_methods").set_value(["saliency", "inputxgrad", "ig"]).run()
    at.number_input(key="compare_n").set_value(3)
    at.number_input(key="compare_sanity_steps").set_value(2)
    button(at, "Compare").click().run()
    assert_ok(at)
    table = at.dataframe[0].value  # metrics as rows, methods as columns (issue 29: it fits a 1440 px window)
    assert list(table.columns) == ["Saliency", "Input x Gradient", "Integrated Gradients"]
    assert {"Deletion AUC ↓", "Insertion AUC ↑", "Pointing game ↑", "Energy in mask ↑", "Runtime (s) ↓"} <= set(
        table.index
    )
    assert "Constant maps" in table.index
    # Only the path method (IG) has a reference: the others say n/a and why, never None.
    gap = table.loc["Completeness gap ↓"]
    assert gap["Integrated Gradients"][0].isdigit() or gap["Integrated Gradients"].startswith("★")
    assert all(gap[m] == "n/a: no declared total" for m in ("Saliency", "Input x Gradient"))
    assert not table.isin(["None", "nan"]).any().any()
    # Means come with their spread, and the best method per metric (row) is marked.
    assert "±" in table.loc["Deletion AUC ↓"].iloc[0]
    assert sum(str(v).startswith("★") for v in table.loc["Insertion AUC ↑"]) >= 1
    assert [s.value for s in at.subheader][:4] == ["Metrics", "Ranking", "Agreement", "Sanity check"]
    assert len(list(at.image)) >= 3 * 3  # trained + 2 randomised maps per method
    # methods x steps: mean ± interval [min, max] over the inputs
    sanity = next(d.value for d in at.dataframe if len(d.value.columns) and d.value.columns[0] == "0: trained")
    assert sanity.columns[0] == "0: trained" and len(sanity.columns) == 3
    assert all("[" in str(v) or str(v).startswith("n/a") for v in sanity.iloc[:, 1])
    # Same settings again: served from the per-run cache.
    at.run()
    assert any("(cached)" in v for v in values(at.caption))
    # Chosen indices out of range: a message, not a traceback.
    at.radio(key="compare_how").set_value("chosen indices").run()
    at.text_input(key="compare_indices").set_value("1, 99999").run()
    button(at, "Compare").click().run()
    assert_ok(at)
    assert any("out of range" in v for v in values(at.error))
