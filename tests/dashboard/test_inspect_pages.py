"""AppTest runs of the Attention, Receptive fields, Embeddings and Model pages through the app's navigation,
on runs written by `inspect_runs.make_run` (no training: the pages only read runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_pages import open_run_page
from inspect_runs import make_run
from streamlit.testing.v1 import AppTest

from xaidash.data.registry import get_info
from xaidash.models.registry import get_spec
from xaidash.models.runs.store import Run

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT = 60


@pytest.fixture(scope="module")
def runs_by_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("runs")
    return {
        "resnet_small": make_run(root, "shapes", "resnet_small"),
        "vit_tiny": make_run(root, "shapes", "vit_tiny", epochs=1),
        "text_transformer": make_run(root, "cues", "text_transformer"),
        "minilm": make_run(root, "cues", "minilm", epochs=1),
    }


def open_page(run: Run, page: str, monkeypatch: pytest.MonkeyPatch, **state) -> AppTest:
    return open_run_page(run, page, monkeypatch, TIMEOUT, **state)


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def charts(at: AppTest) -> list:
    return list(at.main.get("vega_lite_chart"))


def image_captions(at: AppTest) -> str:
    return "\n".join(c for im in at.main.get("image") for c in im.captions)


def test_attention_vit_tiny(runs_by_model, monkeypatch):
    at = open_page(runs_by_model["vit_tiny"], "attention", monkeypatch)
    assert not at.error, texts(at.error)
    assert "4 layers x 4 heads over 65 tokens" in texts(at.markdown)
    assert [h.value for h in at.main.subheader] == [
        "Every layer and head",
        "One head",
        "Mean over heads, per layer",
        "Attention rollout",
    ]
    assert len(charts(at)) == 2  # the layer x head grid, the T x T matrix of the chosen head
    assert "rollout from the class token" in image_captions(at)
    at.selectbox(key="attention_layer").set_value(3)
    at.selectbox(key="attention_head").set_value(2).run()
    assert not at.exception and "layer 3, head 2: class-token attention over the patches" in image_captions(at)


def test_attention_text_transformer_head_view(runs_by_model, monkeypatch):
    at = open_page(
        runs_by_model["text_transformer"],
        "attention",
        monkeypatch,
        attention_source="Type text",
        attention_text="a <script>alert(1)</script> film",
    )
    assert "2 layers x 4 heads" in texts(at.markdown)
    assert "Head view" in [h.value for h in at.main.subheader]
    frames = list(at.main.get("iframe"))
    assert len(frames) == 1  # the head view and the model view, one HTML page
    page = frames[0].proto.srcdoc
    assert "Model view" in page and "<script>alert" not in page  # user text is escaped
    # The grid's colour scale: per tile by default, shared on request (stated in the legend).
    assert "tile's maximum" in str(charts(at)[0].spec)
    at.radio(key="attention_grid_scale").set_value("shared").run()
    assert not at.exception and "one scale" in str(charts(at)[0].spec)


def test_attention_minilm(runs_by_model, monkeypatch):
    at = open_page(runs_by_model["minilm"], "attention", monkeypatch, attention_source="Type text")
    assert not at.error, texts(at.error)
    md = texts(at.markdown)
    assert "6 layers x 12 heads" in md and "[CLS]" in md  # word pieces with BERT's special tokens
    at.selectbox(key="attention_layer").set_value(5)
    at.selectbox(key="attention_head").set_value(11).run()
    # another run with fewer layers and heads: the choices are brought back into range, no error
    at.session_state["xai_selected_run"] = runs_by_model["text_transformer"].id
    at.run()
    assert not at.exception and not at.error, texts(at.error)
    assert (
        at.selectbox(key="attention_layer").value == 1 and at.selectbox(key="attention_head").value == "mean over heads"
    )


def test_attention_says_why_for_a_cnn(runs_by_model, monkeypatch):
    at = open_page(runs_by_model["resnet_small"], "attention", monkeypatch)
    assert "has no attention to show" in texts(at.info)


def test_receptive_fields_resnet_small(runs_by_model, monkeypatch):
    at = open_page(runs_by_model["resnet_small"], "receptive_fields", monkeypatch)
    assert not at.error, texts(at.error)
    table = at.dataframe[0].value
    assert len(table) == 8 and list(table["receptive field"])[:3] == ["3x3", "5x5", "7x7"]
    assert at.selectbox(key="rf_layer").value == "layers.2.conv2"
    assert "trained weights" in image_captions(at) and "random weights" in image_captions(at)
    caps = texts(at.caption)
    assert (
        caps.count("100.0% of the gradient inside the box") == 2
    )  # the effective field never leaves the theoretical one
    # The profile's x axis is the image's columns and nothing beyond; the maps have colour bars.
    profile = json.loads(charts(at)[-1].proto.spec)
    domains = [lay["encoding"]["x"]["scale"]["domain"] for lay in profile["layer"]]
    assert all(d == [0, 31] for d in domains)
    assert len([im for im in at.main.get("image") if not im.captions or not im.captions[0]]) >= 2  # two bars
    at.selectbox(key="rf_layer").set_value("stem.0").run()
    assert not at.exception and "Box rows 15–17, columns 15–17" in texts(at.caption)


def test_receptive_fields_say_why_for_vit(runs_by_model, monkeypatch):
    at = open_page(runs_by_model["vit_tiny"], "receptive_fields", monkeypatch)
    assert "self-attention" in texts(at.info) and not at.dataframe


def test_embeddings_shapes_pca_then_tsne(runs_by_model, monkeypatch):
    run = runs_by_model["resnet_small"]
    at = open_page(run, "embeddings", monkeypatch, emb_n=200)
    assert not at.error, texts(at.error)
    assert len(charts(at)) == 1
    assert "Activations computed (64 features per sample); PCA computed" in texts(at.caption)
    assert list((run.path / "inspect" / "activations").glob("*.safetensors"))
    assert list((run.path / "inspect" / "projections").glob("*.npy"))
    at.selectbox(key="emb_method").set_value("tsne").run()
    caps = texts(at.caption)
    assert not at.exception and "carry no meaning" in caps
    assert "t-SNE has no transform" in texts(at.info)  # no placing of new inputs


def test_embeddings_text_places_typed_inputs(runs_by_model, monkeypatch):
    at = open_page(runs_by_model["text_transformer"], "embeddings", monkeypatch, emb_n=100)
    assert not at.error, texts(at.error)
    assert "2 input(s) drawn as black diamonds (PCA transform)" in texts(at.caption)


def test_model_page_resnet_small(runs_by_model, monkeypatch):
    run = runs_by_model["resnet_small"]
    at = open_page(run, "model", monkeypatch)
    assert not at.error, texts(at.error)
    bundle_params = sum(p.numel() for p in get_spec("resnet_small").build(get_info("shapes")).parameters())
    assert at.metric[0].value == f"{bundle_params:,}"
    assert "Feature maps" in [h.value for h in at.main.subheader]
    # One map card per (method, epoch): titled with the epoch, its validation accuracy in the caption, a colour bar
    # with units and meaning on the row's one scale; the filters on one stated scale.
    caps = texts(at.caption)
    assert "**epoch 1**" in caps and "**epoch 2**" in caps
    assert "val acc 50.0% · pred " in caps and "val acc 60.0% · pred " in caps
    assert "Grad-CAM" in texts(at.markdown) and "Integrated Gradients" in texts(at.markdown)
    bars = [v for v in at.markdown if "xai-cbar" in str(v.value)]
    assert len(bars) == 2 * 2 and "logit contribution per pixel" in texts(at.markdown)
    assert all("one scale for every epoch shown" in str(b.value) for b in bars)
    assert "One scale for every filter" in image_captions(at)
    # Any method can be chosen, not only the preset ones.
    assert at.multiselect(key="model_across_methods").value == ["gradcam", "ig"]
    at.multiselect(key="model_across_methods").set_value(["saliency"]).run()
    assert not at.exception and "Saliency" in texts(at.markdown)
    assert sum("xai-cbar" in str(v.value) for v in at.markdown) == 2  # two epochs
    at.selectbox(key="model_fmap_layer").set_value("layers.1.conv1").run()
    assert not at.exception


def test_model_page_minilm(runs_by_model, monkeypatch):
    at = open_page(runs_by_model["minilm"], "model", monkeypatch, model_source="Type text")
    assert not at.error, texts(at.error)
    assert at.metric[0].value == "22,566,146"
    assert "Feature maps and filters are drawn for models that read images; this one's inputs are words" in texts(
        at.caption
    )
    assert "**epoch 1**" in texts(at.caption) and "val acc 50.0% · pred " in texts(at.caption)
