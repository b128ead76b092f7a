"""The facts a method declares on its spec hold: whether it reads background samples, what its
attributions add up to (completeness, checked against the method's own diagnostic), that the scores
compute completeness exactly where it is declared, and the one deletion/insertion step count."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest
import torch
from image_bundles import RGB16, fresh_bundle
from table_bundles import split, untrained_bundle

from xaidash.data.modalities.graph import GRAPH, GraphInput
from xaidash.data.registry import get_source, load_split
from xaidash.data.tokenizer import WordVocab
from xaidash.explainers import explain, list_methods
from xaidash.explainers import metrics as M
from xaidash.explainers.comparison.compare import compare_methods
from xaidash.explainers.perturbation_curves import text_perturbation_curve
from xaidash.explainers.registry import MethodSpec, get_method
from xaidash.explainers.samples import background_samples, default_background
from xaidash.explainers.scoring import explain_and_score, input_metrics
from xaidash.models import ModelBundle, build_model, get_spec

TEXTS = ["the plot was not bad , honestly", "a dull and slow film", "great acting"]
CHEAP = {"samples": 16, "steps": 8, "background_size": 4, "epochs": 2, "train_inputs": 4}


def cheap_params(spec: MethodSpec) -> dict[str, int]:
    return {p.name: max(CHEAP[p.name], int(p.min or 0)) for p in spec.params if p.name in CHEAP}


def text_bundle(name: str = "text_cnn") -> ModelBundle:
    info = get_source("cues").info
    vocab = WordVocab.build(TEXTS)
    torch.manual_seed(0)
    model = build_model(name, info, vocab_size=len(vocab), pad_id=vocab.pad_id).eval()
    return ModelBundle(model, get_spec(name), info, torch.device("cpu"), tokenizer=vocab)


def images(n: int, seed: int = 1) -> torch.Tensor:
    return torch.rand(n, *RGB16.input_shape, generator=torch.Generator().manual_seed(seed))


@functools.cache
def series_bundle(name: str) -> ModelBundle:
    """An untrained zoo series model on `series_shapes` (its splits load offline: real series, a real background)."""
    info = get_source("series_shapes").info
    torch.manual_seed(0)
    return ModelBundle(build_model(name, info).eval(), get_spec(name), info, torch.device("cpu"))


def series_inputs(n: int, which: str = "test", start: int = 0) -> torch.Tensor:
    return load_split("series_shapes", which).series[start : start + n].clone()  # type: ignore[union-attr]


@functools.cache
def graph_bundle(name: str) -> ModelBundle:
    """An untrained zoo graph model on `ba_shapes` (generated offline)."""
    info = get_source("ba_shapes").info
    torch.manual_seed(0)
    return ModelBundle(build_model(name, info).eval(), get_spec(name), info, torch.device("cpu"))


def graph_inputs(n: int, which: str = "test", start: int = 0) -> list[GraphInput]:
    return GRAPH.items(load_split("ba_shapes", which), range(start, start + n))


def bundle_for(spec: MethodSpec, modality: str) -> ModelBundle:
    if modality == "graph":
        return graph_bundle("gat" if spec.family == "attention" else "gcn")
    if modality == "table":
        return untrained_bundle()
    if modality == "series":
        return series_bundle("series_transformer" if spec.family == "attention" else "series_cnn")
    if modality == "text":
        return text_bundle("text_transformer" if spec.family == "attention" else "text_cnn")
    bundle = fresh_bundle("resnet_small")
    return bundle if spec.supports(bundle) else fresh_bundle("vit_tiny")


def inputs_for(modality: str, n: int) -> list[str] | list[GraphInput] | torch.Tensor:
    if modality == "graph":
        return graph_inputs(n)
    if modality == "text":
        return TEXTS[:n]
    if modality == "series":  # amplified: an untrained network's output barely moves on the plain series
        return series_inputs(n) * 4
    return split().rows[:n].clone() if modality == "table" else images(n)


def _baseline_choices(spec: MethodSpec) -> tuple[str | None, ...]:
    """A method's baseline choices (what decides whether IG and DeepLift need a background); (None,) without one."""
    return next((p.choices for p in spec.params if p.name == "baseline"), (None,))


BACKGROUND_CASES = [
    pytest.param(spec.id, modality, choice, id=f"{spec.id}-{modality}-{choice or 'default'}")
    for spec in list_methods()
    for modality in spec.modalities
    for choice in _baseline_choices(spec)
]


