"""The Steer & patch page on a tiny random Llama (AppTest): patching shows what the explainer computes (the same
logit differences, the carriers in words, the three charts), a pair of prompts of different lengths gets one line,
and steering shows the plain answer generate() gives beside the steered one."""

from __future__ import annotations

import pytest
from app_pages import assert_ok, make_app, texts
from tiny_lm import save_tiny_folder

from xaidash.explainers.language import patching as P
from xaidash.models.language.convert import import_language_model
from xaidash.models.language.generate import generate
from xaidash.models.language.loading import load_language_model
from xaidash.models.language.prompt import build_prompt
from xaidash.models.runs.store import Run

CLEAN, CORRUPTED = (
    "the cat and the dog went to the city , the dog to",
    "the dog and the cat went to the city , the cat to",
)


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("steer_patch_page")
    return import_language_model("hf:" + str(save_tiny_folder(tmp / "tiny")), root=tmp / "runs")


def page(run: Run, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    at = make_app(run.id, timeout=180)
    at.run()
    at.switch_page("views/steer_patch.py").run()
    assert_ok(at)
    return at


def _submit(at, label: str):
    next(b for b in at.button if b.label == label).click().run()
    assert_ok(at)
    return at


def test_patching_shows_the_explainers_result(lm_run, monkeypatch) -> None:
    at = page(lm_run, monkeypatch)
    at.text_input(key="sp_clean").set_value(CLEAN)
    at.text_input(key="sp_corr").set_value(CORRUPTED)
    at.text_input(key="sp_answer").set_value("cat")
    at.text_input(key="sp_wrong").set_value("dog")
    _submit(at, "Patch")
    lm = load_language_model(lm_run, device="cpu")
    ref = P.patch_prompts(lm, P.prepare(lm, CLEAN, CORRUPTED, "cat", "dog"))
    values = texts(at.metric)
    assert f"{ref.clean_diff:.2f}" in values and f"{ref.corrupted_diff:.2f}" in values
    shown = "\n".join(texts(at.markdown))
    for line in P.carriers(ref):
        assert line in shown
    charts = [c.proto.spec for c in at.main.get("vega_lite_chart")]
    assert len(charts) == 3
    assert '"restored"' in charts[0] and '"redblue"' in charts[0]  # the heatmap has its colour bar


def test_prompts_of_different_lengths_get_one_line(lm_run, monkeypatch) -> None:
    at = page(lm_run, monkeypatch)
    at.text_input(key="sp_clean").set_value(CLEAN + " the")
    at.text_input(key="sp_corr").set_value(CORRUPTED)
    at.text_input(key="sp_answer").set_value("cat")
    at.text_input(key="sp_wrong").set_value("dog")
    _submit(at, "Patch")
    errors = texts(at.error)
    assert len(errors) == 1 and "needs the same length" in errors[0]
    assert not at.metric


def test_steering_shows_the_plain_and_the_steered_answers(lm_run, monkeypatch) -> None:
    at = page(lm_run, monkeypatch)
    at.text_input(key="sp_prompt").set_value("what is the capital of france ?")
    at.number_input(key="sp_layer").set_value(1)
    at.text_area(key="sp_toward").set_value("red blue green")
    at.text_area(key="sp_away").set_value("cat dog")
    at.slider(key="sp_strength").set_value(2.0)
    at.slider(key="sp_tokens").set_value(6)
    _submit(at, "Steer")
    lm = load_language_model(lm_run, device="cpu")
    plain = generate(lm, build_prompt(lm, "what is the capital of france ?"), max_new_tokens=6)
    quotes = [m for m in texts(at.markdown) if m.startswith("> ")]
    assert len(quotes) == 2 and quotes[0] == f"> {plain.text.strip() or '(nothing)'}"
    assert any("at layer 1" in c for c in texts(at.caption))
