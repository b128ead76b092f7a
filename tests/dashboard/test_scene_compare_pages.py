"""Compare and Side by side on detectors and segmenters (AppTest): the switch shows once a scene run exists; Compare
scores methods over test scenes with the same numbers as `compare_scene_methods`; Side by side puts two detectors'
maps of each true object beside each other, or says which model found no box of it; one line when there is no
second model to pair."""

from __future__ import annotations

import shutil

import pytest
from app_pages import assert_ok, make_app, open_page, texts
from scene_runs import tiny_scene_run, trained_scene_run

from xaidash.dashboard.components.scene_run_choice import SCENES_VIEW
from xaidash.dashboard.nav import page_path

SCENE_KEY = "xai_selected_scene"


@pytest.fixture(scope="module")
def two_detectors(tmp_path_factory):
    """The session's decently trained detector and a tiny one (one epoch on 8 scenes) in one runs root."""
    run = trained_scene_run(tmp_path_factory, "detect")
    root = tmp_path_factory.mktemp("scene_pair")
    shutil.copytree(run.path, root / run.id)
    return root, run.id, tiny_scene_run("detect", root).id


def scene_view(monkeypatch, root, page: str, run_id: str | None):
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = make_app(timeout=300)
    if run_id:
        at.session_state[SCENE_KEY] = run_id
    at.session_state[f"{page}_models"] = SCENES_VIEW
    return open_page(at, page_path(page))


def rerun(at):
    at.run()
    assert_ok(at)
    return at


def test_without_a_scene_run_the_pages_have_no_switch(runs, monkeypatch):
    monkeypatch.setenv("XAIDASH_RUNS", runs["root"])
    for page in ("compare", "side_by_side"):
        at = open_page(make_app(runs["image"]), page_path(page))
        assert not [c for c in at.get("button_group") if c.key == f"{page}_models"]


def test_compare_scores_the_methods_over_test_scenes(two_detectors, monkeypatch):
    from xaidash.data.scenes.registry import load_scene_set
    from xaidash.explainers.scenes.compare import compare_scene_methods
    from xaidash.models.scenes.loading import load_scene_run

    root, trained, _ = two_detectors
    at = scene_view(monkeypatch, root, "compare", trained)
    assert at.selectbox(key="scene_compare_run").value == trained
    at.multiselect(key="scenes_methods_detect").set_value(["eigencam", "ig"])
    at.number_input(key="scene_compare_n").set_value(2)
    rerun(at)
    at.button(key="scene_compare_go").click()
    rerun(at)
    (table,) = [d.value for d in at.dataframe if d.value.index.name == "metric"]
    assert list(table.columns) == ["Eigen-CAM", "Integrated Gradients"]
    assert "Pointing game ↑" in table.index and "On other objects ↓" in table.index
    bundle = load_scene_run(root / trained)
    direct = compare_scene_methods(bundle, load_scene_set("scenes", "test"), [0, 1], ["eigencam", "ig"])
    line = next(t for t in texts(at.caption) if t.endswith("are not scored).") or "targets on 2 test scenes" in t)
    assert f"{len(direct.targets)} targets on 2 test scenes of scenes" in line
    energy = direct.summary.set_index(["method", "metric"]).loc[("eigencam", "energy"), "mean"]
    assert f"{energy:.3f}" in table.loc["Energy inside ↑", "Eigen-CAM"]
    assert "Agreement" in texts(at.subheader)
    assert at.get("download_button"), "comparison.json"

    # Another setting waits for the button; the one computed before shows again at once.
    at.number_input(key="scene_compare_n").set_value(3)
    rerun(at)
    assert "The settings changed: press Compare for their numbers." in texts(at.caption)
    at.number_input(key="scene_compare_n").set_value(2)
    rerun(at)
    assert [d for d in at.dataframe if d.value.index.name == "metric"]


def test_side_by_side_puts_both_detectors_maps_of_each_object_together(two_detectors, monkeypatch):
    root, trained, tiny = two_detectors
    at = scene_view(monkeypatch, root, "side_by_side", trained)
    assert at.selectbox(key="sbs_scene_b").value == tiny  # the only other detector with these classes
    assert "What each model finds" in texts(at.subheader)
    objects = at.multiselect(key="sbs_scene_objects")
    assert len(objects.value) == 2 and objects.value[0].startswith("true object 1: ")
    at.multiselect(key="scenes_methods_detect").set_value(["eigencam"])
    rerun(at)
    at.button(key="sbs_scene_go").click()
    rerun(at)
    table = next(d.value for d in at.dataframe if "model" in d.value.columns)
    assert set(table["method"]) == {"Eigen-CAM"}
    missing = [t for t in texts(at.caption) if "finds no box of this object" in t]
    for who in "AB":  # each model: its map of each object, or the line saying it has no box of it
        rows = int((table["model"] == who).sum()) if "model" in table else 0
        assert rows + len([t for t in missing if t.startswith(f"Model {who}")]) == 2
    assert at.get("download_button"), "the pair's HTML report"


def test_side_by_side_with_one_detector_says_what_to_train(two_detectors, monkeypatch, tmp_path):
    root, trained, _ = two_detectors
    alone = tmp_path / "alone"
    shutil.copytree(root / trained, alone / trained)
    at = scene_view(monkeypatch, alone, "side_by_side", trained)
    (info,) = [t for t in texts(at.info) if "No other detector" in t]
    assert "96 px scenes with the classes circle, square, triangle, cross" in info and "Train page" in info
    assert not [b for b in at.button if b.key == "sbs_scene_go"]
