"""What a method's values add up to is worded from its declared `Completeness` (explainers/registry.py `TOTALS`,
`Completeness.total`) in every legend, caption, warning and `xaidash methods` line, never as a generic
"f(x) − f(reference)": LRP has no reference (its relevance adds up to the logit less what the biases absorb, checked
here on a small model with and without biases), SHAP's reference is the background's mean output, a prompt's
Shapley values add up to the change from the prompt with every feature replaced by the baseline token."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import torch
from image_bundles import fresh_bundle

from xaidash.data.modalities import PROMPT
from xaidash.explainers import explain, get_method, list_methods
from xaidash.explainers.cli import main as cli_main
from xaidash.explainers.figures.legend import map_legend
from xaidash.explainers.figures.map_figure import completeness_of, completeness_sentence, explanation_figures
from xaidash.explainers.language import api as _prompt_api  # noqa: F401  (registers the prompt methods)
from xaidash.explainers.language.registry import get_prompt_method, list_prompt_methods
from xaidash.explainers.registry import TOTALS, CompletenessCheck
from xaidash.models import ModelBundle

GENERIC = "f(x) − f(reference)"


def _declaring() -> list:
    return [s for s in [*list_methods(), *list_prompt_methods()] if s.completeness is not None]


def test_every_legend_says_what_its_method_declares_it_adds_up_to() -> None:
    specs = _declaring()
    assert len(specs) >= 8
    for spec in specs:
        c = spec.completeness
        assert c is not None and c.reference in TOTALS
        modality = spec.modalities[0]
        meaning = map_legend(spec, modality).meaning
        assert f"the values add up to {c.total}" in meaning, (spec.id, meaning)
        assert GENERIC not in meaning and "f(reference)" not in c.total


def test_lrp_and_shap_and_prompt_shapley_are_worded_by_their_own_totals() -> None:
    lrp = get_method("lrp", "image")
    assert lrp.completeness is not None and lrp.completeness.total == "f(x) less what the biases absorb"
    assert "f(x) less what the biases absorb" in map_legend(lrp, "image").meaning
    shap = get_method("shap_gradient", "image")
    assert shap.completeness is not None and "E[f(background)]" in shap.completeness.total
    shapley = get_prompt_method("shapley_sampling")
    meaning = map_legend(shapley, PROMPT.id, "token").meaning
    assert "f(prompt) − f(every feature replaced by the baseline token)" in meaning
    assert "log-probability" in meaning


def test_xaidash_methods_reads_the_declared_total() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["methods", "--modality", "image"]) == 0
    lines = {line.split()[0]: line for line in out.getvalue().splitlines() if line and not line.startswith(" ")}
    assert "sums to f(x) less what the biases absorb" in lines["lrp"]
    assert "sums to f(x) − f(baseline)" in lines["ig"]
    assert "itself" not in lines["lrp"]


def _images(bundle: ModelBundle, n: int = 3) -> torch.Tensor:
    return torch.rand(n, *bundle.info.input_shape, generator=torch.Generator().manual_seed(2))


def _biases(bundle: ModelBundle, value: float | None) -> ModelBundle:
    """Every conv and linear bias set to `value` (None: left as built)."""
    with torch.no_grad():
        for m in bundle.model.modules():
            if isinstance(m, torch.nn.Conv2d | torch.nn.Linear) and m.bias is not None:
                m.bias.fill_(value) if value is not None else None
    return bundle


def _lrp_sums(bundle: ModelBundle) -> tuple[np.ndarray, np.ndarray]:
    raw = _images(bundle)
    e = explain(bundle, raw, [0, 1, 2], "lrp")
    logits = bundle.logits(bundle.prepare(raw))[torch.arange(3), torch.tensor([0, 1, 2])].detach().numpy()
    return e.attributions.reshape(3, -1).sum(1), logits


def test_lrp_relevance_adds_up_to_the_logit_only_without_biases() -> None:
    """simple_cnn without biases: the relevance adds up to f(x) (no reference); with biases they absorb a share."""
    sums, logits = _lrp_sums(_biases(fresh_bundle("simple_cnn"), 0.0))
    np.testing.assert_allclose(sums, logits, rtol=1e-3, atol=1e-5)
    sums, logits = _lrp_sums(_biases(fresh_bundle("simple_cnn"), 0.05))
    share = np.abs(sums - logits) / np.abs(logits)
    assert share.max() > 0.05, (sums, logits)  # a "sums to f(x)" or "f(x) − f(reference)" would be wrong here


def test_lrps_caption_names_the_biases_share_and_never_warns_of_a_reference() -> None:
    bundle = _biases(fresh_bundle("simple_cnn"), 0.05)
    raw = _images(bundle)
    e = explain(bundle, raw, [0, 1, 2], "lrp")
    spec = get_method("lrp", "image")
    sentences = [completeness_of(spec, e, i) for i in range(3)]
    said = [s for s, broken in sentences if s]
    assert said, sentences
    for sentence, broken in sentences:
        assert not broken and "⚠" not in sentence and "f(reference)" not in sentence
    assert all(s.startswith("values differ from f(x) by ") and s.endswith("what the biases absorb") for s in said)
    fig = explanation_figures({"lrp": e}, 0, classes=bundle.info.classes)["lrp"]
    assert "f(reference)" not in fig.caption.text() + fig.legend.meaning


def test_a_broken_promise_is_worded_by_the_declared_total() -> None:
    check = CompletenessCheck(0.35, 0.01, 2.0, adds_up_to=TOTALS["baseline"])
    assert completeness_sentence(check) == (
        "values do not add up to f(x) − f(baseline): off by 35% of it (tolerance 1.0%)",
        True,
    )
    absorbed = CompletenessCheck(math.inf, 0.05, 2.0, adds_up_to="f(x)", absorbed="the biases")
    sentence, broken = completeness_sentence(absorbed)
    assert broken and sentence.startswith("values do not add up to f(x) less what the biases absorb")
