"""Activation patching: which layers, positions, attention heads and MLPs carry a language model's answer.

Two prompts of the same token length: a clean one whose answer is `answer` (" Mary" after "When Mary and John went
to the store, John gave a drink to") and a corrupted one that leads elsewhere (the names swapped: " John"). The
corrupted prompt runs again with one activation taken from the clean run; the logit difference (answer minus the
wrong answer, at the last position) tells how much of the clean behaviour that one activation restores:
(patched - corrupted) / (clean - corrupted), 1 = all of it, 0 = none.

Patched: the residual stream after each block at each position; each attention head's output at every position (the
head's slice of o_proj's input, entered as its o_proj image: o_proj is linear, so the slice's change times its
columns of W_O is exactly the change of the attention output); each MLP's output at every position.

Batched by hand (no library batches different patches in one pass): each row of a batch of copies of the corrupted
prompt carries its own patch, and every layer's edit touches only the rows that patch it, so one forward pass
evaluates as many patches as there are rows."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sites import Edit, editing, reading, site_module
from xaidash.models.registry import ModelError

Kind = Literal["resid", "head", "mlp"]
DEFAULT_BATCH = 64  # patched copies of the prompt per forward pass
MAX_TOKENS = 256  # a longer prompt pair is not an activation-patching experiment (layers x positions passes)
NAMES_CLEAN = "When Mary and John went to the store, John gave a drink to"
NAMES_CORRUPTED = "When John and Mary went to the store, Mary gave a drink to"
NAMES_ANSWER = " Mary"
NAMES_WRONG = " John"


@dataclass(frozen=True)
class Patch:
    """One activation taken from the donor run: the residual stream after block `layer` at token `index`
    (kind "resid"), head `index` of block `layer`'s attention at every token ("head"), or block `layer`'s MLP output
    at every token ("mlp"; index unused)."""

    kind: Kind
    layer: int
    index: int = 0


@dataclass
class Cache:
    """One run's activations, per layer: residual stream (T, d), MLP output (T, d), o_proj's input (T, heads * dh)."""

    resid: list[torch.Tensor]
    mlp: list[torch.Tensor]
    heads_in: list[torch.Tensor]
    logit_diff: float


@dataclass
class PatchingSetup:
    """The pair of prompts as token ids (1, T) and the two answers as single token ids."""

    clean: torch.Tensor
    corrupted: torch.Tensor
    answer: int
    wrong: int
    clean_tokens: list[str]
    corrupted_tokens: list[str]
    answer_text: str
    wrong_text: str


@dataclass
class PatchingResult:
    """Fractions of the logit difference restored: `resid` (layers, T), `heads` (layers, heads), `mlp` (layers,)."""

    setup: PatchingSetup
    clean_diff: float
    corrupted_diff: float
    resid: np.ndarray
    heads: np.ndarray
    mlp: np.ndarray
    seconds: float = 0.0
    forward_passes: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def position_labels(self) -> list[str]:
        """Each position as "i clean-token" with "/corrupted-token" where the prompts differ there."""
        out = []
        for i, (a, b) in enumerate(zip(self.setup.clean_tokens, self.setup.corrupted_tokens, strict=True)):
            out.append(f"{i} {a!r}" if a == b else f"{i} {a!r}/{b!r}")
        return out


# ---- the prompts ---------------------------------------------------------------------------------------------------


def _one_token(lm: LanguageModel, text: str, what: str) -> int:
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        pieces = " + ".join(repr(t) for t in lm.token_text(ids)) or "no token"
        raise ModelError(
            f"The {what} {text!r} is {len(ids)} tokens for {lm.name} ({pieces}): give one token, "
            "with its leading space (' Mary')."
        )
    return int(ids[0])


def prepare(lm: LanguageModel, clean: str, corrupted: str, answer: str, wrong: str) -> PatchingSetup:
    """The prompts tokenized (no chat template: the model continues the text) and checked: the same number of tokens,
    answers of one token each, different answers; a ModelError with one line otherwise."""
    if not clean.strip() or not corrupted.strip():
        raise ModelError("Give both a clean and a corrupted prompt.")
    a = lm.tokenizer(clean, add_special_tokens=False)["input_ids"]
    b = lm.tokenizer(corrupted, add_special_tokens=False)["input_ids"]
    if len(a) != len(b):
        raise ModelError(
            f"The clean prompt is {len(a)} tokens and the corrupted one {len(b)}: patching position by position "
            "needs the same length (swap words that are one token each)."
        )
    if len(a) > MAX_TOKENS:
        raise ModelError(f"The prompts are {len(a)} tokens: keep them under {MAX_TOKENS}.")
    answer_id, wrong_id = _one_token(lm, answer, "answer"), _one_token(lm, wrong, "wrong answer")
    if answer_id == wrong_id:
        raise ModelError(f"The answer and the wrong answer are the same token {answer!r}: give two different ones.")
    return PatchingSetup(
        clean=torch.tensor([a]),
        corrupted=torch.tensor([b]),
        answer=answer_id,
        wrong=wrong_id,
        clean_tokens=lm.token_text(a),
        corrupted_tokens=lm.token_text(b),
        answer_text=answer,
        wrong_text=wrong,
    )


# ---- caching one run -----------------------------------------------------------------------------------------------


def o_proj(lm: LanguageModel, layer: int) -> nn.Linear:
    """Block `layer`'s attention output projection (whose input is the heads' outputs side by side)."""
    attn = site_module(lm, layer, "attn")
    proj = getattr(attn, "o_proj", None)
    if not isinstance(proj, nn.Linear):
        raise ModelError(f"{lm.name}'s attention has no o_proj: its heads cannot be patched one by one.")
    return proj


@contextmanager
def _head_inputs(lm: LanguageModel) -> Iterator[list[list[torch.Tensor]]]:
    # By hand: sites.py reads module outputs, and a head's output exists only as a slice of o_proj's input.
    seen: list[list[torch.Tensor]] = [[] for _ in range(lm.num_layers)]
    handles = []
    for layer in range(lm.num_layers):

        def hook(module: nn.Module, args: tuple[Any, ...], layer: int = layer) -> None:
            seen[layer].append(args[0])

        handles.append(o_proj(lm, layer).register_forward_pre_hook(hook))
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


def logit_diff(logits: torch.Tensor, answer: int, wrong: int) -> torch.Tensor:
    """(B,) answer minus wrong answer at the last position of (B, T, vocab) logits."""
    last = logits[:, -1].float()
    return last[:, answer] - last[:, wrong]


@torch.no_grad()
def cache_run(lm: LanguageModel, ids: torch.Tensor, answer: int, wrong: int) -> Cache:
    """One forward pass of (1, T) ids with every layer's residual stream, MLP output and heads kept."""
    n = lm.num_layers
    with ExitStack() as stack:
        resid = [stack.enter_context(reading(lm, layer, "resid")) for layer in range(n)]
        mlp = [stack.enter_context(reading(lm, layer, "mlp")) for layer in range(n)]
        heads = stack.enter_context(_head_inputs(lm))
        logits = lm.logits(ids)
    return Cache(
        resid=[r[0][0].detach() for r in resid],
        mlp=[m[0][0].detach() for m in mlp],
        heads_in=[h[0][0].detach() for h in heads],
        logit_diff=float(logit_diff(logits, answer, wrong)[0]),
    )


