"""What makes a TCAV result no finding even when the significance test passes, worded as plain sentences.

- Circular: the concept's examples are (mostly) the tested class's own examples. Its CAV then points from random
  images towards the class itself, and the class's inputs are of course sensitive to that direction: the test
  compares the class with random images and says nothing about a concept. Decided from the facts the concept
  source declares about its examples (`ConceptOrigin`: the data set and each example's class), never from a name.
- Near chance: the CAV's linear classifier barely tells the concept's examples from random ones on held-out
  examples, so its direction is mostly noise and a score along it is not about the concept.
"""

from __future__ import annotations

import math

from xaidash.explainers.concepts.sources import ConceptExamples

# The CAV classifier is a two-way linear classifier scored on a held-out third of the concept's and a random set's
# examples (classifier.TEST_SPLIT): chance is 0.5, and with the default 50 + 50 examples (33 held out) one
# standard error of an accuracy near chance is about 0.09, so below 0.7 the separation is within about two standard
# errors of a coin toss. Kim et al. (2018) likewise drop CAVs whose accuracy is low.
MIN_CAV_ACCURACY = 0.7
# A concept at least half made of the tested class's examples mostly measures the class itself.
CIRCULAR_SHARE = 0.5


def flag_kind(flag: str) -> str:
    """A flag's kind in a word or two ("circular", "near chance"): every flag sentence starts with it and a colon."""
    return flag.partition(":")[0]


def circular_flag(concept: ConceptExamples, target: str) -> tuple[str, ...]:
    """One sentence when at least CIRCULAR_SHARE of the concept's examples are labelled `target` (the tested class)
    in the data set its source read them from; () when not, or when the source does not know their classes."""
    origin = concept.origin
    if origin is None or not origin.classes:
        return ()
    same = sum(1 for c in origin.classes if c.casefold() == target.casefold())
    share = same / len(origin.classes)
    if share < CIRCULAR_SHARE:
        return ()
    amount = "all" if same == len(origin.classes) else f"{same} of {len(origin.classes)}"
    return (
        f"circular: {amount} of its examples are class “{target}” of {origin.dataset}, the class being tested, so "
        "the test compares the class with random examples and says nothing about a concept; pick examples that "
        "show a property (a colour, a texture, a part), not the class.",
    )


def accuracy_flag(accuracy: float) -> tuple[str, ...]:
    """One sentence when the CAV's held-out accuracy is below MIN_CAV_ACCURACY (or was not measured)."""
    if math.isfinite(accuracy) and accuracy >= MIN_CAV_ACCURACY:
        return ()
    measured = f"{accuracy:.2f}" if math.isfinite(accuracy) else "not measurable (too few held-out examples)"
    return (
        f"near chance: the CAV tells the concept's examples from random ones with a held-out accuracy of "
        f"{measured} (below {MIN_CAV_ACCURACY}; 0.5 is chance), so its direction is not about the concept; "
        "use more or clearer examples, or another layer.",
    )
