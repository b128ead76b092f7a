"""What a page says about its run (issue 29), through AppTest: the calibrated-probabilities switch is in the sidebar
for every selected classifier, off and disabled with one line saying where to measure calibration until a
temperature is saved, and Explain says beside its probabilities that they are plain softmax and how to calibrate
them; a `?run=` link to a language model opened on Explain says that the run opens on Generate and links there,
and a link to a run that does not exist is said once."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_pages import assert_ok, make_app, open_page, texts
from inspect_runs import make_run
from tiny_lm import save_tiny_folder

from xaidash.dashboard.components.calibration_view import TOGGLE_LABEL
from xaidash.models.language.convert import import_language_model

TIMEOUT = 180


@pytest.fixture(scope="module")
def lm_and_classifier(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("run_links")
    root = tmp / "runs"
    lm = import_language_model("hf:" + str(save_tiny_folder(tmp / "tiny")), root=root)
    classifier = make_run(root, "shapes", "mlp", epochs=1)
    return {"root": str(root), "lm": lm.id, "classifier": classifier.id}


def opened_by_link(root: str, page: str, run_id: str, monkeypatch):
    """The app over `root`, switched to views/`page`.py, then rerun with `?run=run_id` in its address."""
    monkeypatch.setenv("XAIDASH_RUNS", root)
    at = make_app(timeout=TIMEOUT)
    at.run()
    at.switch_page(f"views/{page}.py")
    at.query_params["run"] = run_id
    at.run()
    assert_ok(at)
    return at


def test_the_switch_is_shown_disabled_with_where_to_measure(runs) -> None:
    at = make_app(runs["image"], timeout=TIMEOUT)
    at.session_state["explain_methods_by_run"] = {runs["image"]: ["saliency"]}
    at = open_page(at, "views/explain.py")
    switch = [t for t in at.sidebar.toggle if t.label == TOGGLE_LABEL]
    assert len(switch) == 1 and switch[0].disabled and switch[0].value is False
    side = texts(at.sidebar.caption)
    assert any(c.startswith("Off until calibration is measured: Train page → Calibration") for c in side), side
    said = [c for c in texts(at.main.caption) if c.startswith("Probabilities: plain softmax")]
    assert len(said) == 1 and "Calibrated probabilities" in said[0] and "Train page" in said[0], said


def test_a_language_model_link_on_explain_says_it_opens_on_generate(lm_and_classifier, monkeypatch) -> None:
    lm = lm_and_classifier["lm"]
    at = opened_by_link(lm_and_classifier["root"], "explain", lm, monkeypatch)
    said = [w for w in texts(at.main.warning) if lm in w]
    assert len(said) == 1 and "is not one Explain works on" in said[0] and "It opens on Generate." in said[0], said
    assert f"shows `{lm_and_classifier['classifier']}` instead" in said[0]
    assert not [w for w in texts(at.sidebar.warning) if lm in w]  # once
    links = [p for p in at.main.get("page_link") if p.proto.label == f"Open {lm} on Generate"]
    assert len(links) == 1 and links[0].proto.page == "generate" and links[0].proto.query_string == f"run={lm}", [
        (p.proto.page, p.proto.query_string) for p in links
    ]
    assert at.session_state["xai_selected_lm"] == lm  # filed for Generate, which opens on it
    at.switch_page("views/generate.py").run()
    assert_ok(at)
    assert not [w for w in texts(at.warning) if "is not one" in w]  # on the page that can use it: nothing to say
    assert Path(lm_and_classifier["root"], lm).is_dir()


@pytest.fixture(scope="module")
def scene_and_classifier(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from scene_runs import tiny_scene_run

    root = tmp_path_factory.mktemp("scene_links") / "runs"
    classifier = make_run(root, "shapes", "mlp", epochs=1)
    scene = tiny_scene_run("segment", root)
    return {"root": str(root), "scene": scene.id, "classifier": classifier.id}


@pytest.mark.parametrize("page", ["train", "compare", "side_by_side"])
def test_a_scene_run_link_opens_the_pages_scene_view_without_a_notice(scene_and_classifier, monkeypatch, page) -> None:
    scene = scene_and_classifier["scene"]
    at = opened_by_link(scene_and_classifier["root"], page, scene, monkeypatch)
    assert not [w for w in texts(at.main.warning) if scene in w]  # the page works on it: nothing to say
    assert at.session_state["xai_selected_scene"] == scene
    if page == "train":  # the scene tab open (it draws its widgets only while open)
        assert "Scene set" in [s.label for s in at.main.selectbox]
    else:  # the scene view, on the linked run
        assert at.segmented_control(key=f"{page}_models").value == "Detectors and segmenters"
        key = "scene_compare_run" if page == "compare" else "sbs_scene_a"
        assert at.selectbox(key=key).value == scene


def test_a_scene_run_link_on_explain_says_where_it_opens(scene_and_classifier, monkeypatch) -> None:
    scene = scene_and_classifier["scene"]
    at = opened_by_link(scene_and_classifier["root"], "explain", scene, monkeypatch)
    said = [w for w in texts(at.main.warning) if scene in w]
    assert len(said) == 1 and "is not one Explain works on" in said[0] and "It opens on" in said[0], said
