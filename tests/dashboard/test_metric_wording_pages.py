"""Every page words its metrics by the run's modality from one place (`scoring.unit_words`, `metric_meaning`,
`curves_legend`): on a text run Compare's metrics notes, the data-set report's charts and table, and the stored view's
legend speak of words, never pixels; and the Model page's maps across training carry the completeness note (a broken
promise says so) as every other map does."""

from __future__ import annotations

import json

import numpy as np
import pytest
from app_pages import assert_ok, make_app, open_page, texts
from dataset_stores import write_store
from inspect_runs import make_run
from streamlit.testing.v1 import AppTest

from xaidash.explainers.comparison.across_training import EpochExplanations, TrainingExplanations
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.registry import OUTPUT_CHANGE, STEPS_USED
from xaidash.models.runs.store import Run

TIMEOUT = 180


@pytest.fixture(scope="module")
def wording_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("wording_runs")
    text = make_run(root, "cues", "text_cnn", epochs=1)
    write_store(text, n=12, methods=("saliency", "ig"), chunk=6)
    image = make_run(root, "shapes", "mlp", epochs=2)
    return {"text": text, "image": image}


def _app(run: Run, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("XAIDASH_RUNS", str(run.path.parent))
    return make_app(run.id, TIMEOUT)


def _words(at: AppTest) -> str:
    """Everything the page says in captions, markdown, infos and warnings."""
    return "\n".join(texts(at.caption) + texts(at.markdown) + texts(at.info) + texts(at.warning))


def _pixel_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "pixel" in line.lower()]


def test_compare_on_a_text_run_words_its_metrics_in_words(wording_runs, monkeypatch):
    at = open_page(_app(wording_runs["text"], monkeypatch), "views/compare.py")
    at.multiselect(key="compare_methods").set_value(["saliency", "ig"]).run()
    at.number_input(key="compare_n").set_value(3)
    at.toggle(key="compare_sanity").set_value(False)
    at.button(key="compare_go").click().run()
    assert_ok(at)
    assert "Metrics" in [s.value for s in at.subheader]
    notes = next(c for c in texts(at.caption) if c.startswith("Mean over the 3 inputs"))
    assert "the most relevant words are removed / added" in notes, notes
    assert "Completeness gap: |sum of attributions" in notes
    assert "Rationale pointing ↑" in at.dataframe[0].value.index  # cues has rationales: their notes say words
    assert "Rationale pointing: share of inputs for which the top-scoring word lies in the rationale" in notes
    assert not _pixel_lines(_words(at)), _pixel_lines(_words(at))


def test_the_data_set_report_of_a_text_run_says_words(wording_runs, monkeypatch):
    at = _app(wording_runs["text"], monkeypatch)
    at.run()
    at.switch_page("views/compare.py").run()
    at.session_state["compare_view"] = "Whole data set"
    at.run()
    assert_ok(at)
    charts = [str(c.proto.spec) for c in at.main.get("vega_lite_chart")]
    assert any("the most relevant words are removed" in c for c in charts)
    assert not any("pixel" in c for c in charts), [c for c in charts if "pixel" in c]
    table = next(d for d in at.dataframe if (d.key or "").startswith("dsr_table_"))
    config = json.loads(table.proto.columns)
    assert "rank the words alike" in config["disagreement"]["help"]
    assert "pixel" not in table.proto.columns
    assert not _pixel_lines(_words(at)), _pixel_lines(_words(at))


def test_the_stored_view_of_a_text_run_says_words(wording_runs, monkeypatch):
    at = _app(wording_runs["text"], monkeypatch)
    at.query_params["stored"] = "test:4"
    at.run()
    at.switch_page("views/explain.py").run()
    assert_ok(at)
    legend = next(c for c in texts(at.caption) if c.startswith("Stored metrics."))
    assert "the most relevant words are removed / added" in legend and "↑ higher is better" in legend
    assert not _pixel_lines(_words(at)), _pixel_lines(_words(at))


def _failing_ig(raw, methods=None, **_: object) -> TrainingExplanations:
    """What `explanations_across_training` returns, by hand: IG off by 35% at every epoch after raising its steps."""
    h, w = raw.shape[-2:]
    rng = np.random.default_rng(0)

    def at_epoch(epoch: int) -> EpochExplanations:
        e = Explanation(
            method="ig",
            params={"steps": 32},
            targets=np.array([0]),
            attributions=rng.normal(size=(1, h, w)).astype(np.float32),
            seconds=0.2,
            device="cpu",
            modality="image",
            diagnostics={"convergence_delta": [0.7], OUTPUT_CHANGE: [2.0], STEPS_USED: [256.0]},
        )
        return EpochExplanations(epoch, 0.4 + 0.1 * epoch, 0, 0.6, dict.fromkeys(methods or ["ig"], e))

    return TrainingExplanations(target=0, epochs=[at_epoch(1), at_epoch(2)])


def test_model_page_across_training_maps_carry_the_completeness_note(wording_runs, monkeypatch):
    monkeypatch.setattr(
        "xaidash.explainers.comparison.across_training.explanations_across_training",
        lambda run, raw, methods=None, **kw: _failing_ig(raw, methods),
    )
    at = _app(wording_runs["image"], monkeypatch)
    at.session_state["model_across_methods"] = ["ig"]
    at.run()
    at.switch_page("views/model.py").run()
    assert_ok(at)
    cards = [c for c in texts(at.caption) if c.startswith("val acc ")]
    assert len(cards) == 2, texts(at.caption)
    for card in cards:
        assert "⚠ values do not add up to f(x) − f(baseline): off by 35%" in card, card
        assert "steps raised 32 → 256, the most allowed" in card
