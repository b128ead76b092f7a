"""Counterfactuals: the smallest change that makes the model answer a class the user picks.

Images: a targeted attack (PGD by default, any registered attack that can aim) at the whole budget first; when it
does not reach the class, none is found within the budget; when it does, a bisection over epsilon finds the
smallest budget at which it still does. Attacks are not monotonic in epsilon, so this is the smallest found, not a
proven minimum.

Text: the fewest word deletions or substitutions from the model's vocabulary, by greedy search: each step scores
every single edit of the current text (each read word deleted, or replaced by one of the vocabulary words that
most favour the class) in shared batched passes (`batching.run_halving`, `rows_per_pass`) and keeps the edit that
raises the class's margin most, until the model predicts the class or `max_edits` is spent. No library searches
word edits against a PyTorch classifier with a given vocabulary, so this is written here."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from xaidash.data.tokenizer import split_words
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.guard import evaluating
from xaidash.explainers.modalities import adapter_of
from xaidash.explainers.params import ExplainError, check_text_length
from xaidash.explainers.robust.attack import AttackResult, attack
from xaidash.explainers.robust.registry import check_epsilon, get_attack, list_attacks
from xaidash.models.bundle import ModelBundle

DEFAULT_BUDGET = 0.1  # pixel units: 25.5/255
DEFAULT_STEPS = 20
TOLERANCE = 0.5 / 255  # the bisection stops when the bracket is narrower than half a grey level
MAX_PROBES = 12
DEFAULT_EDITS = 5
DEFAULT_CANDIDATES = 20  # vocabulary words tried at each position
VOCABULARY_LIMIT = 5000  # the most frequent words of the vocabulary scored as candidates


PERTURBATION, EDITS = "perturbation", "word edits"  # how a counterfactual is looked for (`Counterfactual.search`)


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
    budget: float  # images: the largest epsilon allowed; text: the most edits allowed
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

    @property
    def target_name(self) -> str:
        return self.classes[self.target]

    @property
    def pred_before(self) -> int:
        return int(np.argmax(self.probs_before))

    def budget_text(self) -> str:
        if self.search == PERTURBATION:
            return f"ε ≤ {self.budget:.4f} ({self.budget * 255:.1f}/255)"
        return f"{int(self.budget)} word edit{'s' if self.budget != 1 else ''}"

    def summary(self) -> str:
        """One line: what was found and its cost, or that none was found within the budget."""
        before = self.classes[self.pred_before]
        if not self.found:
            return f"None found within {self.budget_text()}: the model still does not predict {self.target_name} (now {before})."
        p = float(self.probs_after[self.target]) if self.probs_after is not None else float("nan")
        if self.search == PERTURBATION and self.result is not None:
            eps = float(self.epsilon or 0.0)
            return (
                f"{before} → {self.target_name} ({p:.1%}) at ε = {eps:.4f} ({eps * 255:.1f}/255): "
                f"L∞ {self.result.linf:.4f}, L2 {self.result.l2:.3f}; {self.probes} {self.attack} runs, {self.seconds:.2f} s"
            )
        n = len(self.edits)
        return (
            f"{before} → {self.target_name} ({p:.1%}) with {n} word edit{'s' if n != 1 else ''}: "
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
        }
        if self.search == PERTURBATION:
            out.update(
                attack=self.attack,
                probes=self.probes,
                epsilon=self.epsilon,
                epsilon_255=None if self.epsilon is None else self.epsilon * 255,
                linf=None if self.result is None else self.result.linf,
                l2=None if self.result is None else self.result.l2,
            )
        else:
            out.update(
                edits=[{"position": e.position, "old": e.old, "new": e.new} for e in self.edits],
                edit_count=len(self.edits),
                text=self.text,
            )
        return out


def counterfactual_attacks(modality: str = "image") -> list[str]:
    """Attacks that can aim at a class, iterative ones first (the default is the first)."""
    specs = [s for s in list_attacks(modality) if s.targeted]
    return [s.id for s in sorted(specs, key=lambda s: not s.iterative)]


def _check_target(bundle: ModelBundle, to: int, pred: int) -> int:
    k = int(to)
    if not 0 <= k < bundle.info.num_classes:
        raise ExplainError(f"Class {k} is out of range: the model has classes 0..{bundle.info.num_classes - 1}.")
    if k == pred:
        raise ExplainError(
            f"The model already predicts {bundle.info.classes[k]} for this input: pick another class for the "
            "counterfactual."
        )
    return k


def image_counterfactual(
    bundle: ModelBundle,
    raw: Any,
    to: int,
    *,
    budget: float = DEFAULT_BUDGET,
    attack_id: str | None = None,
    steps: int = DEFAULT_STEPS,
    tolerance: float = TOLERANCE,
    seed: int = 0,
) -> Counterfactual:
    """The smallest L-infinity budget (pixel units) at which a targeted attack makes the model predict `to`."""
    budget = check_epsilon(budget, "budget")
    attack_id = attack_id or counterfactual_attacks(bundle.modality)[0]
    spec = get_attack(attack_id, bundle.modality)
    own = {"steps": steps} if any(p.name == "steps" for p in spec.params) else {}
    before = bundle.predict_proba(torch.as_tensor(raw)[None] if torch.as_tensor(raw).dim() == 3 else raw)[0].numpy()
    k = _check_target(bundle, to, int(np.argmax(before)))
    start = time.perf_counter()

    def probe(eps: float) -> AttackResult:
        return attack(bundle, raw, k, spec.id, {"epsilon": eps, **own}, seed=seed)

    best = probe(budget)
    probes = 1
    if best.reached:
        lo, hi = 0.0, budget
        while hi - lo > tolerance and probes < MAX_PROBES:
            mid = (lo + hi) / 2
            r = probe(mid)
            probes += 1
            if r.reached:
                hi, best = mid, r
            else:
                lo = mid
    seconds = time.perf_counter() - start
    return Counterfactual(
        modality=bundle.modality,
        search=PERTURBATION,
        target=k,
        classes=tuple(str(c) for c in bundle.info.classes),
        found=best.reached,
        budget=budget,
        probs_before=before,
        probs_after=best.probs_after if best.reached else None,
        seconds=seconds,
        result=best if best.reached else None,
        epsilon=best.epsilon if best.reached else None,
        probes=probes,
        attack=spec.label,
        note=f"targeted {spec.label}" + (f", {steps} steps per run" if own else "") + "; bisection over ε",
    )


def _vocabulary(bundle: ModelBundle, limit: int = VOCABULARY_LIMIT) -> tuple[list[str], str]:
    """Candidate substitute words, most frequent first, and where they came from: the model's own word vocabulary,
    or (a word-piece tokenizer) the words of its training split."""
    itos = getattr(bundle.tokenizer, "itos", None)
    source = "the model's vocabulary"
    if itos is None:
        if not bundle.has_dataset:
            return [], "no vocabulary of whole words (an imported model with no data set): deletions only"
        from xaidash.data.registry import load_split

        texts = load_split(bundle.info.name, "train").texts  # type: ignore[union-attr]
        itos = [w for w, _ in Counter(w for t in texts for w in split_words(t)).most_common()]
        source = "the words of the training split"
    words = [w for w in itos if any(ch.isalnum() for ch in w) and not w.startswith("<")]
    return words[:limit], source


def _margins(bundle: ModelBundle, texts: Sequence[str], k: int, batch_size: int) -> np.ndarray:
    """Class k's logit minus the largest other logit, for each text (> 0: the model predicts k), in shared
    passes of `rows_per_pass(batch_size)` texts, halved on out-of-memory."""

    @torch.no_grad()
    def run(size: int) -> np.ndarray:
        out = []
        for s in range(0, len(texts), size):
            logits = bundle.model(bundle.prepare(list(texts[s : s + size]))).float()
            others = logits.clone()
            others[:, k] = -torch.inf
            out.append((logits[:, k] - others.max(1).values).cpu())
        return torch.cat(out).numpy() if out else np.zeros(0, np.float32)

    margins, _ = run_halving(run, rows_per_pass(batch_size, bundle.device), what="the counterfactual search")
    return margins


def _join(words: Sequence[str | None], tail: Sequence[str]) -> str:
    return " ".join([w for w in words if w is not None] + list(tail))


def _greedy_edits(
    bundle: ModelBundle,
    words: list[str | None],
    tail: list[str],
    k: int,
    pool: list[str],
    max_edits: int,
    deletions: bool,
    batch_size: int,
) -> tuple[list[str | None], list[Edit]]:
    """Word edits, one at a time, each the deletion or substitution (from `pool`) that raises class k's margin most,
    until the model predicts k or `max_edits` are made; every candidate of a round scored in shared batched passes."""
    edits: list[Edit] = []
    margin = float(_margins(bundle, [_join(words, tail)], k, batch_size)[0])
    while margin <= 0 and len(edits) < max_edits:
        touched = {e.position for e in edits}
        options: list[tuple[int, str | None]] = []
        for pos, w in enumerate(words):
            if w is None or pos in touched:
                continue
            if deletions:
                options.append((pos, None))
            options.extend((pos, c) for c in pool if c != w)
        if not options:
            break
        rows = []
        for pos, new in options:
            trial = list(words)
            trial[pos] = new
            rows.append(_join(trial, tail))
        scores = _margins(bundle, rows, k, batch_size)
        j = int(np.argmax(scores))
        pos, new = options[j]
        edits.append(Edit(pos, str(words[pos]), new))
        words[pos] = new
        margin = float(scores[j])
    return words, edits


def text_counterfactual(
    bundle: ModelBundle,
    text: str,
    to: int,
    *,
    max_edits: int = DEFAULT_EDITS,
    candidates: int = DEFAULT_CANDIDATES,
    deletions: bool = True,
    substitutions: bool = True,
    batch_size: int = 256,
) -> Counterfactual:
    """The fewest word edits (greedy: fewer may exist) that make the model predict `to` for `text`."""
    if not str(text).strip():
        raise ExplainError("Text input is empty: type or upload some text.")
    check_text_length([text])
    if not 1 <= int(max_edits) <= 50:
        raise ExplainError(f"max_edits={max_edits}: allow between 1 and 50 word edits.")
    if not (deletions or substitutions):
        raise ExplainError("Allow deletions, substitutions or both.")
    before = bundle.predict_proba([text])[0].numpy()
    k = _check_target(bundle, to, int(np.argmax(before)))
    ids = [w for w in bundle.tokenizer.word_ids(text) if w is not None]
    all_words = split_words(text)
    read = min(len(all_words), max(ids) + 1) if ids else 0
    if read == 0:
        raise ExplainError("The model reads no word of this text, so no word edit can change its answer.")
    original, tail = all_words[:read], all_words[read:]
    start = time.perf_counter()
    with evaluating(bundle.model):
        vocab, source = _vocabulary(bundle) if substitutions else ([], "")
        pool: list[str] = []
        if vocab:  # the words that most favour class k on their own: tried at every position
            alone = _margins(bundle, vocab, k, batch_size)
            pool = [vocab[j] for j in np.argsort(-alone, kind="stable")[: max(1, int(candidates))]]
        words, edits = _greedy_edits(bundle, list(original), tail, k, pool, int(max_edits), deletions, batch_size)
    edited = _join(words, tail)
    after = bundle.predict_proba([edited])[0].numpy()
    found = int(np.argmax(after)) == k
    note = "greedy search (fewer edits may exist)"
    if substitutions:
        note += f"; substitutes: the {len(pool)} words of {source} that most favour {bundle.info.classes[k]}"
    return Counterfactual(
        modality=bundle.modality,
        search=EDITS,
        target=k,
        classes=tuple(str(c) for c in bundle.info.classes),
        found=found,
        budget=float(max_edits),
        probs_before=before,
        probs_after=after if found else None,
        seconds=time.perf_counter() - start,
        original_words=tuple(original),
        words=tuple(words),
        edits=tuple(edits) if found else (),
        text=edited if found else None,
        note=note,
    )


def counterfactual(
    bundle: ModelBundle,
    raw: Any,
    to: int,
    *,
    budget: float | None = None,
    **options: Any,
) -> Counterfactual:
    """`image_counterfactual` (budget: the largest epsilon, pixel units) where the model's inputs can be perturbed
    within a pixel budget (its modality adapter's `attackable`), else `text_counterfactual` (budget: the most word
    edits)."""
    if adapter_of(bundle.modality).attackable:
        return image_counterfactual(bundle, raw, to, budget=DEFAULT_BUDGET if budget is None else budget, **options)
    if budget is not None:
        options["max_edits"] = int(budget)
    return text_counterfactual(bundle, str(raw), to, **options)
