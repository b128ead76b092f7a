"""A method that declares completeness (its values add up to f(x) - f(reference)) keeps the promise or says it
does not: every declaring method reports the output change beside its gap, `Completeness.check` holds the gap
against the declared tolerance, the map's caption says when it fails (and what IG did to keep it: its path
integrated again on segments split where it turns sharply, points raised up to a bound)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from image_bundles import RGB16, fresh_bundle
from table_bundles import split, untrained_bundle

from xaidash.data.registry import get_source
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers import explain, list_methods
from xaidash.explainers import metrics as M
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.figures.map_figure import Caption, completeness_sentence, explanation_figures
from xaidash.explainers.methods._path import NODES, refined_path, step_budget
from xaidash.explainers.registry import OUTPUT_CHANGE, STEPS_USED, CompletenessCheck, MethodSpec, get_method
from xaidash.models import ModelBundle, build_model, get_spec

TEXTS = ["the plot was not bad , honestly", "a dull and slow film", "great acting"]
CHEAP = {"samples": 16, "steps": 8, "background_size": 4}


def cheap_params(spec: MethodSpec) -> dict[str, int]:
    return {p.name: max(CHEAP[p.name], int(p.min or 0)) for p in spec.params if p.name in CHEAP}


def text_bundle(name: str = "text_cnn", *, attention_scale: float = 1.0, seed: int = 0) -> ModelBundle:
    """A random text model; `attention_scale` > 1 sharpens text_transformer's attention (and so IG's path)."""
    info = get_source("cues").info
    vocab = WordVocab.build(TEXTS)
    torch.manual_seed(seed)
    model = build_model(name, info, vocab_size=len(vocab), pad_id=vocab.pad_id).eval()
    if attention_scale != 1.0:
        with torch.no_grad():
            model.embedding.weight.mul_(50)
            for block in model.encoder.blocks:
                block.attn.qkv.weight.mul_(attention_scale)
    return ModelBundle(model, get_spec(name), info, torch.device("cpu"), tokenizer=vocab)


def images(n: int, seed: int = 1) -> torch.Tensor:
    return torch.rand(n, *RGB16.input_shape, generator=torch.Generator().manual_seed(seed))


# --- the refined path integral on its own -----------------------------------------------------------------------


def _sharp_path(alphas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """f(a) = a + 2 tanh((a - 0.37) / 5e-4): a jump of 4 within 0.1% of the path, split over two features."""
    a = alphas.double()
    z = (a - 0.37) / 5e-4
    f = a + 2 * torch.tanh(z)
    df = 1 + 2 / 5e-4 * (1 - torch.tanh(z) ** 2)
    return f, torch.stack([0.25 * df, 0.75 * df], dim=1)


def test_refined_path_resolves_a_jump_that_even_spaced_points_miss() -> None:
    change = float(_sharp_path(torch.tensor([1.0]))[0] - _sharp_path(torch.tensor([0.0]))[0])
    nodes, weights = np.polynomial.legendre.leggauss(50)
    even = float(_sharp_path(torch.as_tensor((nodes + 1) / 2))[1].sum(1).double() @ torch.as_tensor(weights / 2))
    assert abs(even - change) / abs(change) > 0.05  # the 50 Gauss-Legendre points IG starts with miss it

    attr, used = refined_path(_sharp_path, lambda a: _sharp_path(a)[0], change, steps=50, tolerance=0.01, rows=64)
    assert abs(float(attr.sum()) - change) <= 0.01 * abs(change)
    assert used <= step_budget(50) and used % NODES == 0
    np.testing.assert_allclose(attr.numpy(), [0.25 * change, 0.75 * change], rtol=0.01)


def test_refined_path_stops_at_its_budget() -> None:
    change = float(_sharp_path(torch.tensor([1.0]))[0] - _sharp_path(torch.tensor([0.0]))[0])
    _, used = refined_path(_sharp_path, lambda a: _sharp_path(a)[0], change, steps=2, tolerance=1e-9, rows=64)
    assert step_budget(2) - NODES < used <= step_budget(2)


# --- every declared completeness is checked ---------------------------------------------------------------------

DECLARING = [
    pytest.param(s.id, m, id=f"{s.id}-{m}") for s in list_methods() for m in s.modalities if s.completeness is not None
]


def _bundle_for(spec: MethodSpec, modality: str) -> ModelBundle:
    if modality == "table":
        return untrained_bundle()
    if modality == "text":
        return text_bundle("text_transformer")
    bundle = fresh_bundle("resnet_small")
    return bundle if spec.supports(bundle) else fresh_bundle("vit_tiny")


@pytest.mark.parametrize("method,modality", DECLARING)
def test_every_declared_completeness_is_checked_against_its_tolerance(method: str, modality: str) -> None:
    """The method reports f(x) - f(reference) beside its gap, and its check is the declared gap relative to it."""
    spec = get_method(method, modality)
    c = spec.completeness
    assert c is not None and c.diagnostic is not None, "a declared promise needs the method's own gap to check it"
    assert 0 < c.tolerance < 1
    bundle = _bundle_for(spec, modality)
    x = TEXTS if modality == "text" else split().rows[:2].clone() if modality == "table" else images(2)
    e = explain(bundle, x, method=method, **cheap_params(spec))
    terms = M.declared_terms(bundle, x, e)
    change = np.asarray(e.diagnostics[OUTPUT_CHANGE])
    np.testing.assert_allclose(change, terms.scores - terms.reference_scores, rtol=1e-3, atol=1e-4)
    for i in range(len(e)):
        check = c.check(e.diagnostics, i, e.params)
        assert check is not None and check.tolerance == c.tolerance
        want = abs(float(terms.absolute_gaps()[i])) / max(abs(float(change[i])), 1e-3)
        assert check.gap == pytest.approx(want, rel=1e-2, abs=1e-4)
        caption = explanation_figures({method: e}, i, classes=bundle.info.classes)[method].caption
        assert caption.incomplete == (not check.holds)
        assert ("⚠" in caption.text()) == (not check.holds)


def test_a_stored_explanation_without_its_change_is_not_checked() -> None:
    spec = get_method("ig", "image")
    assert spec.completeness is not None
    assert spec.completeness.check({"convergence_delta": [0.5]}, 0, {"steps": 50}) is None


# --- text IG: the promise kept where it can be, said where it cannot ----------------------------------------------


def _check(e: Explanation, i: int) -> CompletenessCheck:
    c = get_method("ig", e.modality).completeness
    assert c is not None
    check = c.check(e.diagnostics, i, e.params)
    assert check is not None
    return check


def test_text_ig_raises_its_steps_where_the_path_turns_sharply() -> None:
    bundle = text_bundle("text_transformer", attention_scale=10.0, seed=1)
    e = explain(bundle, TEXTS, method="ig", steps=50)
    checks = [_check(e, i) for i in range(len(TEXTS))]
    assert any(k.raised for k in checks), [k.gap for k in checks]
    for k in checks:
        assert k.steps_asked == 50 and k.steps_used is not None and k.steps_used <= step_budget(50)
        # raised until it holds, or as far as allowed
        assert k.holds or k.steps_used > step_budget(50) - NODES, k
    # the attributions still add up to what the diagnostic says
    sums = np.array([a.sum() for a in e.attributions])
    np.testing.assert_allclose(
        np.abs(sums - np.asarray(e.diagnostics[OUTPUT_CHANGE])), e.diagnostics["convergence_delta"], atol=1e-4
    )


def test_text_ig_refined_values_match_a_fine_integration() -> None:
    """Where the refined path holds, each word's value is what a dense even integration of the same path gives
    (8,000 midpoints: slower, and less exact than the refined 400)."""
    bundle = text_bundle("text_transformer", attention_scale=10.0, seed=1)
    text = TEXTS[2]
    e = explain(bundle, [text], method="ig", steps=50)
    check = _check(e, 0)
    assert check.raised and check.holds, check
    ids = bundle.prepare([text])
    layer = bundle.layer("embedding")
    with torch.no_grad():
        end = layer(ids)
        start = layer(torch.zeros_like(ids))  # the padding embedding: every id here is a word
    diff, target = end - start, int(e.targets[0])
    total = torch.zeros(ids.shape[1])
    for alphas in ((torch.arange(8000, dtype=torch.float32) + 0.5) / 8000).split(500):
        emb = (start + alphas.view(-1, 1, 1) * diff).requires_grad_()
        handle = layer.register_forward_hook(lambda module, inputs, output, emb=emb: emb)
        try:
            out = bundle.model(ids.expand(len(alphas), -1))[:, target]
            (grad,) = torch.autograd.grad(out.sum(), emb)
        finally:
            handle.remove()
        total += (grad * diff).sum(-1).sum(0).detach() / 8000
    # each word agrees within what the two integrations themselves miss of the change (the dense even one misses more)
    dense_gap = abs(float(total.sum()) - check.change)
    assert dense_gap < 0.1 * abs(check.change)
    np.testing.assert_allclose(e.item(0), total.numpy(), atol=2 * (dense_gap + check.gap * abs(check.change)))


def test_text_ig_that_cannot_keep_its_promise_says_so_in_its_caption() -> None:
    bundle = text_bundle("text_transformer", attention_scale=10.0, seed=0)
    e = explain(bundle, TEXTS, method="ig", steps=4)
    figures = [explanation_figures({"ig": e}, i, classes=bundle.info.classes)["ig"] for i in range(len(TEXTS))]
    failing = [f for i, f in enumerate(figures) if not _check(e, i).holds]
    assert failing, "a path this sharp needs more than 32 points"
    for fig in failing:
        text = fig.caption.text()
        assert (
            fig.caption.incomplete
            and "⚠ values do not add up to f(x) − f(every word piece's embedding set to padding)" in text
        )
        assert "steps raised 4 → 32, the most allowed" in text
        assert fig.to_json()["caption"]["incomplete"] is True


def test_smooth_paths_keep_the_steps_asked_and_say_nothing() -> None:
    bundle = text_bundle("text_transformer")
    e = explain(bundle, TEXTS, method="ig", steps=50)
    assert e.diagnostics[STEPS_USED] == [50.0] * len(TEXTS)
    fig = explanation_figures({"ig": e}, 0, classes=bundle.info.classes)["ig"]
    assert fig.caption.completeness == "" and not fig.caption.incomplete


# --- the caption ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "check,says,fails",
    [
        (None, "", False),
        (CompletenessCheck(0.002, 0.01, 3.0, 50, 50), "", False),
        (CompletenessCheck(0.008, 0.01, 3.0, 50, 400), "steps raised 50 → 400 to reach gap 0.8%", False),
        (
            CompletenessCheck(0.35, 0.01, 3.0, 50, 400),
            "values do not add up to f(x) − f(reference): off by 35% of it (tolerance 1.0%); "
            "steps raised 50 → 400, the most allowed",
            True,
        ),
        (
            CompletenessCheck(0.12, 0.05, 3.0),
            "values do not add up to f(x) − f(reference): off by 12% of it (tolerance 5.0%)",
            True,
        ),
        (CompletenessCheck(math.inf, 0.01, 0.0), "values do not add up to f(x) − f(reference): off by >1000%", True),
    ],
)
def test_completeness_sentence(check: CompletenessCheck | None, says: str, fails: bool) -> None:
    sentence, failed = completeness_sentence(check)
    assert sentence.startswith(says) and failed == fails


def test_caption_json_keeps_the_completeness_note() -> None:
    caption = Caption("cat", 0.5, completeness="values do not add up", incomplete=True)
    assert caption.text() == "target cat · 0.50 s · ⚠ values do not add up"
    again = Caption.from_json(json.loads(json.dumps(caption.to_json())))
    assert again == caption
    assert Caption.from_json({"target": "cat"}).completeness == ""  # a report written before the field


def test_image_explanation_with_a_broken_promise_is_flagged_in_the_html_report() -> None:
    """The figure carries the note, so the HTML report's card shows it with no code of its own."""
    from xaidash.explainers.figures.html_report import _card
    from xaidash.explainers.figures.report import ScoredMap

    e = Explanation(
        method="ig",
        params={"baseline": "black", "steps": 50},
        targets=np.array([0]),
        attributions=np.ones((1, 16, 16), np.float32),
        seconds=0.1,
        device="cpu",
        modality="image",
        diagnostics={"convergence_delta": [0.5], OUTPUT_CHANGE: [2.0], STEPS_USED: [400.0]},
    )
    fig = explanation_figures({"ig": e}, 0, classes=["a", "b"])["ig"]
    assert fig.caption.incomplete and "off by 25%" in fig.caption.text()

    class _Input:
        name = "input"

    class _Report:
        def __init__(self) -> None:
            self.runs = [object()]
            self.inputs = [_Input()]

    card = _card(_Report(), ScoredMap(input=0, run="A", method="ig", label="IG", figure=fig))  # type: ignore[arg-type]
    assert "off by 25%" in card and "⚠" in card