@pytest.mark.parametrize("method,modality,baseline", BACKGROUND_CASES)
def test_a_method_reads_the_background_exactly_when_it_says_it_needs_one(method, modality, baseline):
    spec = get_method(method, modality)
    bundle = bundle_for(spec, modality)
    params = {**cheap_params(spec), **({"baseline": baseline} if baseline else {})}
    x = inputs_for(modality, 2)
    if modality == "text":
        dark, light = torch.zeros(2, 4, dtype=torch.long), torch.ones(2, 4, dtype=torch.long)
    elif modality == "table":  # two sets of different training rows
        rows = split(which="train").rows
        dark, light = bundle.prepare(rows[:6]), bundle.prepare(rows[6:12])
    elif modality == "graph":  # two sets of different training nodes
        dark, light = bundle.prepare(graph_inputs(6, "train")), bundle.prepare(graph_inputs(6, "train", 6))
    elif modality == "series":  # two sets of different training series
        dark, light = bundle.prepare(series_inputs(6, "train")), bundle.prepare(series_inputs(6, "train", 6))
    else:  # two backgrounds with different images and different channel means
        dark, light = bundle.prepare(images(6, seed=2) * 0.3), bundle.prepare(0.7 + images(6, seed=3) * 0.3)
    a = explain(bundle, x, [0, 1], method, background=dark, **params)
    b = explain(bundle, x, [0, 1], method, background=light, **params)
    reads = not all(np.allclose(a.item(i), b.item(i)) for i in range(2))
    assert reads == spec.needs_background(a.params)


def test_needs_background_values():
    assert get_method("shap_gradient", "image").needs_background({"samples": 1, "background_size": 1})
    assert get_method("shap_deep", "image").needs_background({"background_size": 1})
    for method in ("ig", "deeplift"):
        spec = get_method(method, "image")
        assert spec.needs_background(spec.resolve_for(fresh_bundle("mlp"), {"baseline": "mean"}))
        assert not spec.needs_background(spec.resolve_for(fresh_bundle("mlp"), {}))
    assert not get_method("ig", "text").needs_background({"steps": 8})


@pytest.fixture(scope="module")
def shapes_bundle() -> ModelBundle:
    """resnet_small on `shapes`, whose training split loads offline: the default background exists."""
    torch.manual_seed(0)
    info = get_source("shapes").info
    return ModelBundle(build_model("resnet_small", info).eval(), get_spec("resnet_small"), info, torch.device("cpu"))


def test_explain_loads_the_default_background_once_per_bundle(shapes_bundle):
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    assert default_background(shapes_bundle) is default_background(shapes_bundle)
    assert torch.equal(default_background(shapes_bundle), background_samples(shapes_bundle))
    for method, params in (("ig", {"baseline": "mean", "steps": 8}), ("shap_deep", {"background_size": 8})):
        implicit = explain(shapes_bundle, x, [0, 1], method, **params)
        given = explain(shapes_bundle, x, [0, 1], method, background=background_samples(shapes_bundle), **params)
        other = explain(
            shapes_bundle, x, [0, 1], method, background=background_samples(shapes_bundle, 8, seed=5), **params
        )
        np.testing.assert_allclose(implicit.attributions, given.attributions, rtol=1e-5, atol=1e-7)
        assert not np.allclose(implicit.attributions, other.attributions)
        # completeness finds the same reference without being told
        np.testing.assert_allclose(
            M.completeness_gap(shapes_bundle, x, implicit),
            M.completeness_gap(shapes_bundle, x, given, background=background_samples(shapes_bundle)),
            rtol=1e-5,
            atol=1e-6,
        )
    assert default_background(text_bundle()) is None


DECLARING = [
    pytest.param(s.id, m, id=f"{s.id}-{m}") for s in list_methods() for m in s.modalities if s.completeness is not None
]


