"""Prompt attributions as presented (explainers/language/figures.py): legends and units from the declared facts in
the prompt's unit, colour scales per legend group, captions naming the explained log-probability, the prompt x
generated-token matrix, and the JSON and HTML reports (escaped, self-contained)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from tiny_lm import tiny_lm

from xaidash.explainers.figures.scales import robust_scale
from xaidash.explainers.language import api, registry
from xaidash.explainers.language import figures as F
from xaidash.explainers.language.query import PromptQuery, PromptResult, make_query
from xaidash.explainers.language.registry import PromptMethodSpec
from xaidash.explainers.params import Param
from xaidash.explainers.registry import OUTPUT_CHANGE, Completeness
from xaidash.models.language.generate import generate
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import build_prompt

GAP = "gap"


def _ramp(lm: LanguageModel, task: PromptQuery, params: dict) -> PromptResult:
    """Values -1 .. 2 (times `gain`) over the features, and a per-step matrix whose span rows sum to them."""
    values = np.linspace(-1.0, 2.0, task.n_features) * params["gain"]
    per_step = np.zeros((task.n_steps, task.n_features))
    per_step[task.span[0]] = values
    per_step[: task.span[0]] = 0.25
    return PromptResult(values, per_step, rows=task.n_features + 1, batch=4)


def _shap(lm: LanguageModel, task: PromptQuery, params: dict) -> PromptResult:
    """Values that add up to `change`, reported off by `gap`."""
    values = np.full(task.n_features, params["change"] / task.n_features)
    return PromptResult(
        values, None, rows=7, batch=7, diagnostics={GAP: params["gap"], OUTPUT_CHANGE: params["change"]}
    )


def _attention(lm: LanguageModel, task: PromptQuery, params: dict) -> PromptResult:
    return PromptResult(np.linspace(0.0, 0.5, task.n_features), None, rows=1, batch=1)


FAKES = (
    PromptMethodSpec(
        "fake_ablation",
        "Fake ablation",
        _ramp,
        lambda p, f, t, s: f + 1,
        output="log_probability",
        family="perturbation",
        params=(Param("gain", "float", 1.0),),
        per_step=True,
    ),
    *(
        PromptMethodSpec(
            name,
            label,
            _shap,
            lambda p, f, t, s: 7,
            output="log_probability",
            family="shap",
            params=(Param("gap", "float", 0.0), Param("change", "float", 2.0)),
            completeness=Completeness("masked_prompt", "token", GAP),
        )
        for name, label in (("fake_shap", "Fake SHAP"), ("fake_shap2", "Fake SHAP two"))
    ),
    PromptMethodSpec(
        "fake_attention",
        "Fake attention",
        _attention,
        lambda p, f, t, s: 1,
        output="attention",
        family="attention",
        signed=False,
    ),
)


@pytest.fixture
def fakes() -> Iterator[None]:
    for spec in FAKES:
        registry.PROMPT_METHODS.register(spec)
    yield
    for spec in FAKES:
        registry.PROMPT_METHODS.unregister(spec)


@pytest.fixture(scope="module")
def answer():
    lm = tiny_lm("llama", seed=1)
    prompt = build_prompt(lm, "what is the capital of france ?")
    return lm, prompt, generate(lm, prompt, max_new_tokens=4)


def _task(answer, **kw) -> PromptQuery:
    lm, prompt, generation = answer
    return make_query(lm, prompt, generation.ids, **{"span": (1, 2), **kw})


def test_legends_speak_of_log_probability_per_prompt_unit(fakes) -> None:
    ablation, shap = registry.get_prompt_method("fake_ablation"), registry.get_prompt_method("fake_shap")
    assert F.prompt_legend(ablation, "token").units == "Δ log-probability per token"
    assert F.prompt_legend(ablation, "word").units == "Δ log-probability per word"
    assert F.prompt_legend(shap, "token").units == "log-probability contribution per token"
    word = F.prompt_legend(shap, "word")
    assert word.units == "log-probability contribution per word" and word.group != F.prompt_legend(shap, "token").group
    attention = F.prompt_legend(registry.get_prompt_method("fake_attention"), "token")
    assert attention.group == "attention" and "target token" in attention.meaning and not attention.signed
    # Two methods whose values add up to the same output per the same unit share a group; a perturbation has its own.
    assert (
        F.prompt_legend(shap, "token").group == F.prompt_legend(registry.get_prompt_method("fake_shap2"), "token").group
    )
    assert F.prompt_legend(ablation, "token").group != F.prompt_legend(shap, "token").group


def test_figures_hold_the_features_values_and_a_caption_naming_the_target(fakes, answer) -> None:
    task = _task(answer)
    explained = api.explain_prompt(answer[0], task, {"fake_ablation": {"gain": 3.0}, "fake_shap": {"gap": 0.5}})
    figs = F.prompt_figures(task, explained)
    fig = figs["fake_ablation"]
    token = answer[0].token_text([answer[2].ids[1]])[0]
    assert fig.modality == "causal_lm" and fig.words == tuple(task.labels)  # drawn by the prompt adapter
    assert np.allclose(fig.values, explained["fake_ablation"].attributions)
    assert fig.legend.units == "Δ log-probability per token"
    assert fig.target_name == f"log p('{token}')" == fig.caption.target
    assert f"{task.n_features + 1} model rows" in fig.caption.text() and " s · " in fig.caption.text()
    assert fig.tokens_html is not None and all(w in fig.tokens_html for w in task.labels if w.isalpha())
    # A completeness promise that fails is said with the gap; one that holds says nothing.
    shap = figs["fake_shap"].caption
    assert shap.incomplete and "off by 25%" in shap.completeness_text() and shap.completeness_text().startswith("⚠")
    held = F.prompt_figures(task, api.explain_prompt(answer[0], task, {"fake_shap": {"gap": 0.001}}))[
        "fake_shap"
    ].caption
    assert not held.incomplete and held.completeness == ""
    assert figs["fake_ablation"].caption.completeness == ""


def test_a_contrast_and_a_span_are_named_in_the_caption(fakes, answer) -> None:
    lm, _, generation = answer
    other = next(i for i in range(lm.vocab_size) if i != generation.ids[1])
    task = _task(answer, contrast=other)
    fig = F.prompt_figures(task, api.explain_prompt(answer[0], task, {"fake_ablation": {}}))["fake_ablation"]
    assert (
        fig.caption.target == f"log p('{lm.token_text([generation.ids[1]])[0]}') − log p('{lm.token_text([other])[0]}')"
    )
    span = _task(answer, span=(0, 3))
    assert F.target_label(span) == "log p('" + "".join(lm.token_text(list(generation.ids[:3]))) + "')"
    assert F.quoted("a\nb") == "'a\\nb'"


def test_scales_are_per_map_or_shared_within_a_legend_group(fakes, answer) -> None:
    task = _task(answer)
    methods = {"fake_ablation": {"gain": 10.0}, "fake_shap": {"change": 2.0}, "fake_shap2": {"change": 8.0}}
    explained = api.explain_prompt(answer[0], task, methods)
    own = F.prompt_figures(task, explained)
    for m, fig in own.items():
        assert fig.scale == pytest.approx(robust_scale(explained[m].attributions)) and fig.caption.note == ""
    shared = F.prompt_figures(task, explained, scale_mode="units")
    assert shared["fake_shap"].scale == shared["fake_shap2"].scale == pytest.approx(8.0 / task.n_features)
    assert shared["fake_shap"].caption.note == "shared scale: Fake SHAP, Fake SHAP two"
    assert shared["fake_ablation"].scale == pytest.approx(20.0) and shared["fake_ablation"].caption.note == ""


def test_the_matrix_is_a_labelled_heatmap_on_one_colour_scale(fakes, answer) -> None:
    task = _task(answer, span=(2, 3))
    explained = api.explain_prompt(answer[0], task, {"fake_ablation": {"gain": 2.0}, "fake_shap": {}})
    assert F.matrix_spec(task, explained["fake_shap"]) is None  # no per-step rows, no matrix
    spec = F.matrix_spec(task, explained["fake_ablation"])
    assert spec is not None
    rows = spec["data"]["values"]
    assert len(rows) == task.n_steps * task.n_features == 3 * task.n_features
    assert {r["label"] for r in rows} == set(task.labels) and {r["token"] for r in rows} == set(F.step_labels(task))
    x, y, colour = spec["encoding"]["x"], spec["encoding"]["y"], spec["encoding"]["color"]
    assert x["title"] == "prompt tokens" and y["title"] == "generated tokens"
    assert colour["title"].startswith("Δ log-probability per token")
    assert colour["scale"]["domain"] == [-4.0, 4.0] and colour["scale"]["domainMid"] == 0
    # Labels are looked up by position (prompts repeat tokens), as a valid Vega-Lite spec.
    assert json.loads(x["axis"]["labelExpr"].removesuffix("[datum.value]")) == [F.quoted(t) for t in task.labels]
    altair = pytest.importorskip("altair")
    altair.Chart.from_dict(spec)  # raises on a spec the schema refuses
    scale = F.matrix_scale(registry.get_prompt_method("fake_ablation"), explained["fake_ablation"].per_step, "token")
    html = F.matrix_html(task.labels, F.step_labels(task), explained["fake_ablation"].per_step, scale)
    assert html.count("<td ") == 3 * task.n_features and "xai-cbar" in html and "each generated token" in html


@dataclass
class Curve:
    auc: float
    points: np.ndarray


def test_the_report_is_plain_json_and_its_page_is_escaped_and_offline(fakes) -> None:
    lm = tiny_lm("llama", seed=1)
    prompt = build_prompt(lm, "what is <script>alert(1)</script> the capital ?")
    generation = generate(lm, prompt, max_new_tokens=3)
    task = make_query(lm, prompt, generation.ids, span=(0, 1))
    explained = api.explain_prompt(lm, task, {"fake_ablation": {}, "fake_shap": {"gap": 1.0}})
    faith = {"fake_ablation": {"deletion_auc": np.float32(0.25), "curve": Curve(0.5, np.arange(3.0))}}
    report = F.prompt_report(generation, task, explained, faith)
    text = json.dumps(report, allow_nan=False)  # plain JSON: no NumPy values, no NaN
    back = json.loads(text)
    assert back["target"] == {
        "span": [0, 1],
        "text": lm.token_text([generation.ids[0]])[0],
        "ids": [generation.ids[0]],
        "contrast": None,
        "label": F.target_label(task),
    }
    ablation = back["methods"]["fake_ablation"]
    assert ablation["figure"]["scores"] == pytest.approx(list(explained["fake_ablation"].attributions))
    assert [t["label"] for t in ablation["top"]] == [
        task.labels[i] for i in np.argsort(-np.asarray(ablation["figure"]["scores"]))[:5]
    ]
    assert ablation["rows"] == task.n_features + 1 and len(ablation["per_step"]) == 1
    assert back["faithfulness"] == {
        "fake_ablation": {"deletion_auc": 0.25, "curve": {"auc": 0.5, "points": [0.0, 1.0, 2.0]}}
    }
    assert back["generation"]["text"] == generation.text and len(back["generation"]["steps"]) == len(generation.steps)
    page = F.prompt_report_html(report)
    assert "<script" not in page and "&lt;script&gt;" in page  # the user's text is shown, never run
    assert "http" not in page.replace("http-equiv", "")  # nothing fetched
    assert "Fake ablation" in page and "Δ log-probability per token" in page and "deletion_auc" in page
    assert "⚠ values do not add up" in page and "Prompt × generated tokens" in page
