"""A first hour that never misleads (issue 21), through AppTest: a paste over 20,000 characters keeps its first
20,000 with a notice, a long text says how many of its words the model reads and shows only those, a `?run=` link
to a run that does not exist says so and which run is shown, and the sidebar's run picker switches runs in place
on every page, each run keeping its own methods."""

from __future__ import annotations

import pytest
from app_pages import assert_ok, make_app, texts
from inspect_runs import make_run
from streamlit.testing.v1 import AppTest

from xaidash.explainers.params import MAX_TEXT_CHARS

TIMEOUT = 180  # the page imports torch and captum on its first run
PICKER = "xai_run_picker"


def _explain(run_id: str) -> AppTest:
    at = make_app(run_id, TIMEOUT)
    at.run()
    at.switch_page("views/explain.py").run()
    assert_ok(at)
    return at


def _typed(at: AppTest, text: str) -> None:
    at.text_area(key="explain_text").input(text).run()
    assert_ok(at)


@pytest.fixture
def text_explain(runs) -> AppTest:
    at = _explain(runs["text"])
    at.multiselect(key="explain_methods").set_value(["saliency"]).run()
    at.radio(key="explain_source").set_value("Type text").run()
    assert_ok(at)
    return at


@pytest.mark.parametrize("length", [MAX_TEXT_CHARS + 1, 30_000])
def test_a_paste_over_the_limit_keeps_its_first_20000_characters(text_explain: AppTest, length: int) -> None:
    at = text_explain
    _typed(at, ("the plot was dull " * 2000)[:length])
    assert len(at.text_area(key="explain_text").value) == MAX_TEXT_CHARS  # the box shows what is explained
    warnings = texts(at.warning)
    assert any(f"A line of {length:,} characters was cut to the first 20,000" in w for w in warnings), warnings
    assert not any("The text is empty" in w for w in warnings)
    assert any(v.startswith("**line 1**") for v in texts(at.markdown))  # explained
    _typed(at, "a short one")  # an edit within the limit: the notice goes
    assert not any("was cut" in w for w in texts(at.warning))


def test_a_long_text_says_how_many_words_are_explained_and_shows_only_those(text_explain: AppTest) -> None:
    at = text_explain
    text = " ".join(f"w{i}" for i in range(4000))[: MAX_TEXT_CHARS - 1]  # 19,999 characters
    total = len(text.split())
    _typed(at, text)
    warnings = texts(at.warning)
    assert any(f"reads only the first 64 of {total:,} words" in w for w in warnings), warnings
    quote = next(v for v in texts(at.markdown) if v.startswith("> "))
    assert quote == "> " + " ".join(f"w{i}" for i in range(64)) + " …"  # not the whole 19,999 characters
    assert not any("was cut" in w for w in warnings)  # under the character limit: nothing cut there


def test_a_link_to_a_run_that_does_not_exist_says_so_and_names_the_run_shown(runs) -> None:
    at = make_app(timeout=TIMEOUT)
    at.query_params["run"] = "../../etc"
    at.run()
    assert_ok(at)
    shown = at.session_state["xai_selected_run"]
    assert shown in (runs["image"], runs["text"])
    main = [w for w in texts(at.main.warning) if "does not exist" in w]
    assert len(main) == 1 and "run `../../etc`" in main[0] and f"Showing run `{shown}`" in main[0], main
    side = [w for w in texts(at.sidebar.warning) if "does not exist" in w]
    assert side == [], side  # said once, on the page (issue 29: it was said twice, page and sidebar)
    assert at.sidebar.selectbox(key=PICKER).value == shown
    assert "run" not in at.query_params
    at.run()  # the page keeps saying it, once, until the user picks a run
    assert len([w for w in texts(at.warning) if "does not exist" in w]) == 1
    other = runs["text"] if shown == runs["image"] else runs["image"]
    at.selectbox(key=PICKER).set_value(other).run()
    assert_ok(at)
    assert at.session_state["xai_selected_run"] == other
    assert not any("does not exist" in w for w in texts(at.warning))


