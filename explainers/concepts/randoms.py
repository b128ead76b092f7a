"""Random counter-examples: several seeded random sets drawn from the run's data set (or a pool the user gives).

TCAV learns each CAV against one random set and repeats that over several sets: a concept's score is only a
finding when it holds across them and differs from what random sets score against each other.
"""

from __future__ import annotations

import torch

from xaidash.explainers.concepts.sources import MIN_EXAMPLES, ConceptExamples, load_concept, pick
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

POOL_LIMIT = 100_000  # large enough for any registered data set's train split


def random_pool(bundle: ModelBundle, pool: str | None, need: int, seed: int) -> ConceptExamples:
    """The examples random sets are drawn from: the run's training split, or the concept spec `pool`."""
    if pool:
        return load_concept(pool, bundle, POOL_LIMIT, seed)
    if not bundle.has_dataset:
        raise ExplainError(
            f"{bundle.spec.name} is an imported model with no data set linked, so there is nothing to draw random "
            "counter-examples from: give a folder of varied images the model might see (--random folder:PATH, "
            f"at least {need} images), or import the model again with --dataset NAME."
        )
    from xaidash.data.registry import get_source

    split = get_source(bundle.info.name).load("train")
    if len(split) == 0:
        raise ExplainError(
            f"The train split of {bundle.info.name} is empty: there is nothing to draw random sets from."
        )
    chosen = pick(len(split), min(len(split), need), seed)  # only what the sets need is read (image folders)
    return ConceptExamples("random", f"dataset:{bundle.info.name}", bundle.adapter.items(split, chosen))


def random_sets(pool: ConceptExamples, count: int, size: int, seed: int) -> list[ConceptExamples]:
    """`count` random sets of `size` examples from `pool`, each drawn with its own seed (seed + i)."""
    if size < MIN_EXAMPLES:
        raise ExplainError(f"Random sets of {size} examples are too small; TCAV needs at least {MIN_EXAMPLES}.")
    if len(pool) < size:
        raise ExplainError(
            f"The random pool ({pool.spec}) has {len(pool)} examples; each random set needs {size}: give fewer "
            "examples or a larger pool."
        )
    out = []
    for i in range(count):
        gen = torch.Generator().manual_seed(seed * 1_000_003 + i)
        index = torch.randperm(len(pool), generator=gen)[:size].sort().values.tolist()
        out.append(pool.subset(index, name=f"random_{i}"))
    return out
