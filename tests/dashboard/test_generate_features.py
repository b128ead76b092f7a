"""The Generate page's "Which SAE features drove it" panel (AppTest, a tiny random Llama with an SAE written into
its run's store): without an SAE it says how to train one; with one, its bars and table hold the explainer's own
numbers for the page's target, the parts add up to the site's total, and each feature links to the Features
browser once that page is registered."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from app_pages import assert_ok, make_app, texts
from random_sae import write_sae
from tiny_lm import save_tiny_folder

from xaidash.dashboard.components import generate_features
from xaidash.dashboard.components.generate_features import (
    NOT_A_FEATURE,
    chart_frame,
    feature_link,
    features_table,
)
from xaidash.explainers.language.query import make_query
from xaidash.explainers.language.sae_attribution import sae_attribution
from xaidash.explainers.language.targets import default_target
from xaidash.models.language.convert import import_language_model
from xaidash.models.language.generate import generate
from xaidash.models.language.loading import load_language_model
from xaidash.models.language.prompt import build_prompt
from xaidash.models.language.sae.store import load_sae, sae_folder
from xaidash.models.runs.store import Run

PROMPT = "what is the capital of france ?"
SAE_ID = "20261128-000000-L1-resid-topk-64"
TIMEOUT = 180
D_IN = 32  # the tiny Llama's width


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("generate_features")
    return import_language_model("hf:" + str(save_tiny_folder(tmp / "tiny")), root=tmp / "runs")


@pytest.fixture
def root(lm_run: Run, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XAIDASH_RUNS", str(lm_run.path.parent))
    return lm_run.path.parent


def generate_page():
    at = make_app(timeout=TIMEOUT)
    at.run()
    at.switch_page("views/generate.py").run()
    assert_ok(at)
    at.text_area(key="gen_prompt").set_value(PROMPT)
    at.button(key="gen_go").click().run()
    assert_ok(at)
    return at


def expected(run: Run) -> tuple:
    """The explainer's answer for the page's default target, computed here without the page."""
    lm = load_language_model(run)
    prompt = build_prompt(lm, PROMPT)
    generation = generate(lm, prompt, max_new_tokens=32)
    step = default_target(generation, lm.special_ids()).step
    query = make_query(lm, prompt, generation.ids, span=(step, step + 1))
    loaded = load_sae(run, SAE_ID)
    return sae_attribution(lm, query, loaded.sae, loaded.layer, loaded.site, top=generate_features.TOP_MAX), query


def test_panel_without_then_with_an_sae(root: Path, lm_run: Run) -> None:
    at = generate_page()
    assert "Which SAE features drove it" in texts(at.subheader)
    said = " ".join(texts(at.info))
    assert "No trained sparse autoencoder" in said and f"xaidash sae train --run {lm_run.id}" in said

    write_sae(lm_run, SAE_ID, D_IN)
    at = generate_page()
    assert at.selectbox(key="gen_sae").value == SAE_ID
    fa, _ = expected(lm_run)
    table = next(d.value for d in at.dataframe if "feature" in d.value.columns)
    n = generate_features.TOP_DEFAULT
    assert list(table["feature"]) == list(fa.top[:n])
    np.testing.assert_allclose(table["attribution"], fa.attribution[list(fa.top[:n])], rtol=1e-5)
    np.testing.assert_allclose(table["max activation"], fa.max_activation[list(fa.top[:n])], rtol=1e-5)
    assert list(table["browse"]) == [f"features?run={lm_run.id}&sae={SAE_ID}&feature={f}" for f in fa.top[:n]]
    caption = " ".join(texts(at.caption))
    assert "The parts add up" in caption and f"{fa.site_total:+.4f}" in caption and f"{fa.error_total:+.4f}" in caption
    specs = " ".join(str(c.proto.spec) for c in at.main.get("vega_lite_chart"))
    assert "error term" in specs and "decoder bias" in specs and f"#{fa.top[0]}" in specs

    at.number_input(key="gen_sae_top").set_value(5).run()
    assert_ok(at)
    table = next(d.value for d in at.dataframe if "feature" in d.value.columns)
    assert list(table["feature"]) == list(fa.top[:5])


def test_chart_rows_add_up_to_the_sites_total(root: Path, lm_run: Run) -> None:
    if not sae_folder(lm_run, SAE_ID).is_dir():
        write_sae(lm_run, SAE_ID, D_IN)
    fa, _ = expected(lm_run)
    frame = chart_frame(fa, 4)
    assert list(frame["part"][:4]) == [f"#{f}" for f in fa.top[:4]]
    terms = frame[frame["kind"] == NOT_A_FEATURE]
    assert list(terms["part"]) == [f"{fa.active - 4} other features", "error term", "decoder bias"]
    parts = fa.features_total + fa.error_total + fa.bias_total
    assert float(frame["attribution"].sum()) == pytest.approx(parts, rel=1e-9, abs=1e-12)
    assert parts == pytest.approx(fa.site_total, rel=1e-4, abs=1e-7)  # float32 roundings apart
    assert all(
        frame["kind"][:4] == np.where(fa.attribution[list(fa.top[:4])] > 0, "raises the target", "lowers the target")
    )


def test_feature_links(monkeypatch: pytest.MonkeyPatch, root: Path, lm_run: Run) -> None:
    assert feature_link("run 1", "sae-a", 17) == "features?run=run+1&sae=sae-a&feature=17"
    if not sae_folder(lm_run, SAE_ID).is_dir():
        write_sae(lm_run, SAE_ID, D_IN)
    fa, _ = expected(lm_run)
    table = features_table(fa, lm_run.id, SAE_ID, 3)
    assert isinstance(table, pd.DataFrame)
    assert list(table["browse"]) == [f"features?run={lm_run.id}&sae={SAE_ID}&feature={f}" for f in fa.top[:3]]
