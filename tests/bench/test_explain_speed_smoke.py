"""bench/explain_speed.py: the pass counts every registered image method declares on its spec (and the
benchmark reports) match the passes it really makes, and a tiny run prints the table, the library
comparisons and a JSON record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from bench_scripts import bench_module
from image_bundles import IMAGE_MODELS, fresh_bundle

from xaidash.explainers.methods._path import refinement_passes
from xaidash.explainers.registry import STEPS_USED, MethodSpec, get_method, list_methods

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    with bench_module("explain_speed") as module:
        yield module


IMAGE_METHODS = [m.id for m in list_methods("image")]
# Small settings by parameter name, so a new method with such a parameter is cheap here too.
CHEAP = {"samples": 12, "steps": 4, "background_size": 3}


def cheap_params(spec: MethodSpec) -> dict[str, int]:
    return {p.name: max(CHEAP[p.name], int(p.min or 0)) for p in spec.params if p.name in CHEAP}


def bundle_for(bench, spec: MethodSpec):
    """The benchmark's resnet_small, or the first small zoo model the method applies to."""
    bundle = bench.make_bundle("resnet_small", torch.device("cpu"))
    if spec.supports(bundle):
        return bundle
    for name in IMAGE_MODELS:
        bundle = fresh_bundle(name)
        if spec.supports(bundle):
            return bundle
    pytest.fail(f"{spec.id} applies to no image model of the zoo")


@pytest.mark.parametrize("method", IMAGE_METHODS)
def test_pass_counts_match_the_model_calls(bench, method):
    from xaidash.explainers import explain

    spec = get_method(method, "image")
    params = cheap_params(spec)
    bundle = bundle_for(bench, spec)
    pool = torch.rand(5, *bundle.info.input_shape, generator=torch.Generator().manual_seed(0))
    raw, background = pool[:2], bundle.prepare(pool[2:])
    targets = torch.tensor([0, 0])  # one target: the shap methods then build one explainer
    seen = {"grad": 0, "nograd": 0}

    def count(module, inputs):
        first = inputs[0]
        while isinstance(first, (tuple, list)):  # captum passes some inputs as a tuple of tensors
            first = first[0]
        seen["grad" if torch.is_grad_enabled() else "nograd"] += first.shape[0]

    # On the first layer, not the model: captum's DeepLift joins inputs and baselines in a hook of its own.
    handle = next(bundle.model.children()).register_forward_pre_hook(count)
    try:
        e = explain(bundle, raw, targets, method, batch_size=64, background=background, **params)
    finally:
        handle.remove()
    fwd_bwd, fwd = bench.model_passes(bundle, method, params, 2, len(background))
    # A path method integrates a path again where its completeness check failed: those passes come on top.
    for used in e.diagnostics.get(STEPS_USED, []):
        extra_fb, extra_f = refinement_passes(int(params["steps"]), int(used))
        fwd_bwd, fwd = fwd_bwd + extra_fb, fwd + extra_f
    # Every row the model saw is counted; rows run with autograd on may be forward-only (captum
    # computes some outputs with grad enabled), so only the total and an upper bound are exact.
    assert seen["grad"] + seen["nograd"] == fwd_bwd + fwd
    assert seen["grad"] >= fwd_bwd


def test_tiny_run_prints_table_and_comparisons(bench, tmp_path, capsys):
    out = tmp_path / "speed.json"
    report = bench.main(
        [
            "--device",
            "cpu",
            "--models",
            "resnet_small",
            "--methods",
            "saliency,ig,lime",
            "--ig-steps",
            "4",
            "--lime-samples",
            "20",
            "--inputs",
            "1",
            "--repeats",
            "1",
            "--json",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert "device cpu" in text and "torch " in text and "T" in report.header["timestamp"]
    assert [(r.model, r.method) for r in report.methods] == [("resnet_small", m) for m in ("saliency", "ig", "lime")]
    for r in report.methods:
        assert r.per_input_s > 0 and r.passes_alone_s > 0
        assert math.isclose(r.ratio, r.per_input_s / r.passes_alone_s, rel_tol=1e-9)
        assert f"{r.ratio:.1f}x" in text
    by_method = {r.method: r for r in report.methods}
    assert by_method["ig"].passes == "4 f+b, 2 f" and by_method["ig"].setting == "steps=4"
    assert by_method["lime"].passes == "20 f"
    names = [c.name for c in report.comparisons]
    assert names == ["LIME 20 samples", "IG 4 steps"]
    for c in report.comparisons:
        assert c.library_s > 0 and math.isclose(c.speedup, c.library_s / c.xaidash_s, rel_tol=1e-9)
        assert c.name in text
    assert report.comparisons[0].library_call.startswith("lime explain_instance defaults")
    assert "resnet_small: all 3 methods for one input: " in text
    assert "within 3x of its passes alone" in text
    assert json.loads(out.read_text())["methods"][0]["method"] == "saliency"


def test_unknown_method_is_refused(bench):
    with pytest.raises(SystemExit, match="Unknown methods: nope"):
        bench.main(["--device", "cpu", "--methods", "nope"])
