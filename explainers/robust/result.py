"""What a search for a changed answer returns (explainers/robust/counterfactual.py): a `Counterfactual`, named by
its search's declared facts (`searches.SEARCHES`), with what changed: a perturbation or patch of an image, word
`Edit`s of a text, or `ColumnChange`s of a table row; its one-line `summary` and its JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xaidash.explainers.robust.attack import AttackResult
from xaidash.explainers.robust.searches import (
    COLUMNS,
    EDITS,
    PATCH,
    PERTURBATION,
    SEARCHES,
    VISIBLE_LEVELS,
    VisibleChange,
    visible_change,
)


@dataclass(frozen=True)
class ColumnChange:
    """One column of a table row changed: its name, old and new raw values, and both as people read them."""

    column: str
    old: float
    new: float
    old_text: str
    new_text: str

    def text(self) -> str:
        return f"{self.column}: {self.old_text} → {self.new_text}"


@dataclass(frozen=True)
class Edit:
    """One word edit: the word at `position` (in the words the model reads) deleted (`new` None) or replaced."""

    position: int
    old: str
    new: str | None

    def text(self) -> str:
        return f"delete “{self.old}”" if self.new is None else f"“{self.old}” → “{self.new}”"


@dataclass(frozen=True)
class Counterfactual:
    """The search's outcome. `found`: the model predicts `target` after the change. Images: `result` is the attack
    at the smallest budget found (`epsilon`), `probes` the attacks run. Text: `edits` in the order made, `words`
    the words after them (None where deleted), `text` the edited text."""

    modality: str
    search: str  # how it was looked for: PERTURBATION (a pixel budget) or EDITS (word edits)
    target: int
    classes: tuple[str, ...]
    found: bool
    budget: float  # PERTURBATION: the largest epsilon allowed; PATCH: the largest patch side (px); text: most edits
    probs_before: np.ndarray = field(repr=False)
    probs_after: np.ndarray | None = field(default=None, repr=False)
    seconds: float = 0.0
    result: AttackResult | None = None
    epsilon: float | None = None
    probes: int = 0
    attack: str = ""
    original_words: tuple[str, ...] = ()
    words: tuple[str | None, ...] = ()
    edits: tuple[Edit, ...] = ()
    text: str | None = None
    note: str = ""
    patch: tuple[int, int, int, int] | None = None  # PATCH: (top, left, height, width) of the patch changed
    changes: tuple[ColumnChange, ...] = ()  # COLUMNS: the columns changed, in column order
    row: np.ndarray | None = field(default=None, repr=False)  # COLUMNS: the raw row after the changes
    fixed: tuple[str, ...] = ()  # COLUMNS: the columns the user kept as they were

    @property
    def name(self) -> str:
        """What the result is: 'minimal adversarial example', 'patch counterfactual', 'counterfactual'."""
        return SEARCHES[self.search].name

    @property
    def change(self) -> VisibleChange | None:
        """Images: how much the image changed, as a person would judge it (None for text or when none was found)."""
        return None if self.result is None else visible_change(self.result)

    @property
    def target_name(self) -> str:
        return self.classes[self.target]

    @property
    def pred_before(self) -> int:
        return int(np.argmax(self.probs_before))

    def budget_text(self) -> str:
        if self.search == PERTURBATION:
            return f"ε ≤ {self.budget:.4f} ({self.budget * 255:.1f}/255)"
        if self.search == PATCH:
            return f"a patch of {int(self.budget)}×{int(self.budget)} px"
        if self.search == COLUMNS:
            return f"{int(self.budget)} changed column{'s' if self.budget != 1 else ''}"
        return f"{int(self.budget)} word edit{'s' if self.budget != 1 else ''}"

    def summary(self) -> str:
        """One line naming what was found (`name`) and its cost, or that none was found within the budget."""
        before = self.classes[self.pred_before]
        if not self.found:
            return (
                f"None found within {self.budget_text()}: no {self.name} makes the model predict "
                f"{self.target_name} (now {before})."
            )
        p = float(self.probs_after[self.target]) if self.probs_after is not None else float("nan")
        name = self.name[0].upper() + self.name[1:]
        change = self.change
        if self.search == PERTURBATION and self.result is not None and change is not None:
            eps = float(self.epsilon or 0.0)
            return (
                f"{name}: {before} → {self.target_name} ({p:.1%}) at ε = {eps:.4f} ({eps * 255:.1f}/255): "
                f"{change.text()}; {self.probes} {self.attack} run{'s' if self.probes != 1 else ''}, {self.seconds:.2f} s"
            )
        if self.search == PATCH and self.patch is not None and change is not None:
            top, left, h, w = self.patch
            return (
                f"{name}: {before} → {self.target_name} ({p:.1%}) by changing the {h}×{w} px patch at "
                f"row {top}, column {left}: {change.text()}; {self.probes} {self.attack} run{'s' if self.probes != 1 else ''}, {self.seconds:.2f} s"
            )
        if self.search == COLUMNS:
            n = len(self.changes)
            return (
                f"{name}: {before} → {self.target_name} ({p:.1%}) by changing {n} column{'s' if n != 1 else ''}: "
                + "; ".join(c.text() for c in self.changes)
                + f" ({self.seconds:.2f} s)"
            )
        n = len(self.edits)
        return (
            f"{name}: {before} → {self.target_name} ({p:.1%}) with {n} word edit{'s' if n != 1 else ''}: "
            + "; ".join(e.text() for e in self.edits)
            + f" ({self.seconds:.2f} s)"
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "modality": self.modality,
            "target": {"class": self.target, "name": self.target_name},
            "found": self.found,
            "budget": self.budget,
            "summary": self.summary(),
            "probabilities_before": [float(v) for v in self.probs_before],
            "probabilities_after": None if self.probs_after is None else [float(v) for v in self.probs_after],
            "seconds": self.seconds,
            "note": self.note,
            "search": self.search,
            "name": self.name,
        }
        if self.search == COLUMNS:
            out.update(
                changes=[
                    {"column": c.column, "old": c.old, "new": c.new, "old_text": c.old_text, "new_text": c.new_text}
                    for c in self.changes
                ],
                change_count=len(self.changes),
                row=None if self.row is None else [float(v) for v in self.row],
                fixed=list(self.fixed),
            )
        elif self.search != EDITS:
            change = self.change
            out.update(
                attack=self.attack,
                probes=self.probes,
                epsilon=self.epsilon,
                epsilon_255=None if self.epsilon is None else self.epsilon * 255,
                linf=None if self.result is None else self.result.linf,
                l2=None if self.result is None else self.result.l2,
                linf_255=None if change is None else change.linf_levels,
                changed_share=None if change is None else change.changed,
                visible=None if change is None else change.visible,
                visible_levels=VISIBLE_LEVELS,
                patch=None
                if self.patch is None
                else dict(zip(("top", "left", "height", "width"), self.patch, strict=True)),
            )
        else:
            out.update(
                edits=[{"position": e.position, "old": e.old, "new": e.new} for e in self.edits],
                edit_count=len(self.edits),
                text=self.text,
            )
        return out
