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
    """Every group as model input. Texts are encoded together so every group has the same token width: a CAV
    over flattened activations only applies to inputs of the width it was learned on."""
    if bundle.modality != "text":
        return [bundle.prepare(g) for g in groups]
    flat = [t for g in groups for t in g]
    ids = bundle.prepare(flat)
    out, start = [], 0
    for g in groups:
        out.append(ids[start : start + len(g)])
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
    """TCAV scores of each concept (vs randoms[1:]) and of randoms[0] vs randoms[1:] at each layer."""
    say = progress or (lambda f, t: None)
    model = bundle.model.eval()
    prepared = prepare_groups(bundle, [*[c.inputs for c in concepts], *[r.inputs for r in randoms], inputs])
    x_concepts, x_randoms, x_inputs = prepared[: len(concepts)], prepared[len(concepts) : -1], prepared[-1]
    ref = [Concept(i, f"concept{i}", None) for i in range(len(concepts))]
    rnd = [Concept(RANDOM_ID + i, f"random{i}", None) for i in range(len(randoms))]
    # (positive concept, its examples' index in `groups`, random set index) for every CAV needed
    groups = [*x_concepts, *x_randoms]
    hashes = [c.content_hash() for c in concepts] + [r.content_hash() for r in randoms]
    pairs = [(ref[k], k, i) for k in range(len(concepts)) for i in range(1, len(randoms))]
    pairs += [(rnd[0], len(concepts), i) for i in range(1, len(randoms))]
    fingerprint = cache.model_fingerprint(bundle)

    stored: dict[tuple[str, int, int], cache.StoredCAV] = {}
    missing: list[tuple[str, Concept, int, int, str]] = []
    for layer in layers:
        for pos, g, i in pairs:
            key = cache.cav_key(fingerprint, layer, hashes[g], hashes[len(concepts) + i], str(seed), "sgd-0.01")
            cav = cache.load_cav(cache.cav_path(bundle.run_dir, layer, key))
            if cav is not None and cav.classes == sorted([pos.id, rnd[i].id]):
                stored[(layer, g, i)] = cav
            else:
                missing.append((layer, pos, g, i, key))
    cached = len(stored)
    if missing:
        say(0.05, f"activations of {len(groups)} example sets at {len(layers)} layer(s)")
        acts = [activations(bundle, layers, grp) for grp in groups]
        for n, (layer, pos, g, i, key) in enumerate(missing):
            say(0.1 + 0.6 * n / len(missing), f"training CAV {n + 1} of {len(missing)} ({layer})")
            a, b = acts[g][layer], acts[len(concepts) + i][layer]
            cav = train_cav(a, b, (pos.id, rnd[i].id), seed)
            stored[(layer, g, i)] = cav
            cache.save_cav(
                cache.cav_path(bundle.run_dir, layer, key),
                cav,
                {"layer": layer, "concept": (concepts + randoms)[g].spec if g < len(concepts) else "random_0"},
            )

    say(0.75, f"scores over {len(inputs)} inputs of the class")
    experiments = [[pos, rnd[i]] for pos, _, i in pairs]
    with tempfile.TemporaryDirectory(prefix="xaidash-tcav-") as scratch:
        tcav = TCAV(model, layers, classifier=SeededLinearClassifier(seed), save_path=scratch)
        for layer in layers:
            for (_, g, i), exp in zip(pairs, experiments, strict=True):
                cav = stored[(layer, g, i)]
                stats = {"weights": cav.weights, "classes": cav.classes}
                tcav.cavs[concepts_to_str(exp)][layer] = CAV(exp, layer, stats, scratch)
        totals: dict[tuple[str, str], float] = {}
        for start in range(0, len(x_inputs), BATCH):
            chunk = x_inputs[start : start + BATCH]
            with torch.enable_grad():
                result = tcav.interpret(chunk, experiments, target=target)
            for exp in experiments:
                key = concepts_to_str(exp)
                for layer in layers:
                    share = float(result[key][layer]["sign_count"][0]) * len(chunk)
                    totals[(key, layer)] = totals.get((key, layer), 0.0) + share

    n_inputs = max(1, len(x_inputs))
    concept_scores: dict[str, dict[str, list[float]]] = {layer: {} for layer in layers}
    accuracy: dict[str, dict[str, float]] = {layer: {} for layer in layers}
    random_scores: dict[str, list[float]] = {layer: [] for layer in layers}
    for layer in layers:
        for (pos, g, _), exp in zip(pairs, experiments, strict=True):
            score = totals[(concepts_to_str(exp), layer)] / n_inputs
            if pos.id >= RANDOM_ID:
                random_scores[layer].append(score)
                continue
            name = concepts[g].name
            concept_scores[layer].setdefault(name, []).append(score)
        for g, c in enumerate(concepts):
            accs = [stored[(layer, g, i)].accuracy for i in range(1, len(randoms))]
            accuracy[layer][c.name] = float(sum(accs) / len(accs))
    say(1.0, "done")
    return Scores(concept_scores, random_scores, accuracy, cached, len(missing))