def head_effects(lm: LanguageModel, donor: Cache, receiver: Cache, layer: int) -> torch.Tensor:
    """(heads, T, d): what replacing each head's output by the donor's adds to block `layer`'s attention output."""
    heads = lm.num_heads
    w = o_proj(lm, layer).weight  # (d, heads * dh)
    d = w.shape[0]
    diff = (donor.heads_in[layer] - receiver.heads_in[layer]).to(w.dtype)  # (T, heads * dh)
    t = diff.shape[0]
    return torch.einsum("thk,dhk->htd", diff.view(t, heads, -1), w.view(d, heads, -1))


# ---- many patches per pass -----------------------------------------------------------------------------------------


def _row_edit(rows: torch.Tensor, positions: torch.Tensor | None, value: Callable[[], torch.Tensor], add: bool) -> Edit:
    """An edit that writes (or adds) `value()` into the rows given, at `positions` (one per row) or at every token."""

    def edit(out: torch.Tensor) -> torch.Tensor:
        out = out.clone()
        v = value().to(out.dtype)
        r = rows.to(out.device)
        if positions is None:
            out[r] = out[r] + v if add else v  # v: (k, T, d) per row, or (T, d) for every row
        else:
            out[r, positions.to(out.device)] = v
        return out

    return edit


def _edits_for(lm: LanguageModel, chunk: Sequence[Patch], donor: Cache, receiver: Cache) -> list[tuple[int, str, Edit]]:
    """The (layer, site, edit) hooks that put each patch of `chunk` into its own row of the batch."""
    edits: list[tuple[int, str, Edit]] = []
    by: dict[tuple[Kind, int], list[tuple[int, int]]] = {}
    for row, p in enumerate(chunk):
        by.setdefault((p.kind, p.layer), []).append((row, p.index))
    for (kind, layer), pairs in by.items():
        rows = torch.tensor([r for r, _ in pairs])
        idx = torch.tensor([i for _, i in pairs])
        if kind == "resid":
            src = donor.resid[layer]
            edits.append((layer, "resid", _row_edit(rows, idx, lambda s=src, i=idx: s[i.to(s.device)], add=False)))  # type: ignore[misc]
        elif kind == "mlp":
            src = donor.mlp[layer]
            edits.append((layer, "mlp", _row_edit(rows, None, lambda s=src: s, add=False)))  # type: ignore[misc]
        else:
            effects = head_effects(lm, donor, receiver, layer)
            edits.append((layer, "attn", _row_edit(rows, None, lambda e=effects, i=idx: e[i.to(e.device)], add=True)))  # type: ignore[misc]
    return edits


