"""What the searches for a changed answer (explainers/robust/counterfactual.py) declare and report: each search's
facts (`SEARCHES`: what its result is called, the panel's choice, what it changes; `searches(modality)`: the ones a
modality's adapter allows), the step a search reports before each model run (`SearchStep`, for a progress bar),
and how much an image changed as a person would judge it (`visible_change`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.robust.attack import AttackResult

# How the change is looked for (`Counterfactual.search`).
PERTURBATION, PATCH, EDITS, COLUMNS = "perturbation", "patch", "word edits", "column changes"
PATCH_SIDES = (0.125, 0.1875, 0.25, 0.375, 0.5)  # a patch's side as a share of the image's shorter side, in order
# A change below this many grey levels on every pixel is taken as one a person does not see: L∞ budgets of 8/255
# are the literature's "imperceptible" adversarial examples; at 16/255 a change starts to show on a smooth image.
VISIBLE_LEVELS = 16


@dataclass(frozen=True)
class SearchFacts:
    """What a search's result is, declared once: its `name` (the panel, the CLI's summary and the JSON say it),
    the panel's `choice` label, and what it `changes`."""

    name: str
    choice: str
    changes: str


SEARCHES: dict[str, SearchFacts] = {
    PERTURBATION: SearchFacts(
        "minimal adversarial example",
        "Smallest ε: every pixel, a little (minimal adversarial example)",
        "every pixel by at most ε, the smallest ε found; usually too little for a person to see",
    ),
    PATCH: SearchFacts(
        "patch counterfactual",
        "Smallest patch: one region, as much as needed (a change you can see)",
        "one square patch by as much as needed, the smallest patch found, placed where the class's gradient is largest",
    ),
    EDITS: SearchFacts("counterfactual", "Fewest word edits", "the fewest words deleted or replaced (greedy)"),
    COLUMNS: SearchFacts(
        "counterfactual",
        "Fewest changed columns",
        "as few columns as it can, each to a value the training data holds, leaving the columns marked fixed alone "
        "(beam search)",
    ),
}


def searches(modality: str) -> list[str]:
    """The searches a modality's inputs allow, the default first: those its adapter declares (`counterfactuals`: a
    table's column changes), else a pixel budget and a patch where inputs can be perturbed within a pixel budget
    (`attackable`), word edits where inputs are read through a tokenizer; none otherwise."""
    adapter = adapter_of(modality)
    if adapter.counterfactuals:
        return list(adapter.counterfactuals)
    if adapter.attackable:
        return [PERTURBATION, PATCH]
    return [EDITS] if adapter.tokenized else []


@dataclass(frozen=True)
class SearchStep:
    """One model run of a search, reported before it starts: run `run` of at most `runs`, and its setting."""

    run: int
    runs: int
    what: str  # 'PGD run', 'word edit'
    detail: str = ""  # 'ε = 12.8/255', 'patch 8×8 px'

    @property
    def fraction(self) -> float:
        return min(1.0, (self.run - 1) / max(self.runs, 1))

    def text(self) -> str:
        return f"{self.what} {self.run} of at most {self.runs}" + (f" · {self.detail}" if self.detail else "")


Progress = Callable[[SearchStep], None]


def quiet(step: SearchStep) -> None:
    return None


@dataclass(frozen=True)
class VisibleChange:
    """How much an image changed, as a person would judge it: the largest change of a pixel value in grey levels
    (/255), the change's Euclidean length in pixel units, and the share of pixels changed by at least
    VISIBLE_LEVELS grey levels in some channel (`visible` when there is any)."""

    linf_levels: float
    l2: float
    changed: float

    @property
    def visible(self) -> bool:
        return self.changed > 0

    def text(self) -> str:
        size = f"L∞ {self.linf_levels:.1f}/255, L2 {self.l2:.3f} (pixel units)"
        if not self.visible:
            return f"{size}; no pixel changed by {VISIBLE_LEVELS}/255 or more: not a change a person sees"
        return f"{size}; {self.changed:.1%} of the pixels changed by {VISIBLE_LEVELS}/255 or more: visible"


def visible_change(result: AttackResult) -> VisibleChange:
    d = np.abs(result.perturbation) * 255.0
    changed = float((d.max(0) >= VISIBLE_LEVELS - 1e-3).mean())
    return VisibleChange(float(d.max()), result.l2, changed)
