"""The one batched scorer of perturbed prompts: every perturbation method (and the deletion / insertion metric) hands
its rows of token ids here and gets back the teacher-forced log-probability of each target step.

captum's `LLMAttribution` runs one perturbed prompt per forward pass and, by default, decodes the target token by
token; here every row is read in one pass over [row ; target_ids[:-1]] (all steps teacher-forced at once, as captum's
`forward_in_tokens=False`), `query.batch_size` rows per pass, halved on out-of-memory (`explainers/batching.py`).

The key-value cache of the unchanged prefix is reused where that is exact: a causal model's keys and values at
positions before the first position a row changes depend on those tokens alone, so the prompt is run once (one row),
and each pass runs only the rows' suffixes from the first position that differs in any of its rows, over that cache
expanded to the batch. Rows are sorted by their first changed position so that a pass's rows share a long prefix
(feature ablation's row i changes at feature i), and identical rows are scored once. transformers has no such
"score many continuations of one prefix" call, so this is written here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xaidash.explainers.batching import rows_per_pass, run_halving
from xaidash.explainers.language.query import PromptQuery
from xaidash.explainers.params import ExplainError
from xaidash.models.language.generate import cache_of
from xaidash.models.language.model import LanguageModel

__all__ = [
    "EXPLAINED",
    "Sampled",
    "captum_sampled",
    "explained",
    "fitted",
    "masked_rows",
    "score_rows",
    "step_log_probs",
]

# What one more forward pass costs, in row-positions (one row's token through the model): on the CPU a pass of
# SmolLM2-135M cost about 70 ms beside 2.8 ms per row-position (one thread, 2 shared cores), so prefix reuse pays
# for a pass of its own at ~25 positions saved; on a GPU a pass's kernel launches cost far more than a position.
PASS_OVERHEAD = {"cpu": 25.0, "other": 2048.0}
Prefix = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: (keys, values) of the whole prompt, batch 1


def masked_rows(lm: LanguageModel, query: PromptQuery, keep: torch.Tensor) -> torch.Tensor:
    """Token rows (R, len(prompt)) on the model's device from feature masks `keep` (R, n_features): every position of
    a feature whose mask is 0 becomes `query.baseline_id` (as captum's TextTokenInput does with its baseline), the
    other positions (template included) keep the prompt's tokens."""
    device = lm.device
    keep = keep.to(device=device).bool()
    if keep.ndim != 2 or keep.shape[1] != query.n_features:
        raise ExplainError(f"Feature masks must be (rows, {query.n_features}), not {tuple(keep.shape)}.")
    owner = torch.full((len(query.prompt.ids),), -1, dtype=torch.long)
    for f, group in enumerate(query.features):
        owner[list(group)] = f
    owner = owner.to(device)
    prompt = torch.tensor(query.prompt.ids, dtype=torch.long, device=device)
    featured = owner >= 0
    hidden = torch.zeros(keep.shape[0], len(prompt), dtype=torch.bool, device=device)
    hidden[:, featured] = ~keep[:, owner[featured]]
    return torch.where(hidden, torch.full_like(prompt, query.baseline_id), prompt.expand(keep.shape[0], -1))


def step_log_probs(query: PromptQuery, logits: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
    """(N, n_steps) log p(target_ids[j]) from the logits (N, n_steps, V) that predict each step, with step `span[0]`
    replaced by log p(target) - log p(contrast) when the query has a contrast: the one reading of a query's target,
    for the scorer's passes and the gradient methods' (whose autograd it keeps: no in-place change of the gather)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    if targets is None:
        targets = torch.tensor(query.target_ids, dtype=torch.long, device=logits.device)
    picked = logp.gather(2, targets.view(1, -1, 1).expand(len(logp), -1, 1))[..., 0]
    if query.contrast is not None:
        at = query.span[0]
        picked = picked.clone()
        picked[:, at] = picked[:, at] - logp[:, at, query.contrast]
    return picked


def explained(query: PromptQuery, scores: torch.Tensor) -> torch.Tensor:
    """(R,) the explained output of each row from `score_rows`'s (R, n_steps): the span's steps summed (with a
    contrast, the span is one step and its column already holds log p(target) - log p(contrast))."""
    start, stop = query.span
    return scores[:, start:stop].sum(dim=1)


@torch.no_grad()
def score_rows(lm: LanguageModel, query: PromptQuery, rows: torch.Tensor) -> tuple[torch.Tensor, int]:
    """log p(target_ids[j] | row, target_ids[:j]) for each row (R, len(prompt)) of token ids and each step j, with
    step `span[0]` replaced by log p(target) - log p(contrast) when the query has a contrast.

    Returns ((R, n_steps) float32 on the model's device, the most rows one pass ran). Identical rows are scored once;
    passes hold at most `query.batch_size` rows (64 on a CPU; halved on out-of-memory), fewer where a shorter pass
    over a longer cached prefix costs less (`passes`)."""
    device = lm.device
    length, steps = len(query.prompt.ids), query.n_steps
    rows = torch.as_tensor(rows).to(device=device, dtype=torch.long)
    if rows.ndim != 2 or rows.shape[1] != length:
        raise ExplainError(f"Rows to score must be (rows, {length}) token ids, not {tuple(rows.shape)}.")
    if rows.shape[0] == 0:
        return torch.zeros(0, steps, device=device), 0
    prompt = torch.tensor(query.prompt.ids, dtype=torch.long, device=device)
    targets = torch.tensor(query.target_ids, dtype=torch.long, device=device)

    unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
    changed = unique != prompt
    first = torch.where(changed.any(dim=1), changed.int().argmax(dim=1), length)
    # Every pass must read at least the last prompt token: its logits predict the first target step.
    first = first.clamp(max=length - 1)
    order = torch.argsort(first, stable=True)
    starts = first[order].tolist()  # the one read back: the prefix each pass reuses decides its shape
    ordered = unique[order]
    prefix = _prompt_cache(lm.model, prompt)
    if prefix is None:
        starts = [0] * len(starts)
    tokens = length + steps - 1  # positions a pass would run without the cache
    overhead = PASS_OVERHEAD.get(device.type, PASS_OVERHEAD["other"])

    def run(size: int) -> tuple[torch.Tensor, int]:
        out, largest = [], 0
        for a, b in passes(starts, size, tokens, overhead):
            out.append(_score_chunk(lm.model, ordered[a:b], starts[a], prefix, targets, query))
            largest = max(largest, b - a)
        return torch.cat(out), largest

    (scored, largest), _ = run_halving(
        run, rows_per_pass(query.batch_size, device), what="the perturbed prompts' scores"
    )
    by_unique = torch.empty_like(scored)
    by_unique[order] = scored
    return by_unique[inverse], largest


def passes(starts: list[int], size: int, tokens: int, overhead: float) -> list[tuple[int, int]]:
    """Consecutive chunks [a, b) of at most `size` rows, sorted by first changed position `starts`, that cost least:
    a chunk runs positions from its first row's start (`tokens` - start per row) and each pass costs `overhead`
    row-positions more. Small chunks reuse longer prefixes; large ones make fewer passes (dynamic programming over
    the cut points, O(rows x size))."""
    n = len(starts)
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for b in range(1, n + 1):
        for a in range(max(0, b - size), b):
            cost = best[a] + overhead + (b - a) * (tokens - starts[a])
            if cost < best[b]:
                best[b], cut[b] = cost, a
    chunks, b = [], n
    while b > 0:
        chunks.append((cut[b], b))
        b = cut[b]
    return chunks[::-1]


def _prompt_cache(model: Any, prompt: torch.Tensor) -> Prefix | None:
    """The prompt's keys and values per layer (one row), or None when the model's cache is not one plain dynamic
    layer per decoder layer (a sliding window or a recurrent state could not be cut at any position exactly)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    ids = prompt.unsqueeze(0)
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True, logits_to_keep=1)
    cache = cache_of(out)
    if not isinstance(cache, DynamicCache) or not cache.layers:
        return None
    prefix: Prefix = []
    for layer in cache.layers:
        if type(layer) is not DynamicLayer or layer.get_seq_length() != len(prompt):
            return None
        assert layer.keys is not None and layer.values is not None
        prefix.append((layer.keys, layer.values))
    return prefix


def _expanded(prefix: Prefix, reuse: int, batch: int) -> Any:
    """A fresh cache holding the prompt's first `reuse` positions for each of `batch` rows (the forward pass
    appends to it in place, so every pass gets its own)."""
    from transformers.cache_utils import DynamicCache

    return DynamicCache(
        [(k[:, :, :reuse].expand(batch, -1, -1, -1), v[:, :, :reuse].expand(batch, -1, -1, -1)) for k, v in prefix]
    )


def _score_chunk(
    model: Any, chunk: torch.Tensor, reuse: int, prefix: Prefix | None, targets: torch.Tensor, query: PromptQuery
) -> torch.Tensor:
    """(b, n_steps) teacher-forced log-probabilities of the target for `chunk`'s rows, running positions from
    `reuse` on over the cached prefix."""
    b, steps = chunk.shape[0], targets.shape[0]
    ids = torch.cat([chunk[:, reuse:], targets[:-1].expand(b, -1)], dim=1)
    total = reuse + ids.shape[1]
    cache = _expanded(prefix, reuse, b) if prefix is not None and reuse > 0 else None
    positions = torch.arange(reuse, total, device=ids.device).expand(b, -1)
    out = model(
        input_ids=ids,
        attention_mask=torch.ones(b, total, dtype=torch.long, device=ids.device),  # no pad check (a host read)
        position_ids=positions,
        cache=cache,
        use_cache=cache is not None,
        logits_to_keep=steps,  # the unembedding only where a target step is read
    )
    return step_log_probs(query, out.logits[:, -steps:], targets)


# --- captum's samplers over the batched scorer ---------------------------------------------------------------

# A captum attribution call, given the forward function it is to use: forward gets feature masks (k, n_features),
# 1 = shown, and returns (k,) or (k, m) scores; the call returns captum's attributions.
Attribute = Callable[[Callable[[torch.Tensor], torch.Tensor]], torch.Tensor]
EXPLAINED = -1  # the output column of `captum_sampled` that is the explained output (the span summed)


@dataclass
class Sampled:
    """captum's attributions for each output asked for, and the scores of the rows its draws made."""

    attributions: list[torch.Tensor]
    rows: int  # distinct rows scored
    batch: int
    full: torch.Tensor | None  # (n_steps + 1,) scores of the prompt itself (each step, then the explained output)
    empty: torch.Tensor | None  # the same with every feature hidden (each None when the draws did not make it)


def captum_sampled(
    lm: LanguageModel, query: PromptQuery, attribute: Attribute, outputs: Sequence[int | None]
) -> Sampled:
    """Run a captum perturbation method (Shapley value sampling, LIME, KernelSHAP) on scores from `score_rows`.

    These methods draw their perturbations without looking at the scores, so the call is made first with a
    forward function that only records the masks it is given, then every distinct mask is scored at once (sorted
    by prefix, batched, halved on out-of-memory), and the call is made again from the same seed with a forward
    function that looks the scores up: captum's own draws, weights and fits, on batched passes, and one model row
    per distinct mask (Shapley sampling repeats the full and empty prompts in every permutation). Each entry of
    `outputs` is one replay: a step index or EXPLAINED (forward returns (k,)), or None (every step, (k, n_steps)).
    """
    index: dict[bytes, int] = {}
    masks: list[np.ndarray] = []
    width = query.n_steps

    def shaped(k: int, output: int | None) -> tuple[int, ...]:
        return (k,) if output is not None else (k, width)

    def record(mask: torch.Tensor) -> torch.Tensor:
        for row in _mask_bytes(mask):
            if row not in index:
                index[row] = len(masks)
                masks.append(np.frombuffer(row, dtype=np.uint8))
        return torch.zeros(shaped(mask.shape[0], outputs[0]))

    _seeded(query, attribute, record)
    keep = torch.from_numpy(np.stack(masks).astype(np.int64))
    scores, batch = score_rows(lm, query, masked_rows(lm, query, keep))
    table = torch.cat([scores, explained(query, scores)[:, None]], dim=1).float().cpu()  # (U, n_steps + 1)

    results = []
    for output in outputs:
        column = table[:, :width] if output is None else table[:, output]

        def lookup(mask: torch.Tensor, column: torch.Tensor = column) -> torch.Tensor:
            return column[[index[row] for row in _mask_bytes(mask)]]

        results.append(_seeded(query, attribute, lookup).detach().float().cpu())
    full, empty = (index.get(np.full(query.n_features, v, dtype=np.uint8).tobytes()) for v in (1, 0))
    return Sampled(
        results, len(masks), batch, None if full is None else table[full], None if empty is None else table[empty]
    )


def fitted(
    lm: LanguageModel, query: PromptQuery, method: Callable[[Any], Any], samples: int
) -> tuple[Sampled, np.ndarray, np.ndarray]:
    """A captum method that fits a surrogate on `samples` random coalitions (LIME, KernelSHAP: `method(forward)` is
    its instance), run through `captum_sampled` once for the explained output and once per answer step (the same
    draws, no extra model rows): (what it sampled, the explained output's fit (n_features,), the per-step fits
    (n_steps, n_features))."""
    n = query.n_features

    def attribute(forward: Any) -> torch.Tensor:
        return method(forward).attribute(
            torch.ones(1, n, dtype=torch.long), n_samples=samples, perturbations_per_eval=samples
        )

    out = captum_sampled(lm, query, attribute, [EXPLAINED, *range(query.n_steps)])
    fits = [a.reshape(n).double().numpy() for a in out.attributions]
    return out, fits[0], np.stack(fits[1:])


def _mask_bytes(mask: torch.Tensor) -> list[bytes]:
    flat = (mask.detach().reshape(mask.shape[0], -1) != 0).to(torch.uint8).cpu().numpy()
    return [row.tobytes() for row in flat]


def _seeded(query: PromptQuery, attribute: Attribute, forward: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The call from `query.seed` (captum draws from torch's global generator), quiet about captum's fits."""
    torch.manual_seed(query.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return attribute(forward)
