"""TCAV through captum.concept: activations, CAVs (cached), and the scores of every concept against every
random set, plus random-vs-random.

captum's `TCAV.interpret` computes the scores (the class logit's gradient at the layer, dotted with each CAV,
counted positive over the inputs: "sign_count"). Its CAVs are handed over in memory (`TCAV.cavs`), trained
here by `SeededLinearClassifier` on activations from captum's `LayerActivation` or loaded from the safetensors
cache (cache.py), so captum's own pickle store under `save_path` stays empty (a throwaway folder).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import torch
from captum.attr import LayerActivation
from captum.concept import TCAV, Concept
from captum.concept._core.cav import CAV
from captum.concept._utils.common import concepts_to_str
from torch.utils.data import DataLoader, TensorDataset

from xaidash.explainers.concepts import cache
from xaidash.explainers.concepts.classifier import SeededLinearClassifier
from xaidash.explainers.concepts.sources import ConceptExamples
from xaidash.explainers.guard import evaluating
from xaidash.models.bundle import ModelBundle

RANDOM_ID = 1000  # concept ids from here on are random sets; user concepts are 0, 1, ...
BATCH = 64
Progress = Callable[[float, str], None]


@dataclass
class Scores:
    """Per layer: each concept's scores against random sets 1..R, the random-vs-random scores (set 0 against
    1..R), and each concept's mean CAV accuracy; plus how many CAVs came from the cache."""

    concept_scores: dict[str, dict[str, list[float]]]  # layer -> concept name -> scores
    random_scores: dict[str, list[float]]  # layer -> scores
    accuracy: dict[str, dict[str, float]]  # layer -> concept name -> mean held-out accuracy
    cached: int
    trained: int


def prepare_groups(bundle: ModelBundle, groups: list[torch.Tensor | list[str]]) -> list[torch.Tensor]:
    """Every group as model input, prepared together and split again: texts then share one token width (a CAV over
    flattened activations only applies to inputs of the width it was learned on), images are normalised as always."""
    flat = [item for g in groups for item in g]
    prepared = bundle.prepare(bundle.adapter.batch(flat))
    out, start = [], 0
    for g in groups:
        out.append(prepared[start : start + len(g)])
        start += len(g)
    return out


def activations(bundle: ModelBundle, layers: list[str], x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Flattened layer outputs (N, F) per layer, computed in batches by captum's LayerActivation."""
    modules = [bundle.layer(name) for name in layers]
    probe = LayerActivation(bundle.model, modules)
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in layers}
    with torch.no_grad():
        for i in range(0, len(x), BATCH):
            outs = probe.attribute(x[i : i + BATCH])
            for name, out in zip(layers, outs, strict=True):
                parts[name].append(out.reshape(out.shape[0], -1).detach().float().cpu())
    return {name: torch.cat(p) for name, p in parts.items()}


def train_cav(a: torch.Tensor, b: torch.Tensor, ids: tuple[int, int], seed: int) -> cache.StoredCAV:
    x = torch.cat([a, b])
    y = torch.cat([torch.full((len(a),), ids[0]), torch.full((len(b),), ids[1])])
    classifier = SeededLinearClassifier(seed)
    stats = classifier.train_and_eval(DataLoader(TensorDataset(x, y), batch_size=len(x)))
    return cache.StoredCAV(classifier.weights(), classifier.classes(), float(stats["accs"]))


@dataclass(frozen=True)
class _Plan:
    """Every CAV a run needs: (positive concept, the index of its examples in `groups`, random set index) per pair,
    the prepared example groups and inputs, and the content hash of each group (the cache's keys)."""

    concepts: list[ConceptExamples]
    randoms: list[ConceptExamples]
    groups: list[torch.Tensor]
    inputs: torch.Tensor
    hashes: list[str]
    pairs: list[tuple[Concept, int, int]]
    random_concepts: list[Concept]


def _plan(
    bundle: ModelBundle,
    concepts: list[ConceptExamples],
    randoms: list[ConceptExamples],
    inputs: torch.Tensor | list[str],
) -> _Plan:
    prepared = prepare_groups(bundle, [*[c.inputs for c in concepts], *[r.inputs for r in randoms], inputs])
    ref = [Concept(i, f"concept{i}", None) for i in range(len(concepts))]
    rnd = [Concept(RANDOM_ID + i, f"random{i}", None) for i in range(len(randoms))]
    pairs = [(ref[k], k, i) for k in range(len(concepts)) for i in range(1, len(randoms))]
    pairs += [(rnd[0], len(concepts), i) for i in range(1, len(randoms))]
    hashes = [c.content_hash() for c in concepts] + [r.content_hash() for r in randoms]
    return _Plan(concepts, randoms, prepared[:-1], prepared[-1], hashes, pairs, rnd)


