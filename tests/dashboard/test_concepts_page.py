"""The Concepts page in AppTest on an untrained run (make_run: the page only reads runs): concepts from the source
registry, a run of TCAV, the results with their significance, and a refusal shown as a message."""

from __future__ import annotations

import pytest
from app_pages import open_run_page, texts
from inspect_runs import make_run

from xaidash.explainers.concepts.sources import list_sources


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    return make_run(tmp_path_factory.mktemp("concept_page_runs"), "shapes_colour", "resnet_small", epochs=1)


def test_sources_come_from_the_registry_and_a_run_shows_scores(run, monkeypatch):
    at = open_run_page(run, "concepts", monkeypatch)
    assert at.title[0].value == "Concepts"
    source = at.radio(key="concepts_source")
    assert len(source.options) == len(list_sources("image"))
    # the data set class picker: shapes_colour's "square" (test split) as the concept
    at.selectbox(key="concepts_ds_class_shapes_colour").set_value("square")
    at.radio(key="concepts_ds_split").set_value("test")
    at.button(key="concepts_add").click().run()
    assert "dataset:shapes_colour:square:test" in "\n".join(texts(at.markdown))
    at.slider(key="concepts_random_sets").set_value(3)
    at.slider(key="concepts_examples").set_value(8)
    at.button[-1].click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, texts(at.error)
    shown = "\n".join(texts(at.success) + texts(at.warning))
    assert "shapes_colour:square" in shown and ("significant" in shown)
    charts = [str(c.proto.spec) for c in at.main.get("vega_lite_chart")]
    assert len(charts) == 1 and "TCAV score" in charts[0] and "random sets vs each other" in charts[0]
    table = at.dataframe[0].value
    assert list(table["layer"]) == ["layers.1"] and "p (Bonferroni)" in table.columns
    assert any("How to read" in c for c in texts(at.caption))


def test_a_bad_concept_is_a_message_not_a_traceback(run, monkeypatch):
    at = open_run_page(run, "concepts", monkeypatch, concepts_chosen=["gallery:1,2"])
    at.button[-1].click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    assert any("needs at least 5" in e for e in texts(at.error)), texts(at.error)


def test_a_concept_made_of_the_tested_class_is_flagged_not_green(run, monkeypatch):
    at = open_run_page(run, "concepts", monkeypatch, concepts_chosen=["dataset:shapes_colour:circle:train"])
    tested = next(s for s in at.selectbox if s.label == "Class to test")
    assert tested.value == "circle"  # the concept's own class
    at.slider(key="concepts_random_sets").set_value(3)
    at.slider(key="concepts_examples").set_value(8)
    at.button[-1].click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.success, texts(at.success)  # never green, whatever the t-test says
    shown = "\n".join(texts(at.warning)).lower()
    assert "flagged: no finding" in shown and "circular" in shown and "the class being tested" in shown, shown
    table = at.dataframe[0].value
    assert list(table["result"]) == ["flagged: no finding"] and "flags" in table.columns
    assert "0 findings" in "\n".join(texts(at.caption))