@torch.no_grad()
def patch_diffs(
    lm: LanguageModel,
    receiver_ids: torch.Tensor,
    donor: Cache,
    receiver: Cache,
    patches: Sequence[Patch],
    answer: int,
    wrong: int,
    batch: int = DEFAULT_BATCH,
    on_pass: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """The logit difference of the receiver prompt with each patch applied alone (one row per patch)."""
    out = np.zeros(len(patches))
    for start in range(0, len(patches), batch):
        chunk = patches[start : start + batch]
        ids = receiver_ids.expand(len(chunk), -1)
        with ExitStack() as stack:
            for layer, site, edit in _edits_for(lm, chunk, donor, receiver):
                stack.enter_context(editing(lm, layer, site, edit))
            out[start : start + len(chunk)] = logit_diff(lm.logits(ids), answer, wrong).cpu().numpy()
        if on_pass is not None:
            on_pass(min(start + batch, len(patches)), len(patches))
    return out


def all_patches(lm: LanguageModel, tokens: int) -> list[Patch]:
    """Every residual position of every layer, every head and every MLP."""
    n = lm.num_layers
    return (
        [Patch("resid", layer, pos) for layer in range(n) for pos in range(tokens)]
        + [Patch("head", layer, h) for layer in range(n) for h in range(lm.num_heads)]
        + [Patch("mlp", layer) for layer in range(n)]
    )


def patch_prompts(
    lm: LanguageModel,
    setup: PatchingSetup,
    batch: int = DEFAULT_BATCH,
    on_pass: Callable[[int, int], None] | None = None,
) -> PatchingResult:
    """Every patch of `all_patches`, clean into corrupted, as fractions of the logit difference restored."""
    import time

    t0 = time.perf_counter()
    clean = cache_run(lm, setup.clean, setup.answer, setup.wrong)
    corrupted = cache_run(lm, setup.corrupted, setup.answer, setup.wrong)
    gap = clean.logit_diff - corrupted.logit_diff
    notes = []
    if abs(gap) < 1e-3:
        raise ModelError(
            f"The clean and corrupted prompts give the same logit difference ({clean.logit_diff:.3f}): "
            "nothing to restore; make the corrupted prompt change the answer."
        )
    if clean.logit_diff <= 0:
        notes.append(
            f"On the clean prompt the model prefers {setup.wrong_text!r} to {setup.answer_text!r} "
            f"(logit difference {clean.logit_diff:.2f}): what is restored is that preference."
        )
    t = setup.clean.shape[1]
    patches = all_patches(lm, t)
    diffs = patch_diffs(lm, setup.corrupted, clean, corrupted, patches, setup.answer, setup.wrong, batch, on_pass)
    frac = (diffs - corrupted.logit_diff) / gap
    n, h = lm.num_layers, lm.num_heads
    return PatchingResult(
        setup=setup,
        clean_diff=clean.logit_diff,
        corrupted_diff=corrupted.logit_diff,
        resid=frac[: n * t].reshape(n, t),
        heads=frac[n * t : n * t + n * h].reshape(n, h),
        mlp=frac[n * t + n * h :],
        seconds=time.perf_counter() - t0,
        forward_passes=2 + -(-len(patches) // batch),
        notes=notes,
    )


# ---- in words ------------------------------------------------------------------------------------------------------

CARRIES = 0.5  # a component "carries" the answer when patching it alone restores at least this much


def carriers(result: PatchingResult, top: int = 3) -> list[str]:
    """Sentences naming what carries the answer: per position, the layers where its residual stream restores at
    least CARRIES; the strongest heads and MLPs."""
    lines = []
    labels = result.position_labels
    for pos in range(result.resid.shape[1]):
        layers = np.flatnonzero(result.resid[:, pos] >= CARRIES)
        if layers.size:
            lines.append(
                f"Position {labels[pos]}: the residual stream restores ≥ {CARRIES:.0%} at layers "
                f"{_ranges(layers.tolist())} (at most {result.resid[:, pos].max():.0%})."
            )
    for what, values, name in (("heads", result.heads, "L{}H{}"), ("MLPs", result.mlp[:, None], "MLP {}")):
        order = np.argsort(-values, axis=None)[:top]
        best = [np.unravel_index(int(i), values.shape) for i in order]
        parts = [f"{name.format(*idx[: name.count('{}')])} {values[idx]:+.0%}" for idx in best]
        lines.append(f"Strongest {what} alone: " + ", ".join(parts) + ".")
    return lines


def _ranges(values: list[int]) -> str:
    """[3, 4, 5, 9] -> "3-5, 9"."""
    out: list[str] = []
    start = prev = values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(out)