@pytest.mark.parametrize("method,modality", DECLARING)
def test_completeness_gap_is_the_methods_own_diagnostic(method, modality):
    """The gap computed from the spec's facts (output, unit, reference) equals the gap the method
    reports itself, relative to the output change: both measure |sum - (f(x) - f(ref))|."""
    spec = get_method(method, modality)
    c = spec.completeness
    bundle = bundle_for(spec, modality)
    x = inputs_for(modality, 3)
    e = explain(bundle, x, method=method, **cheap_params(spec))
    terms = M.declared_terms(bundle, x, e)
    change = np.abs(terms.scores - terms.reference_scores)
    assert (change > 1e-4).all(), "the reference must move the output for the check to mean anything"
    if c.diagnostic is not None:
        own = np.abs(np.asarray(e.diagnostics[c.diagnostic]))
        np.testing.assert_allclose(terms.absolute_gaps(), own, rtol=1e-3, atol=1e-5 * max(1.0, change.max()))
        np.testing.assert_allclose(M.completeness_gap(bundle, x, e), own / change, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize(
    "method,modality,params,tolerance",
    [
        # a ReLU network's kinks keep a Riemann-type quadrature of the path ~1% off
        pytest.param("ig", "image", {"steps": 200}, 3e-2, id="ig-image"),
        pytest.param("deeplift", "image", {}, 1e-3, id="deeplift-image"),
        pytest.param("shap_deep", "image", {}, 1e-3, id="shap_deep-image"),
        pytest.param("ig", "text", {"steps": 200}, 1e-2, id="ig-text"),
        pytest.param("ig", "table", {"steps": 50}, 1e-2, id="ig-table"),
        pytest.param("shap_kernel", "table", {"samples": 64}, 1e-3, id="shap_kernel-table"),
    ],
)
def test_completeness_gap_is_small_where_the_method_is_exact(method, modality, params, tolerance):
    spec = get_method(method, modality)
    bundle = bundle_for(spec, modality)
    assert bundle.spec.deeplift_ok or spec.id not in ("deeplift", "shap_deep")
    x = inputs_for(modality, 3)
    gaps = M.completeness_gap(bundle, x, explain(bundle, x, method=method, **params))
    assert np.nanmax(gaps) < tolerance, gaps


def test_superpixel_values_are_summed_once_per_superpixel():
    """shap_kernel paints each superpixel's value over its pixels: a pixel sum would count it once per pixel."""
    bundle = fresh_bundle("resnet_small")
    x = images(2)
    e = explain(bundle, x, method="shap_kernel", samples=40)
    terms = M.declared_terms(bundle, x, e)
    pixel_sums = e.attributions.reshape(2, -1).sum(1)
    assert not np.allclose(pixel_sums, terms.sums)
    per_segment = [sum(float(e.item(i)[e.segments[i] == k][0]) for k in np.unique(e.segments[i])) for i in range(2)]
    np.testing.assert_allclose(terms.sums, per_segment, rtol=1e-5)


@pytest.mark.parametrize("modality", ["image", "text"])
def test_scores_include_completeness_exactly_where_it_is_declared(modality):
    bundle = text_bundle("text_transformer") if modality == "text" else fresh_bundle("vit_tiny")
    x = TEXTS[:2] if modality == "text" else images(2)
    for spec in list_methods(modality):
        if not spec.supports(bundle):
            continue
        scored = explain_and_score(bundle, x, spec.id, cheap_params(spec), steps=4)
        assert ("completeness_gap" in scored.metrics) == (spec.completeness is not None), spec.id
        assert "completeness_gap" not in scored.metric_errors, scored.metric_errors


def test_one_number_of_deletion_steps_everywhere():
    steps = M.CURVE_STEPS
    for fn in (input_metrics, explain_and_score, compare_methods, M.perturbation_curve, text_perturbation_curve):
        assert inspect.signature(fn).parameters["steps"].default == steps, fn.__name__
    bundle = text_bundle()
    e = explain(bundle, TEXTS[:1], method="saliency")
    curve = text_perturbation_curve(bundle, TEXTS[:1], e)  # text curves take the same count, no cap
    assert curve.curves.shape == (1, steps + 1)


def test_every_method_answers_applies_with_a_reason_when_the_model_does_not_fit_its_inputs(tmp_path) -> None:
    """simple_cnn (1x28x28) saved as a shapes run (3x32x32): the checks that run the model once (Score-CAM's map
    size, HiResCAM's probe) must say why, not raise, or the pages that list methods break."""
    from inspect_runs import make_run

    from xaidash.explainers import list_methods
    from xaidash.models.runs.store import load_bundle

    bundle = load_bundle(make_run(tmp_path, "shapes", "simple_cnn", epochs=1), device="cpu")
    reasons = {m.id: m.applies(bundle) for m in list_methods("image")}
    assert "does not run on shapes's inputs" in str(reasons["scorecam"]), reasons
    assert "does not run on shapes's inputs" in str(reasons["hirescam"]), reasons
