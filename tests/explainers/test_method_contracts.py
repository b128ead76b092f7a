"""What every explanation method promises, checked on every zoo model it applies to.

Pairs come from the registries (`list_methods()` x `list_models()`), never from a hand-written
list, so a new method or model is covered the day it registers. Per pair: the map has the right
shape, is finite and (for unsigned methods) non-negative; the given targets are the explained ones
and, where the map depends on the target, another target gives another map; the model comes back
with no hooks left and its train/eval flags, requires_grad flags, values and the grad mode as the
caller left them; and an input explained alone gets the same map as in a batch of three.
Small sample and step counts keep this fast, except where the defaults themselves are checked.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import torch
from image_bundles import fresh_bundle
from model_state import model_state
from table_bundles import split, untrained_bundle

from xaidash.data.modalities.graph import GRAPH, GraphInput, explained_subgraph
from xaidash.data.registry import get_info, list_datasets, load_split
from xaidash.data.tokenizer import WordVocab, split_words
from xaidash.explainers import explain, list_methods
from xaidash.explainers.explanation import Explanation
from xaidash.explainers.registry import GROUPED_UNITS, MethodSpec, get_method
from xaidash.models import ModelBundle, build_model, get_spec, list_models

TEXTS = ["the plot was not bad , honestly", "dull !", "an unknownword and great acting here"]
# Small settings by parameter name, so a new method with such a parameter is cheap here too.
CHEAP = {"samples": 16, "steps": 8, "background_size": 4, "epochs": 2, "train_inputs": 4}
TARGETS = [0, 1, 0]


PAIRS = [
    pytest.param(spec.id, modality, model.name, id=f"{spec.id}-{model.name}")
    for spec in list_methods()
    for modality in spec.modalities
    for model in list_models()
    if model.modality == modality
]


@functools.cache
def bundle_of(name: str) -> ModelBundle:
    """A small untrained zoo model (pretrained ones with their own weights), in eval mode on the CPU."""
    spec = get_spec(name)
    if spec.modality == "image":
        return fresh_bundle(name)
    if spec.modality == "table":
        return untrained_bundle()
    if spec.modality == "graph":  # BA-Shapes' nodes (generated offline)
        torch.manual_seed(0)
        graphs = get_info("ba_shapes")
        return ModelBundle(build_model(name, graphs).eval(), spec, graphs, torch.device("cpu"))
    if spec.modality == "series":  # the first built-in series set it fits (a classifier's or a forecast's)
        series = next(i for i in list_datasets() if i.modality == "series" and i.builtin and spec.fits(i) is None)
        torch.manual_seed(0)
        return ModelBundle(build_model(name, series).eval(), spec, series, torch.device("cpu"))
    info = get_info("cues")
    if spec.tokenizer is not None:
        pytest.importorskip("transformers")
        try:
            tokenizer = spec.tokenizer()
            model = build_model(name, info)
        except Exception as err:  # noqa: BLE001 - a pretrained model that cannot load offline is skipped, not failed
            pytest.skip(f"{name} cannot be loaded here: {err}")
    else:
        tokenizer = WordVocab.build(TEXTS)
        torch.manual_seed(0)
        model = build_model(name, info, vocab_size=len(tokenizer), pad_id=tokenizer.pad_id)
    return ModelBundle(model.eval(), spec, info, torch.device("cpu"), tokenizer=tokenizer)


def inputs_for(bundle: ModelBundle) -> torch.Tensor | list[str] | list[GraphInput]:
    if bundle.modality == "graph":  # three test nodes of BA-Shapes
        return GRAPH.items(load_split("ba_shapes", "test"), range(3))
    if bundle.modality == "text":
        return list(TEXTS)
    if bundle.modality == "table":
        return split().rows[:3].clone()
    return torch.rand(3, *bundle.info.input_shape, generator=torch.Generator().manual_seed(1))


def cheap_params(spec: MethodSpec) -> dict[str, int]:
    return {p.name: max(CHEAP[p.name], int(p.min or 0)) for p in spec.params if p.name in CHEAP}


def applicable(method: str, modality: str, model: str) -> tuple[MethodSpec, ModelBundle]:
    spec = get_method(method, modality)
    bundle = bundle_of(model)
    reason = spec.applies(bundle)
    if reason:
        pytest.skip(f"does not apply: {reason}")
    return spec, bundle


def values_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@functools.cache
def batch_run(method: str, modality: str, model: str) -> tuple[Explanation, dict[str, Any], dict[str, Any], bool]:
    """Three inputs explained at once with the model handed over in a mixed train/eval state and one
    frozen parameter: (explanation, state before, state after, whether every value was kept)."""
    spec, bundle = applicable(method, modality, model)
    net = bundle.model
    params = list(net.parameters())
    net.train()
    next(net.children()).eval()  # mixed flags: each module's own must come back
    params[0].requires_grad_(False)
    try:
        before, values = model_state(net), values_of(net)
        e = explain(bundle, inputs_for(bundle), TARGETS, method, batch_size=64, **cheap_params(spec))
        after, now = model_state(net), values_of(net)
        kept = values.keys() == now.keys() and all(torch.equal(v, now[k]) for k, v in values.items())
    finally:
        net.eval()
        params[0].requires_grad_(True)
    return e, before, after, kept


@functools.cache
def single_run(method: str, modality: str, model: str, i: int, target: int) -> Explanation:
    spec, bundle = applicable(method, modality, model)
    x = inputs_for(bundle)
    one = x[i : i + 1]
    return explain(bundle, one, [target], method, batch_size=64, **cheap_params(spec))


@pytest.mark.parametrize("method,modality,model", PAIRS)
def test_shape_values_and_targets(method: str, modality: str, model: str) -> None:
    spec, bundle = applicable(method, modality, model)
    e, _, _, _ = batch_run(method, modality, model)
    assert e.method == spec.id and e.modality == modality and len(e) == 3
    assert list(e.targets) == TARGETS
    for i in range(3):
        a = e.item(i)
        if modality == "image":
            assert a.shape == tuple(bundle.info.input_shape[1:])
        elif modality == "table":
            assert e.tokens is not None and len(e.tokens[i]) == len(bundle.info.columns)
            assert a.shape == (len(bundle.info.columns),)
        elif modality == "graph":  # one value per node, then per edge, of the node's neighbourhood, each labelled
            nodes, edges = explained_subgraph(inputs_for(bundle)[i], bundle.info.graph.hops)
            assert a.shape == (len(nodes) + len(edges),)
            assert e.tokens is not None and len(e.tokens[i]) == a.size
        elif modality == "series":  # one value per time step, each step labelled with its values
            assert a.shape == (bundle.info.input_shape[1],)
            assert e.tokens is not None and len(e.tokens[i]) == bundle.info.input_shape[1]
        else:
            assert e.tokens is not None
            assert e.tokens[i] == split_words(TEXTS[i])
            assert a.shape == (len(e.tokens[i]),)
        assert np.isfinite(a).all()
        if not spec.signed:
            assert (a >= 0).all(), f"{spec.id} is declared unsigned but gave negative values"
    assert all(len(v) == 3 and np.isfinite(v).all() for v in e.diagnostics.values())
    if spec.completeness is not None and spec.completeness.unit in GROUPED_UNITS:
        assert e.segments is not None and e.segments.shape == (3, *bundle.info.input_shape[1:])


@pytest.mark.parametrize("method,modality,model", PAIRS)
def test_model_comes_back_as_it_was_given(method: str, modality: str, model: str) -> None:
    _, before, after, kept = batch_run(method, modality, model)
    assert after["hooks"] == before["hooks"] and after["global_hooks"] == before["global_hooks"], "hooks left behind"
    assert after["attributes"] == before["attributes"], "attributes added to or removed from modules"
    assert after["training"] == before["training"], "train/eval flags not restored"
    assert after["requires_grad"] == before["requires_grad"], "requires_grad changed"
    assert after["grad_enabled"] == before["grad_enabled"], "grad mode changed"
    assert kept, "parameter or buffer values changed"


@pytest.mark.parametrize("method,modality,model", PAIRS)
def test_an_input_alone_and_in_a_batch_of_three_agree(method: str, modality: str, model: str) -> None:
    batch, _, _, _ = batch_run(method, modality, model)
    scale = max(batch.max_abs(), 1e-6)
    for i in range(3):
        alone = single_run(method, modality, model, i, TARGETS[i])
        np.testing.assert_allclose(
            alone.item(0), batch.item(i), rtol=1e-4, atol=1e-4 * scale, err_msg=f"input {i} alone vs in the batch"
        )
        if modality != "image":
            assert alone.tokens == [batch.tokens[i]]


@pytest.mark.parametrize("method,modality,model", PAIRS)
def test_the_target_is_the_one_explained(method: str, modality: str, model: str) -> None:
    spec, _ = applicable(method, modality, model)
    first = single_run(method, modality, model, 0, 0)
    other = single_run(method, modality, model, 0, 1)
    assert list(first.targets) == [0] and list(other.targets) == [1]
    if spec.target_dependent:
        assert not np.allclose(first.item(0), other.item(0)), f"{spec.id} gave the same map for two targets"
    else:
        np.testing.assert_allclose(first.item(0), other.item(0))


def _cheapest_model(spec: MethodSpec, modality: str) -> ModelBundle:
    """The first zoo model the method applies to, models trained here before pretrained ones."""
    for model in sorted(list_models(), key=lambda m: m.pretrained):
        if model.modality != modality:
            continue
        bundle = bundle_of(model.name)
        if spec.supports(bundle):
            return bundle
    pytest.fail(f"{spec.id} applies to no {modality} model of the zoo")


@pytest.mark.parametrize(
    "method,modality",
    [pytest.param(s.id, m, id=f"{s.id}-{m}") for s in list_methods() for m in s.modalities],
)
def test_defaults_resolve_and_run(method: str, modality: str) -> None:
    spec = get_method(method, modality)
    bundle = _cheapest_model(spec, modality)
    resolved = spec.resolve_for(bundle, {})
    assert list(resolved) == [p.name for p in spec.params]
    for p in spec.params:
        expected = (p.default or bundle.spec.last_conv) if p.kind == "layer" else p.default
        assert resolved[p.name] == expected, p.name
    x = inputs_for(bundle)
    e = explain(bundle, x[:1], method=method)
    assert e.params == resolved
    assert np.isfinite(e.item(0)).all() and e.item(0).size > 0


@pytest.mark.parametrize(
    "method,modality",
    [pytest.param(s.id, m, id=f"{s.id}-{m}") for s in list_methods() for m in s.modalities],
)
def test_every_method_applies_to_some_zoo_model(method: str, modality: str) -> None:
    _cheapest_model(get_method(method, modality), modality)


BASELINE_METHODS = [
    pytest.param(s.id, choice, id=f"{s.id}-{choice}")
    for s in list_methods("image")
    for p in s.params
    if p.name == "baseline"
    for choice in p.choices
]


@pytest.mark.parametrize("method,baseline", BASELINE_METHODS)
def test_every_baseline_is_batch_invariant(method: str, baseline: str) -> None:
    """The seeded 'noise' baseline and the blurred or mean ones: an input's map does not depend on the others."""
    spec = get_method(method, "image")
    bundle = _cheapest_model(spec, "image")
    x = inputs_for(bundle)
    params = {**cheap_params(spec), "baseline": baseline}
    batch = explain(bundle, x, TARGETS, method, seed=3, **params)
    for i in range(3):
        alone = explain(bundle, x[i : i + 1], [TARGETS[i]], method, seed=3, **params)
        np.testing.assert_allclose(alone.item(0), batch.item(i), rtol=1e-4, atol=1e-4 * max(batch.max_abs(), 1e-6))