def _cavs(
    bundle: ModelBundle, plan: _Plan, layers: list[str], seed: int, say: Progress
) -> tuple[dict[tuple[str, int, int], cache.StoredCAV], int]:
    """Every CAV of the plan at every layer, from the cache or trained (and cached); (CAVs, how many were trained)."""
    fingerprint = cache.model_fingerprint(bundle)
    stored: dict[tuple[str, int, int], cache.StoredCAV] = {}
    missing: list[tuple[str, Concept, int, int, str]] = []
    n_concepts = len(plan.concepts)
    for layer in layers:
        for pos, g, i in plan.pairs:
            key = cache.cav_key(fingerprint, layer, plan.hashes[g], plan.hashes[n_concepts + i], str(seed), "sgd-0.01")
            cav = cache.load_cav(cache.cav_path(bundle.run_dir, layer, key))
            if cav is not None and cav.classes == sorted([pos.id, plan.random_concepts[i].id]):
                stored[(layer, g, i)] = cav
            else:
                missing.append((layer, pos, g, i, key))
    if missing:
        say(0.05, f"activations of {len(plan.groups)} example sets at {len(layers)} layer(s)")
        acts = [activations(bundle, layers, grp) for grp in plan.groups]
        for n, (layer, pos, g, i, key) in enumerate(missing):
            say(0.1 + 0.6 * n / len(missing), f"training CAV {n + 1} of {len(missing)} ({layer})")
            cav = train_cav(acts[g][layer], acts[n_concepts + i][layer], (pos.id, plan.random_concepts[i].id), seed)
            stored[(layer, g, i)] = cav
            spec = (plan.concepts + plan.randoms)[g].spec if g < n_concepts else "random_0"
            cache.save_cav(cache.cav_path(bundle.run_dir, layer, key), cav, {"layer": layer, "concept": spec})
    return stored, len(missing)


def _sign_shares(
    bundle: ModelBundle,
    plan: _Plan,
    layers: list[str],
    stored: dict[tuple[str, int, int], cache.StoredCAV],
    target: int,
    seed: int,
) -> dict[tuple[str, str], float]:
    """(experiment, layer) -> how many inputs have a positive directional derivative, from captum's TCAV.interpret
    over the inputs in batches, the CAVs handed over in memory."""
    experiments = [[pos, plan.random_concepts[i]] for pos, _, i in plan.pairs]
    totals: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="xaidash-tcav-") as scratch:
        tcav = TCAV(bundle.model, layers, classifier=SeededLinearClassifier(seed), save_path=scratch)
        for layer in layers:
            for (_, g, i), exp in zip(plan.pairs, experiments, strict=True):
                cav = stored[(layer, g, i)]
                stats = {"weights": cav.weights, "classes": cav.classes}
                tcav.cavs[concepts_to_str(exp)][layer] = CAV(exp, layer, stats, scratch)
        for start in range(0, len(plan.inputs), BATCH):
            chunk = plan.inputs[start : start + BATCH]
            with torch.enable_grad():
                result = tcav.interpret(chunk, experiments, target=target)
            for exp in experiments:
                key = concepts_to_str(exp)
                for layer in layers:
                    share = float(result[key][layer]["sign_count"][0]) * len(chunk)
                    totals[(key, layer)] = totals.get((key, layer), 0.0) + share
    return totals


def tcav_scores(
    bundle: ModelBundle,
    concepts: list[ConceptExamples],
    randoms: list[ConceptExamples],
    inputs: torch.Tensor | list[str],
    target: int,
    layers: list[str],
    seed: int = 0,
    progress: Progress | None = None,
) -> Scores:
    """TCAV scores of each concept (vs randoms[1:]) and of randoms[0] vs randoms[1:] at each layer, with the model in
    eval mode (each module's train/eval flag restored afterwards)."""
    say = progress or (lambda f, t: None)
    with evaluating(bundle.model):
        plan = _plan(bundle, concepts, randoms, inputs)
        stored, trained = _cavs(bundle, plan, layers, seed, say)
        say(0.75, f"scores over {len(inputs)} inputs of the class")
        totals = _sign_shares(bundle, plan, layers, stored, target, seed)
    n_inputs = max(1, len(plan.inputs))
    concept_scores: dict[str, dict[str, list[float]]] = {layer: {} for layer in layers}
    accuracy: dict[str, dict[str, float]] = {layer: {} for layer in layers}
    random_scores: dict[str, list[float]] = {layer: [] for layer in layers}
    for layer in layers:
        for pos, g, i in plan.pairs:
            score = totals[(concepts_to_str([pos, plan.random_concepts[i]]), layer)] / n_inputs
            if pos.id >= RANDOM_ID:
                random_scores[layer].append(score)
                continue
            concept_scores[layer].setdefault(concepts[g].name, []).append(score)
        for g, c in enumerate(concepts):
            accs = [stored[(layer, g, i)].accuracy for i in range(1, len(randoms))]
            accuracy[layer][c.name] = float(sum(accs) / len(accs))
    say(1.0, "done")
    return Scores(concept_scores, random_scores, accuracy, len(stored) - trained, trained)
