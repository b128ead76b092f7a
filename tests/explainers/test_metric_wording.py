"""Metric descriptions are worded by modality from one place (`scoring.unit_words`): a text run's metrics speak of
words, never pixels; an image run's of pixels."""

from __future__ import annotations

import pytest

from xaidash.dashboard.components.explain_tables import metrics_legend
from xaidash.explainers.scoring import METRIC_MEANING, METRICS, curves_legend, metric_meaning, unit_words


def test_the_metric_legend_of_a_text_run_says_words() -> None:
    legend = metrics_legend("text", 16)
    assert "pixel" not in legend.lower()
    assert "the most relevant words are removed / added (16 steps)" in legend


def test_the_metric_legend_of_an_image_run_says_pixels() -> None:
    assert "the most relevant pixels are removed / added" in metrics_legend("image")


@pytest.mark.parametrize("metric", list(METRICS))
def test_no_text_metric_speaks_of_pixels(metric: str) -> None:
    assert metric in METRIC_MEANING
    assert "pixel" not in metric_meaning(metric, "text").lower()
    assert "{" not in metric_meaning(metric, "image")


def test_one_place_for_the_unit_word() -> None:
    assert unit_words("text") == ("word", "words") and unit_words("image") == ("pixel", "pixels")
    assert unit_words("text")[1] in curves_legend("text")


def test_a_text_report_words_its_metrics_and_carries_the_completeness_note() -> None:
    """report.json's metric_info and the HTML report's metrics legend, for a text run: words; a map whose
    completeness check fails says so in report.json's caption and on its HTML card."""
    import json

    import numpy as np
    import torch

    from xaidash.data.registry import get_source
    from xaidash.data.tokenizer import WordVocab
    from xaidash.explainers.explanation import Explanation
    from xaidash.explainers.figures.report import MethodResult, MethodSetting, ReportSettings, session_report
    from xaidash.explainers.registry import OUTPUT_CHANGE, STEPS_USED
    from xaidash.models import ModelBundle, build_model, get_spec

    texts = ["not bad at all , a wonderful cast"]
    info = get_source("cues").info
    vocab = WordVocab.build(texts)
    torch.manual_seed(0)
    model = build_model("text_cnn", info, vocab_size=len(vocab), pad_id=vocab.pad_id).eval()
    bundle = ModelBundle(model, get_spec("text_cnn"), info, torch.device("cpu"), tokenizer=vocab)
    words = texts[0].split()
    e = Explanation(
        method="ig",
        params={"steps": 50},
        targets=np.array([1]),
        attributions=[np.linspace(-1, 1, len(words)).astype(np.float32)],
        seconds=0.2,
        device="cpu",
        modality="text",
        tokens=[words],
        diagnostics={"convergence_delta": [0.4], OUTPUT_CHANGE: [1.0], STEPS_USED: [400.0]},
    )
    report = session_report(
        bundle,
        "run",
        [("typed", texts[0], None)],
        np.array([[0.3, 0.7]]),
        [MethodResult("ig", e, metrics={"deletion_auc": [0.5], "insertion_auc": [0.6], "completeness_gap": [0.4]})],
        ReportSettings([MethodSetting("ig", "Integrated Gradients", {"steps": 50})], metrics=True),
    )
    data = json.loads(report.to_json())
    info_text = json.dumps(data["metric_info"])
    assert "pixel" not in info_text and "most relevant words" in data["metric_info"]["deletion_auc"]["meaning"]
    caption = data["explanations"][0]["figure"]["caption"]
    assert caption["incomplete"] and "off by 40%" in caption["text"] and "steps raised 50 → 400" in caption["text"]
    page = report.to_html()
    assert "most relevant words are removed / added" in page and "most relevant pixels" not in page
    assert "off by 40%" in page


def test_the_curves_legend_of_a_number_to_predict_names_no_probability() -> None:
    legend = curves_legend("table", regression=True)
    assert "probability" not in legend and "prediction's difference from the average row's" in legend
    assert "the target's probability" in curves_legend("table")