@pytest.fixture(scope="module")
def cnn_and_text(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("switch_runs")
    text = make_run(root, "cues", "text_cnn", epochs=1)
    image = make_run(root, "shapes", "simple_cnn", epochs=1)
    return {"root": str(root), "image": image.id, "text": text.id}


def test_the_run_picker_switches_runs_in_place_and_each_run_keeps_its_methods(cnn_and_text, monkeypatch) -> None:
    monkeypatch.setenv("XAIDASH_RUNS", cnn_and_text["root"])
    image, text = cnn_and_text["image"], cnn_and_text["text"]
    at = _explain(text)
    picker = at.selectbox(key=PICKER)
    assert picker.value == text and set(picker.options) >= {picker.format_func(image), picker.format_func(text)}
    label = picker.format_func(text)  # model, data set, accuracy; a run near chance is flagged first
    assert label.startswith("⚠ text_cnn · cues · 50.0% poor · "), label
    assert picker.format_func(image).startswith("simple_cnn · shapes · ")
    at.multiselect(key="explain_methods").set_value(["saliency"]).run()
    at.radio(key="explain_source").set_value("Type text").run()

    at.selectbox(key=PICKER).set_value(image).run()  # in place: still on Explain
    assert_ok(at)
    assert at.title[0].value == "Explain" and at.session_state["xai_selected_run"] == image
    methods = at.multiselect(key="explain_methods").value
    assert "gradcam" in methods, methods  # the text run's choice does not leak into the image run
    at.multiselect(key="explain_methods").set_value(["gradcam", "saliency"]).run()

    at.selectbox(key=PICKER).set_value(text).run()
    assert_ok(at)
    assert at.multiselect(key="explain_methods").value == ["saliency"]
    assert at.radio(key="explain_source").value == "Type text"  # its input source too
    at.selectbox(key=PICKER).set_value(image).run()
    assert_ok(at)
    assert at.multiselect(key="explain_methods").value == ["gradcam", "saliency"]

    at.switch_page("views/attention.py").run()  # every page that uses a run has the picker
    assert_ok(at)
    assert at.selectbox(key=PICKER).value == image


def test_runs_that_read_the_same_stay_apart_in_the_picker(tmp_path, monkeypatch) -> None:
    first, second = (make_run(tmp_path, "shapes", "mlp", epochs=1) for _ in range(2))  # same model, data, minute
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path))
    at = make_app(first.id, TIMEOUT)
    at.run()
    picker = at.selectbox(key=PICKER)
    assert len(set(picker.options)) == 2 and all(o.startswith("mlp · shapes · 50.0% · ") for o in picker.options)
    picker.set_value(second.id).run()
    at.run()  # Streamlit tells options apart by label: a shared label would snap back to the first run
    assert at.session_state["xai_selected_run"] == second.id and at.selectbox(key=PICKER).value == second.id


def test_a_text_run_words_its_metrics_and_scales_in_words_not_pixels(text_explain: AppTest) -> None:
    at = text_explain
    _typed(at, "not bad at all, a wonderful cast")
    captions = texts(at.caption)
    assert any("most relevant words are removed" in c for c in captions), captions
    assert not any("pixel" in c for c in captions), [c for c in captions if "pixel" in c]


def _lime_strip(at: AppTest) -> str:
    """The LIME map of the one input shown: its strip of highlighted words."""
    strips = [v for v in texts(at.markdown) if "xai-tokens" in v]
    assert len(strips) == 1, strips  # one input, one method
    return strips[0]


def test_lime_maps_a_long_typed_or_uploaded_text_on_the_words_the_model_reads(text_explain: AppTest) -> None:
    """Issue 36: LIME, like every method, explains the model's first 64 words of a long text, with the note that
    says so, whether typed (19,999 characters) or uploaded (a 5 MB .txt, cut to its first 20,000 characters)."""
    at = text_explain
    at.multiselect(key="explain_methods").set_value(["lime"]).run()
    text = " ".join(f"w{i}" for i in range(4000))[: MAX_TEXT_CHARS - 1]
    _typed(at, text)
    assert any(f"reads only the first 64 of {len(text.split()):,} words" in w for w in texts(at.warning))
    strip = _lime_strip(at)
    assert strip.count("<span") == 64 and ">w63</span>" in strip and ">w64</span>" not in strip
    assert not any("LIME" in e for e in texts(at.error)), texts(at.error)
    at.radio(key="explain_source").set_value("Upload .txt / .csv").run()
    big = " ".join(f"u{i}" for i in range(800_000)).encode()
    assert len(big) > 5_000_000
    at.file_uploader(key="explain_textfile").set_value(("long.txt", big, "text/plain")).run()
    assert_ok(at)
    warnings = texts(at.warning)
    assert any("long.txt: texts longer than 20,000 characters are cut" in w for w in warnings), warnings
    assert any("reads only the first 64 of" in w for w in warnings), warnings
    strip = _lime_strip(at)
    assert strip.count("<span") == 64 and ">u63</span>" in strip and ">u64</span>" not in strip
