"""AppTest runs of the Side by side page through the app's navigation, on runs written by
`inspect_runs.make_run` (no training: the page only reads runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_runs import make_run
from streamlit.testing.v1 import AppTest

from xaidash.dashboard.components.inputs import GALLERY_PAGE
from xaidash.models.runs.store import Run

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT = 90


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("sbs_page_runs")
    return {
        "mnist": make_run(root, "mnist", "simple_cnn", epochs=1),
        "mlp": make_run(root, "shapes", "mlp", epochs=1),
        "resnet": make_run(root, "shapes", "resnet_small", epochs=3),
        "text_cnn": make_run(root, "cues", "text_cnn", epochs=1),
        "text_tf": make_run(root, "cues", "text_transformer", epochs=1),
    }


def open_page(run: Run, monkeypatch: pytest.MonkeyPatch, **state) -> AppTest:
    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["xai_selected_run"] = run.id
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    at.switch_page("views/side_by_side.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def choice_key(run: Run, epoch: int | None = None) -> str:
    return f"{run.path.resolve()}@{'final' if epoch is None else f'epoch{epoch}'}"


def test_two_image_models_row_by_row(runs, monkeypatch):
    at = open_page(runs["resnet"], monkeypatch)
    assert not at.error, texts(at.error)
    assert at.title[0].value == "Side by side"
    model_b = at.selectbox(key=f"sbs_b_{runs['resnet'].id}")
    # the other shapes run, then this run at its earlier epochs (epoch 3 is the final weights)
    assert model_b.options[1:] == ["this run at epoch 2 · val acc 60.0%", "this run at epoch 1 · val acc 50.0%"]
    assert model_b.options[0].startswith("mlp on shapes")
    md = texts(at.markdown)
    assert "takes 3x32x32 images of shapes" in md
    # the runs that cannot: one line each, with why
    assert f"`{runs['mnist'].id}` takes 1x28x28 images, not 3x32x32 images" in md
    assert f"`{runs['text_cnn'].id}` takes texts, not 3x32x32 images" in md
    assert "On the first" in md and "they predict different classes for" in md
    # the defaults: IG and saliency (Grad-CAM does not apply to the mlp, and says so)
    assert at.multiselect(key="sbs_methods_image").value == ["ig", "saliency"]
    assert "Grad-CAM (B: it has no convolutional feature maps)" in texts(at.caption)
    assert "Attention rollout (neither: the model exposes no global attention weights" in texts(at.caption)
    captions = texts(at.caption)
    assert captions.count("explains **") == 4  # 1 input x 2 methods x 2 models
    assert md.count("· scale: one scale for both models (logit contribution per pixel, ±") == 1  # IG
    assert md.count("· scale: one scale for both models (|∂ logit / ∂ pixel|, ±") == 1  # saliency
    # the gallery's page, the input, 2 maps per method row, each with its colour bar
    assert len(at.main.get("image")) == GALLERY_PAGE + 1 + 2 * 2
    bars = [str(m.value) for m in at.main.get("markdown") if "xai-cbar" in str(m.value)]  # the map cards' bars
    assert len(bars) == 4 and all("logit" in b for b in bars) and sum("model B" in b for b in bars) == 2
    assert len(at.main.get("vega_lite_chart")) == 2  # both models' top classes
    assert "A · resnet_small" in md and "B · mlp" in md

    at.radio(key="sbs_scale").set_value("per model").run()
    assert texts(at.markdown).count("· scale: each model on its own scale") == 2


def test_this_run_at_an_epoch_with_grad_cam(runs, monkeypatch):
    run = runs["resnet"]
    at = open_page(run, monkeypatch)
    at.selectbox(key=f"sbs_b_{run.id}").set_value(choice_key(run, 1)).run()
    assert not at.exception and not at.error, texts(at.error)
    at.multiselect(key="sbs_methods_image").set_value(["gradcam"]).run()
    assert not at.exception and not at.error, texts(at.error)
    md, captions = texts(at.markdown), texts(at.caption)
    assert "B · resnet_small at epoch 1" in md
    assert "scale: each model on its own scale (relevance from weighted activations (logit, relative units): " in md
    assert "not comparable between models)" in md
    assert captions.count("explains **") == 2


def test_show_disagreements_picks_them(runs, monkeypatch):
    at = open_page(runs["resnet"], monkeypatch)
    at.button(key="sbs_disagree").click().run()
    assert not at.exception, [e.value for e in at.exception]
    picked = at.multiselect(key="sbs_samples_shapes__all").value
    assert len(picked) == 4  # untrained stand-ins disagree on far more than 4 test samples
    md = texts(at.markdown)
    assert md.count("**The models disagree**") == len(picked)
    assert f"A and B predict different classes for {len(picked)} of {len(picked)} input(s)" in texts(at.warning)
    at.button(key="sbs_disagree").click().run()  # a second click: the next ones
    following = at.multiselect(key="sbs_samples_shapes__all").value
    assert following and min(following) > max(picked) and "**The models disagree**" in texts(at.markdown)


def test_two_text_models(runs, monkeypatch):
    at = open_page(runs["text_cnn"], monkeypatch, sbs_source="Type text")
    assert not at.error, texts(at.error)
    assert at.selectbox(key=f"sbs_b_{runs['text_cnn'].id}").options[0].startswith("text_transformer on cues")
    md = texts(at.markdown)
    # two typed lines x 2 methods x 2 models, each as highlighted words
    assert md.count('class="xai-tokens"') == 2 * 2 * 2
    assert "Attention (A: " in texts(at.caption)  # text_cnn has no attention


def test_an_imported_model_without_a_data_set_beside_a_run(runs, tmp_path, monkeypatch):
    """An imported mlp with shapes' input and classes but no data set linked: compared on A's test split."""
    import shutil

    from xaidash.data.registry import get_info
    from xaidash.models.external.options import ImportOptions
    from xaidash.models.external.runs import import_model
    from xaidash.models.runs.store import WEIGHTS

    root = tmp_path / "runs"
    shutil.copytree(runs["resnet"].path, root / runs["resnet"].id)
    a = Run(root / runs["resnet"].id)
    options = ImportOptions(
        weights=runs["mlp"].file(WEIGHTS), input_shape=(3, 32, 32), classes=tuple(get_info("shapes").classes)
    )
    imported = import_model("zoo:mlp", options, root=root).run
    assert imported.config().get("dataset") is None
    at = open_page(a, monkeypatch)
    assert not at.error, texts(at.error)
    assert at.selectbox(key=f"sbs_b_{a.id}").options[0].startswith("zoo:mlp on no data set · imported")
    md = texts(at.markdown)
    assert "On the first" in md and "B · " in md
    assert texts(at.caption).count("explains **") == 4


def test_no_model_takes_the_same_input(runs, monkeypatch):
    at = open_page(runs["mnist"], monkeypatch)
    assert "No other model takes 1x28x28 images of mnist" in texts(at.info)
    assert f"`{runs['resnet'].id}` takes 3x32x32 images, not 1x28x28 images" in texts(at.markdown)
    assert "Runs that can: none yet." in texts(at.caption)
    assert not at.multiselect  # the page stops before the inputs
