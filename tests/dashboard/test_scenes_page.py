"""The Scenes page (AppTest): without a scene run it says how to train one; on a trained detector every box is
explained by two methods (a card per box and method, a metrics row each, equal to `explain_scene`'s own numbers, and
the HTML report); on a segmenter a class's region and a box drawn by numbers; one line for every bad state (no box
above the threshold, an upload of another size or not an image, an empty drawn box)."""

from __future__ import annotations

import shutil

import pytest
from app_pages import assert_ok, make_app, open_page, texts
from scene_runs import tiny_scene_run, trained_scene_run

from xaidash.dashboard.nav import page_path

SCENE_KEY = "xai_selected_scene"


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """A tiny detector and segmenter (one epoch on 8 scenes: next to no box above 0.5) in one runs root."""
    root = tmp_path_factory.mktemp("scenes_tiny")
    return root, {kind: tiny_scene_run(kind, root).id for kind in ("detect", "segment")}


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    """A copy of the session's decently trained detector, alone in its runs root."""
    run = trained_scene_run(tmp_path_factory, "detect")
    root = tmp_path_factory.mktemp("scenes_detector")
    shutil.copytree(run.path, root / run.id)
    return root, run.id


def scenes_page(monkeypatch, root, run_id: str | None = None):
    monkeypatch.setenv("XAIDASH_RUNS", str(root))
    at = make_app(timeout=300)
    if run_id:
        at.session_state[SCENE_KEY] = run_id
    return open_page(at, page_path("scenes"))


def metrics_of(at):
    """The metrics table: one row per (target, method)."""
    return next(d.value for d in at.dataframe if "target" in d.value.columns)


def rerun(at):
    at.run()
    assert_ok(at)
    return at


def test_without_a_scene_run_the_page_says_how_to_train_one(runs, monkeypatch):
    at = scenes_page(monkeypatch, runs["root"])
    (info,) = [t for t in texts(at.info) if "detector or segmenter" in t]
    assert "Train page" in info and "xaidash scenes train" in info
    assert not at.button  # nothing to explain


def test_every_box_by_two_methods_gives_a_card_and_a_metrics_row_each(detector, monkeypatch):
    from xaidash.data.scenes.registry import load_scene_set
    from xaidash.explainers.scenes.api import detection_targets, explain_scene
    from xaidash.models.scenes.loading import load_scene_run

    root, run_id = detector
    at = scenes_page(monkeypatch, root, run_id)
    boxes = at.dataframe[0].value
    assert len(boxes) >= 1 and (boxes["score"] >= 0.5).all()
    at.radio(key="scenes_what").set_value("every")
    at.multiselect(key="scenes_methods_detect").set_value(["gradcam", "eigencam"])
    rerun(at)
    at.button(key="scenes_go").click()
    rerun(at)
    table = metrics_of(at)
    assert len(table) == 2 * len(boxes)  # one row per (box, method)
    assert set(table["method"]) == {"Grad-CAM", "Eigen-CAM"}
    assert table["Deletion AUC"].notna().all() and table["Insertion AUC"].notna().all()  # every box: the model's score
    matched = boxes["matches"].str.startswith("true object")
    if matched.any():  # a box on a true object: its map is scored against that object's mask
        assert table["Pointing game"].dropna().between(0, 1).all()
        # only boxes on a true object get it (a map with no positive value says so instead of a number)
        assert 0 < table["Energy inside"].notna().sum() <= 2 * int(matched.sum())
    if len(boxes) > 1:  # each method's mean over the boxes
        means = next(d.value for d in at.dataframe if "targets scored" in d.value.columns)
        assert list(means["method"]) == ["Eigen-CAM", "Grad-CAM"]  # the featured order
        mean = table[table["method"] == "Eigen-CAM"]["Deletion AUC"].mean()
        assert means.loc[0, "Deletion AUC"] == pytest.approx(mean)
    headings = [t for t in texts(at.markdown) if t.startswith("**box ")]
    assert len(headings) == len(boxes)
    assert at.get("download_button"), "the HTML report's download"

    # The page's numbers are explain_scene's on the same scene and box.
    bundle = load_scene_run(root / run_id)
    split = load_scene_set("scenes", "test")
    prediction = bundle.predict([split.images[0]])[0]
    first = detection_targets(prediction, 0.5)[0]
    (direct,) = explain_scene(bundle, split.images[0], [first], ["gradcam"], truth=split.targets[0])
    row = table[(table["method"] == "Grad-CAM") & (table["target"] == first.describe(bundle.classes))].iloc[0]
    by_title = {"deletion": "Deletion AUC", "insertion": "Insertion AUC", "energy": "Energy inside"}
    for name, title in by_title.items():
        if name in direct.metrics:
            assert row[title] == pytest.approx(direct.metrics[name], abs=1e-6), title

    # Maps computed before show at once; settings whose maps are not computed yet wait for Explain.
    at.multiselect(key="scenes_methods_detect").set_value(["gradcam"])
    rerun(at)
    assert set(metrics_of(at)["method"]) == {"Grad-CAM"}
    at.multiselect(key="scenes_methods_detect").set_value(["gradcam", "ablationcam"])
    rerun(at)
    assert "The settings changed: press Explain for their maps." in texts(at.caption)


