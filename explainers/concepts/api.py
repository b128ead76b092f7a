"""`concept_report`: TCAV for one class of a run, for one or more concepts and layers, with the significance test.

The inputs whose sensitivities are measured are the class's examples in the run's test split (or a concept
spec given as `inputs_from`); the random counter-examples are `random_sets` + 1 seeded sets drawn from the run's
training split (or `random_from`): set 0 is the reference random concept scored against sets 1..R, as every
concept is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from xaidash.explainers.concepts.flags import accuracy_flag, circular_flag
from xaidash.explainers.concepts.layers import check_layers
from xaidash.explainers.concepts.randoms import random_pool, random_sets
from xaidash.explainers.concepts.significance import ALPHA, ConceptResult, judge
from xaidash.explainers.concepts.sources import MIN_EXAMPLES, ConceptExamples, load_concept, pick
from xaidash.explainers.concepts.tcav import Progress, tcav_scores
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

DEFAULT_RANDOM_SETS = 10
DEFAULT_EXAMPLES = 50
DEFAULT_INPUTS = 100
MAX_RANDOM_SETS = 50


@dataclass
class ConceptReport:
    run: str
    target: str
    layers: list[str]
    concepts: list[dict[str, Any]]  # name, spec, examples, notes
    random_sets: int
    examples: int
    inputs: int
    seed: int
    alpha: float
    results: list[ConceptResult]
    cavs_cached: int = 0
    cavs_trained: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "results"}
        out["results"] = [r.to_json() for r in self.results]
        out["tests"] = len(self.results)
        return out


def resolve_target(bundle: ModelBundle, target: str | int) -> int:
    classes = list(bundle.info.classes)
    text = str(target)
    if text in classes:
        return classes.index(text)
    if text.isdigit() and int(text) < len(classes):
        return int(text)
    raise ExplainError(f"Class {text!r} is not one of the model's classes: {', '.join(classes)}.")


def class_inputs(bundle: ModelBundle, target: int, count: int, seed: int, inputs_from: str | None) -> ConceptExamples:
    """The inputs TCAV measures the class's sensitivity on: its test-split examples, or `inputs_from`."""
    if inputs_from:
        return load_concept(inputs_from, bundle, count, seed)
    if reason := bundle.no_dataset_reason("TCAV on the class's test examples"):
        raise ExplainError(f"{reason} Or give the class's inputs with --inputs folder:PATH.")
    from xaidash.data.registry import get_source

    split = get_source(bundle.info.name).load("test")
    index = torch.nonzero(split.labels == target).flatten().tolist()
    if len(index) < MIN_EXAMPLES:
        raise ExplainError(
            f"The test split has {len(index)} examples of this class; TCAV needs at least {MIN_EXAMPLES}."
        )
    chosen = [index[i] for i in pick(len(index), count, seed)]
    return ConceptExamples(bundle.info.classes[target], "test split", bundle.adapter.items(split, chosen))


def _unique_names(found: list[ConceptExamples]) -> None:
    seen: dict[str, int] = {}
    for c in found:
        seen[c.name] = seen.get(c.name, 0) + 1
        if seen[c.name] > 1:
            c.name = f"{c.name} #{seen[c.name]}"


def _dataset_of(concept: ConceptExamples) -> str | None:
    """The data set the concept's examples come from, when its source knows (a folder's files: None)."""
    return concept.origin.dataset if concept.origin is not None else None


def concept_report(
    bundle: ModelBundle,
    concepts: list[str],
    target: str | int,
    layers: list[str] | None = None,
    random_count: int = DEFAULT_RANDOM_SETS,
    examples: int = DEFAULT_EXAMPLES,
    inputs: int = DEFAULT_INPUTS,
    seed: int = 0,
    random_from: str | None = None,
    inputs_from: str | None = None,
    alpha: float = ALPHA,
    progress: Progress | None = None,
) -> ConceptReport:
    """TCAV scores and the significance test for every (concept, layer); see the module docstring."""
    start = time.perf_counter()
    if not concepts:
        raise ExplainError("Give at least one concept (KIND:ARGUMENT, e.g. folder:PATH).")
    if not 2 <= random_count <= MAX_RANDOM_SETS:
        raise ExplainError(
            f"The number of random sets must be 2..{MAX_RANDOM_SETS} (the t-test needs several); got {random_count}."
        )
    if examples < MIN_EXAMPLES:
        raise ExplainError(f"TCAV needs at least {MIN_EXAMPLES} examples per concept; got {examples}.")
    if inputs < 1:
        raise ExplainError(f"Give at least 1 input of the class; got {inputs}.")
    chosen_layers = check_layers(bundle, layers)
    index = resolve_target(bundle, target)
    found = [load_concept(spec, bundle, examples, seed) for spec in concepts]
    _unique_names(found)
    size = min(len(c) for c in found)
    notes = [f"{c.name}: {n}" for c in found for n in c.notes]
    if size < examples:
        notes.append(f"each concept and random set uses {size} examples (the smallest concept's count)")
    found = [c.subset(pick(len(c), size, seed)) if len(c) > size else c for c in found]
    pool = random_pool(bundle, random_from, size * (random_count + 1) * 2, seed)
    randoms = random_sets(pool, random_count + 1, size, seed)
    targets = class_inputs(bundle, index, inputs, seed, inputs_from)
    scores = tcav_scores(bundle, found, randoms, targets.inputs, index, chosen_layers, seed, progress)
    tests = len(found) * len(chosen_layers)
    target_name = bundle.info.classes[index]
    results = [
        judge(
            c.name,
            layer,
            scores.concept_scores[layer][c.name],
            scores.random_scores[layer],
            tests,
            scores.accuracy[layer][c.name],
            alpha,
            flags=circular_flag(c, target_name) + accuracy_flag(scores.accuracy[layer][c.name]),
        )
        for layer in chosen_layers
        for c in found
    ]
    return ConceptReport(
        run=bundle.run_dir.name if bundle.run_dir else bundle.spec.name,
        target=target_name,
        layers=chosen_layers,
        concepts=[
            {"name": c.name, "spec": c.spec, "examples": len(c), "notes": c.notes, "dataset": _dataset_of(c)}
            for c in found
        ],
        random_sets=random_count,
        examples=size,
        inputs=len(targets),
        seed=seed,
        alpha=alpha,
        results=results,
        cavs_cached=scores.cached,
        cavs_trained=scores.trained,
        seconds=time.perf_counter() - start,
        notes=notes,
    )
