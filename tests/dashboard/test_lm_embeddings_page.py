"""The Embeddings page on a tiny random language model (AppTest): SST-2's sentences at the middle layer, pooled, then
their tokens coloured by a token property, each map the projection of the lower layers' representations; the
run picker offering both kinds of run; a data set that is not on this machine said in one message."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from app_pages import assert_ok, make_app, texts
from inspect_runs import make_run
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from tiny_lm import save_tiny_folder

from xaidash.dashboard import services
from xaidash.dashboard.components.embedding_map import map_chart, outlying_view
from xaidash.dashboard.components.lm_embeddings import far_points_note
from xaidash.explainers.inspection.projection import project
from xaidash.explainers.language.embeddings import (
    labelled_texts,
    middle_layer,
    sentence_representations,
    token_representations,
)
from xaidash.models.language.convert import import_language_model
from xaidash.models.language.loading import load_language_model
from xaidash.models.runs.store import Run

PICKER = "xai_run_picker"
TIMEOUT = 120


@pytest.fixture(scope="module")
def lm_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """A runs root with a tiny Llama imported as a language model and a text classifier."""
    tmp = tmp_path_factory.mktemp("lm_embeddings")
    root = tmp / "runs"
    lm = import_language_model("hf:" + str(save_tiny_folder(tmp / "tiny")), root=root)
    return {"lm": lm, "classifier": make_run(root, "cues", "text_cnn", epochs=1)}


@pytest.fixture
def root(lm_runs: dict[str, Run], monkeypatch: pytest.MonkeyPatch) -> Path:
    path = lm_runs["lm"].path.parent
    monkeypatch.setenv("XAIDASH_RUNS", str(path))
    return path


def embeddings_page(lm: Run, **state):
    """The Embeddings page with the language model picked in the sidebar (the classifier is the default)."""
    at = make_app(timeout=TIMEOUT)
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    at.switch_page("views/embeddings.py").run()
    assert_ok(at)
    picker = at.sidebar.selectbox(key=PICKER)
    assert len(picker.options) == 2  # the page offers classifiers and language models
    picker.set_value(lm.id).run()
    assert_ok(at)
    return at


def chart_rows(at) -> tuple[dict, list[dict]]:
    charts = list(at.main.get("vega_lite_chart"))
    assert len(charts) == 1
    proto = charts[0].proto
    frames = [convert_arrow_bytes_to_pandas_df(d.data.data) for d in proto.datasets]  # Streamlit sends data as Arrow
    assert len(frames) == 1
    return json.loads(proto.spec), frames[0].to_dict("records")


def test_sentences_of_sst2_at_the_middle_layer(root: Path, lm_runs, offline_data) -> None:
    at = embeddings_page(lm_runs["lm"], emb_lm_n=60)
    assert not at.error, texts(at.error)
    assert at.selectbox(key="emb_lm_dataset").value == "sst2"
    lm = load_language_model(lm_runs["lm"], device="cpu")
    layer = middle_layer(lm)
    assert at.select_slider(key="emb_lm_layer").value == layer
    spec, rows = chart_rows(at)
    assert len(rows) == 60
    # The map is the PCA of the lower layer's mean-pooled sentences, in the data set's order.
    texts_, labels, classes = labelled_texts("sst2", "test", 60)
    coords = project(sentence_representations(lm, texts_, layer), "pca").coords
    np.testing.assert_allclose([[r["x"], r["y"]] for r in rows], coords, rtol=1e-4, atol=1e-4)
    assert [r["label"] for r in rows] == [classes[i] for i in labels]
    assert [r["sentence"] for r in rows] == [t if len(t) <= 160 else t[:159] + "…" for t in texts_]
    assert '"sentence:N"' in json.dumps(spec["encoding"]["tooltip"]) or "sentence" in json.dumps(spec)
    caption = next(c for c in texts(at.caption) if c.startswith("Each point"))
    assert f"60 sst2 test sentences: the mean of its tokens' states at layer {layer} of {lm.num_layers}" in caption
    assert "Representations computed in" in caption and "(reused now)" not in caption
    # A rerun reuses them; the last token's state is another map.
    at.run()
    assert "(reused now)" in next(c for c in texts(at.caption) if c.startswith("Each point"))
    at.radio(key="emb_lm_pool").set_value("last").run()
    assert_ok(at)
    _, rows = chart_rows(at)
    last = project(sentence_representations(lm, texts_, layer, "last"), "pca").coords
    np.testing.assert_allclose([[r["x"], r["y"]] for r in rows], last, rtol=1e-4, atol=1e-4)
    assert "the state of its last token" in next(c for c in texts(at.caption) if c.startswith("Each point"))


def test_tokens_coloured_by_a_property(root: Path, lm_runs, offline_data) -> None:
    at = embeddings_page(lm_runs["lm"], emb_lm_n=60)
    at.radio(key="emb_lm_mode").set_value("token").run()
    at.number_input(key="emb_lm_tokens").set_value(300).run()
    at.select_slider(key="emb_lm_layer").set_value(0).run()
    at.selectbox(key="emb_lm_colour").set_value("starts_word").run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    lm = load_language_model(lm_runs["lm"], device="cpu")
    tokens = token_representations(lm, labelled_texts("sst2", "test", 60)[0], 0, limit=300)
    spec, rows = chart_rows(at)
    assert len(rows) == len(tokens) == 300
    assert [r["token"] for r in rows] == [repr(t) for t in tokens.token]
    starts = tokens.properties["starts_word"]
    assert [r["starts a word"] for r in rows] == ["yes" if s else "no" for s in starts]
    assert spec["encoding"]["color"]["field"] == "starts a word"
    assert all(f"[{r['token'][1:-1].strip()}]" in r["in its sentence"] for r in rows)
    caption = next(c for c in texts(at.caption) if c.startswith("Each point"))
    assert "300 tokens of the first" in caption and "layer 0 (the token embeddings" in caption
    # Positions in bins, in order in the legend.
    at.selectbox(key="emb_lm_colour").set_value("position").run()
    spec, rows = chart_rows(at)
    domain = spec["encoding"]["color"]["scale"]["domain"]
    assert domain[0] == "1" and domain == sorted(domain, key=lambda v: int(v.split("–")[0].rstrip("+")))
    assert spec["encoding"]["color"]["field"] == "position in the text"
    for r in rows:
        low, _, high = r["position in the text"].rstrip("+").partition("–")
        assert int(low) <= r["position"] <= int(high or (low if "+" not in r["position in the text"] else 10**9))


def test_a_data_set_not_on_this_machine_is_one_message(root: Path, lm_runs) -> None:
    services.dataset_split.clear()  # splits are cached per process (one data root): other tests loaded SST-2
    at = embeddings_page(lm_runs["lm"])  # an empty data root: only the built-in text data set is here
    assert at.selectbox(key="emb_lm_dataset").value == "cues"
    assert not at.error and len(list(at.main.get("vega_lite_chart"))) == 1
    at.selectbox(key="emb_lm_dataset").set_value("sst2").run()
    assert_ok(at)
    assert len(at.error) == 1 and "sst2" in at.error[0].value and "SST-2 is not in" in at.error[0].value
    assert not list(at.main.get("vega_lite_chart"))


def test_a_classifier_keeps_its_page(root: Path, lm_runs) -> None:
    at = make_app(lm_runs["classifier"].id, timeout=TIMEOUT)
    at.session_state["emb_n"] = 50
    at.run()
    at.switch_page("views/embeddings.py").run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    assert any(c.startswith("Activations computed") for c in texts(at.caption))
    assert "emb_lm_dataset" not in [w.key for w in at.main.get("selectbox")]


def test_far_points_are_left_out_of_the_first_view_and_named() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(200, 2)), columns=["x", "y"])
    frame.loc[7, ["x", "y"]] = [40.0, 0.0]  # one token with a huge state, as SmolLM2's ' and' at layer 15
    frame["token"] = [f"'t{i}'" for i in range(200)]
    frame["in its sentence"] = [f"sentence {i}" for i in range(200)]
    view, outside = outlying_view(frame)
    assert view is not None and list(np.flatnonzero(outside)) == [7]
    (x0, x1), (y0, y1) = view
    kept = frame.drop(index=7)
    assert x0 <= kept["x"].min() and kept["x"].max() <= x1 < 40.0 and y0 <= kept["y"].min() <= kept["y"].max() <= y1
    note = far_points_note(frame, outside)
    assert note.startswith("1 of the 200 points lie far from the rest") and "'t7' in “sentence 7”" in note
    chart = map_chart(frame.assign(point=range(200), kind="a"), "kind", "t", ("x", "y"), view=view).to_dict()
    assert chart["encoding"]["x"]["scale"]["domain"] == [x0, x1]
    assert outlying_view(kept)[0] is None  # nothing far: the map is drawn whole