def test_no_box_above_the_threshold_says_so_in_one_line(tiny_runs, monkeypatch):
    root, ids = tiny_runs
    at = scenes_page(monkeypatch, root, ids["detect"])
    at.slider(key="scenes_threshold").set_value(1.0)
    rerun(at)
    assert "No box scores at least 1.00 on this scene: lower the threshold or pick another scene." in texts(at.warning)
    assert not [b for b in at.button if b.key == "scenes_go"]


def test_a_region_and_a_box_drawn_by_numbers_on_a_segmenter(tiny_runs, monkeypatch):
    root, ids = tiny_runs
    at = scenes_page(monkeypatch, root, ids["segment"])
    at.multiselect(key="scenes_methods_segment").set_value(["seg_gradcam"])
    at.radio(key="scenes_what").set_value("drawn")
    rerun(at)
    at.selectbox(key="scenes_drawn_class").set_value("square")
    for name, value in (("x0", 10), ("y0", 12), ("x1", 40), ("y1", 44)):
        at.number_input(key=f"scenes_drawn_{name}").set_value(value)
    rerun(at)
    at.button(key="scenes_go").click()
    rerun(at)
    table = metrics_of(at)
    assert list(table["target"]) == ["square, the box (10, 12)-(40, 44) (960 px)"]
    assert list(table["method"]) == ["Seg-Grad-CAM"]

    at.number_input(key="scenes_drawn_x1").set_value(5)
    rerun(at)
    assert "The box (10, 12)-(5, 44) is empty: x1 must exceed x0 and y1 y0." in texts(at.warning)


def test_an_upload_of_another_size_or_not_an_image_gets_one_line(tiny_runs, monkeypatch, make_png):
    root, ids = tiny_runs
    at = scenes_page(monkeypatch, root, ids["segment"])
    at.radio(key="scenes_source").set_value("An image of my own")
    rerun(at)
    at.file_uploader[0].set_value(("wide.png", make_png(40, 30), "image/png"))
    rerun(at)
    (warning,) = [t for t in texts(at.warning) if "This model reads" in t]
    assert "reads 96 x 96 px scenes and the image is 40 x 30 px" in warning
    assert "What the model finds" not in texts(at.subheader)
    at.checkbox(key="scenes_resize").check()
    rerun(at)
    assert "What the model finds" in texts(at.subheader)
    assert "An image of your own has no true objects: its maps get deletion and insertion only." in texts(at.caption)

    at.file_uploader[0].set_value(("notes.png", b"not a picture", "image/png"))
    rerun(at)
    assert "This file is not an image this page can read (PNG, JPEG, BMP or WebP)." in texts(at.error)


def test_the_html_report_holds_every_target_and_map(tiny_runs):
    from xaidash.dashboard.components.scene_inputs import Scene
    from xaidash.dashboard.components.scene_report import report_html
    from xaidash.data.scenes.registry import load_scene_set
    from xaidash.explainers.scenes.api import explain_scene, region_targets
    from xaidash.models.scenes.loading import load_scene_run

    root, ids = tiny_runs
    bundle = load_scene_run(root / ids["segment"])
    split = load_scene_set("scenes", "test", count=1)
    scene = Scene(split.images[0], split.targets[0], "scenes test · scene 0", "scenes/test/0")
    prediction = bundle.predict([scene.image])[0]
    targets = region_targets(prediction)[:2]
    assert targets
    made = explain_scene(bundle, scene.image, targets, ["seg_gradcam", "eigencam"], truth=scene.truth)
    # As the page keeps them: per target, in the methods' order (each from its own call: other target objects).
    results = {i: [e for e in made if e.target is t] for i, t in enumerate(targets)}
    html = report_html(bundle, scene, targets, results, prediction)
    assert html.startswith("<!doctype html>") and "<script" not in html
    for t in targets:
        assert t.describe(bundle.classes).replace("'", "&#x27;") in html
    assert html.count('class="map"') == 2 * len(targets)
    assert ids["segment"] in html and "scenes test · scene 0" in html
