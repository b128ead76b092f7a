"""The smallest change that makes the model answer a class the user picks, by one of three searches whose declared
facts (`SEARCHES`: what the result is called, what it changes) every page, the CLI and the JSON name it by.

Images, `PERTURBATION`: a targeted attack (PGD by default, any registered attack that can aim) at the whole budget
first; when it does not reach the class, none is found within the budget; when it does, a bisection over epsilon
finds the smallest budget at which it still does. Attacks are not monotonic in epsilon, so this is the smallest
found, not a proven minimum. The result is a minimal adversarial example: a change spread over every pixel,
usually far below what a person sees (`visible_change` measures it), not a counterfactual a person can look at.

Images, `PATCH`: a counterfactual a person can see: the same targeted attack with no budget on the pixel values
(ε = 1) but confined to one square patch, placed where the gradient of the class's margin is largest, grown
(`PATCH_SIDES`) until the model answers the class or the largest patch is spent.

Text, `EDITS`: the fewest word deletions or substitutions from the model's vocabulary, by greedy search: each step
scores every single edit of the current text (each read word deleted, or replaced by one of the vocabulary words
that most favour the class) in shared batched passes (`batching.run_halving`, `rows_per_pass`) and keeps the edit
that raises the class's margin most, until the model predicts the class or `max_edits` is spent. No library
searches word edits against a PyTorch classifier with a given vocabulary, so this is written here.

Each search reports its progress before every model run it makes (`progress`: a `SearchStep`, e.g. "PGD run 3 of
at most 9 · ε = 12.8/255"), so a page can draw a progress bar instead of a spinner."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from xaidash.data.tokenizer import split_words
from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.guard import evaluating
from xaidash.explainers.params import ExplainError, check_text_length
from xaidash.explainers.robust.attack import AttackResult, attack, pixel_forward, raw_image
from xaidash.explainers.robust.registry import check_epsilon, get_attack, list_attacks
from xaidash.explainers.robust.result import Counterfactual, Edit
from xaidash.explainers.robust.searches import (
    COLUMNS,
    EDITS,
    PATCH,
    PATCH_SIDES,
    PERTURBATION,
    SEARCHES,
    Progress,
    SearchStep,
    quiet,
    searches,
)
from xaidash.explainers.robust.table_counterfactual import table_counterfactual
from xaidash.models.bundle import ModelBundle

DEFAULT_BUDGET = 0.1  # pixel units: 25.5/255
DEFAULT_STEPS = 20
TOLERANCE = 0.5 / 255  # the bisection stops when the bracket is narrower than half a grey level
MAX_PROBES = 12
DEFAULT_EDITS = 5
DEFAULT_CANDIDATES = 20  # vocabulary words tried at each position
VOCABULARY_LIMIT = 5000  # the most frequent words of the vocabulary scored as candidates


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
    progress: Progress = quiet,
) -> Counterfactual:
    """The smallest L-infinity budget (pixel units) at which a targeted attack makes the model predict `to`: a
    minimal adversarial example. `progress` hears of each attack run before it starts."""
    budget = check_epsilon(budget, "budget")
    attack_id = attack_id or counterfactual_attacks(bundle.modality)[0]
    spec = get_attack(attack_id, bundle.modality)
    own = {"steps": steps} if any(p.name == "steps" for p in spec.params) else {}
    before = bundle.predict_proba(torch.as_tensor(raw)[None] if torch.as_tensor(raw).dim() == 3 else raw)[0].numpy()
    k = _check_target(bundle, to, int(np.argmax(before)))
    start = time.perf_counter()
    # the bisection halves the bracket until it is narrower than the tolerance, within MAX_PROBES runs in all
    runs = 1 + min(MAX_PROBES - 1, max(0, math.ceil(math.log2(budget / tolerance))))
    done = [0]

    def probe(eps: float) -> AttackResult:
        done[0] += 1
        progress(SearchStep(done[0], runs, f"{spec.label} run", f"ε = {eps * 255:.1f}/255"))
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


def _patch_at(saliency: torch.Tensor, side: int) -> tuple[int, int, int, int]:
    """The side × side window with the largest summed saliency (H, W): (top, left, side, side)."""
    sums = torch.nn.functional.avg_pool2d(saliency[None, None], side, stride=1)[0, 0]
    j = int(torch.argmax(sums))
    return j // sums.shape[1], j % sums.shape[1], side, side


def _margin_saliency(bundle: ModelBundle, x: torch.Tensor, k: int, pred: int) -> torch.Tensor:
    """|∂(logit k − logit pred) / ∂ pixel|, summed over channels (H, W): where a change moves the answer most."""
    forward = pixel_forward(bundle)
    probe = x.detach().clone().requires_grad_(True)
    with torch.enable_grad(), evaluating(bundle.model):
        out = forward(probe)
        (grad,) = torch.autograd.grad(out[0, k] - out[0, pred], probe)
    return grad.detach()[0].abs().sum(0).float().cpu()


def patch_counterfactual(
    bundle: ModelBundle,
    raw: Any,
    to: int,
    *,
    attack_id: str | None = None,
    steps: int = DEFAULT_STEPS,
    sides: Sequence[float] = PATCH_SIDES,
    seed: int = 0,
    progress: Progress = quiet,
) -> Counterfactual:
    """The smallest square patch (from `sides`, shares of the image's shorter side) that a targeted attack with no
    budget on the pixel values changes so that the model predicts `to`: a counterfactual a person can see."""
    attack_id = attack_id or counterfactual_attacks(bundle.modality)[0]
    spec = get_attack(attack_id, bundle.modality)
    own = {"steps": steps} if any(p.name == "steps" for p in spec.params) else {}
    x = raw_image(bundle, raw)
    before = bundle.predict_proba(x)[0].numpy()
    k = _check_target(bundle, to, int(np.argmax(before)))
    short = min(int(x.shape[-2]), int(x.shape[-1]))
    pixels = sorted({max(1, min(short, round(f * short))) for f in sides})
    if not pixels:
        raise ExplainError("Give at least one patch size to try.")
    start = time.perf_counter()
    saliency = _margin_saliency(bundle, x, k, int(np.argmax(before)))
    best: AttackResult | None = None
    for i, side in enumerate(pixels, 1):
        region = _patch_at(saliency, side)
        progress(SearchStep(i, len(pixels), f"{spec.label} run", f"patch {side}×{side} px"))
        best = attack(bundle, x[0], k, spec.id, {"epsilon": 1.0, **own}, seed=seed, region=region)
        if best.reached:
            break
    assert best is not None
    return Counterfactual(
        modality=bundle.modality,
        search=PATCH,
        target=k,
        classes=tuple(str(c) for c in bundle.info.classes),
        found=best.reached,
        budget=float(pixels[-1]),
        probs_before=before,
        probs_after=best.probs_after if best.reached else None,
        seconds=time.perf_counter() - start,
        result=best if best.reached else None,
        epsilon=1.0 if best.reached else None,
        probes=i,
        attack=spec.label,
        note=f"targeted {spec.label}"
        + (f", {steps} steps per run" if own else "")
        + "; any pixel value inside the patch; the patch placed where the class's gradient is largest, grown "
        + f"through {', '.join(f'{p}' for p in pixels)} px",
        patch=best.region if best.reached else None,
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
    progress: Progress = quiet,
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
        progress(SearchStep(len(edits) + 1, max_edits, "word edit", f"{len(options):,} edits scored"))
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
    progress: Progress = quiet,
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
        words, edits = _greedy_edits(
            bundle, list(original), tail, k, pool, int(max_edits), deletions, batch_size, progress
        )
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
    search: str | None = None,
    **options: Any,
) -> Counterfactual:
    """The change of `raw` that makes the model predict `to`, by `search` (one of `searches(bundle.modality)`, the
    first by default): `image_counterfactual` (PERTURBATION; budget: the largest epsilon, pixel units),
    `patch_counterfactual` (PATCH; budget: the largest patch's side as a share of the image's shorter side) or
    `text_counterfactual` (EDITS; budget: the most word edits) or `table_counterfactual` (COLUMNS; budget: the most
    changed columns; `fixed`: the columns left alone). `options` go to that search (`progress` too)."""
    allowed = searches(bundle.modality)
    if not allowed:
        raise ExplainError(
            f"Counterfactual searches are drawn for images, texts and table rows; not for {bundle.adapter.label}."
        )
    search = search or allowed[0]
    if search not in allowed:
        names = ", ".join(f"{s} ({SEARCHES[s].name})" for s in allowed)
        raise ExplainError(f"Search {search!r} does not apply to {bundle.modality} models; choose {names}.")
    if search == PERTURBATION:
        return image_counterfactual(bundle, raw, to, budget=DEFAULT_BUDGET if budget is None else budget, **options)
    if search == PATCH:
        if budget is not None:
            if not 0 < float(budget) <= 1:
                raise ExplainError(f"Patch budget {budget}: give the largest side as a share in (0, 1] of the image's.")
            options["sides"] = [f for f in PATCH_SIDES if f < float(budget)] + [float(budget)]
        return patch_counterfactual(bundle, raw, to, **options)
    if search == COLUMNS:
        if budget is not None:
            options["max_changes"] = int(budget)
        return table_counterfactual(bundle, raw, to, **options)
    if budget is not None:
        options["max_edits"] = int(budget)
    return text_counterfactual(bundle, str(raw), to, **options)
