"""Harvesting: batched forward passes over the corpus contexts that stop at the SAE's (layer, site), the
activations streamed to disk in chunks (memory bounded whatever the corpus size), resumable chunk by chunk.

The contexts the SAE uses are drawn once (seeded): the held-out ones first, then the training ones in a random
order, so each chunk mixes many texts and training can shuffle within a chunk. Position 0 of every context (the
attention sink, whose activations are orders of magnitude off) is left out, as in SAELens's own harvesting when it
excludes the special tokens. Written by hand on models.language.sites: SAELens harvests through TransformerLens,
which cannot wrap the loaded SmolLM2 offline."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from xaidash.data.atomic import atomic_write_json
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sae.config import SaeConfig
from xaidash.models.language.sae.corpus import corpus_contexts
from xaidash.models.language.sae.store import TOKENS, chunk_files, write_chunk, write_tokens
from xaidash.models.language.sites import editing

HARVEST_BATCH_TOKENS = 2048  # tokens per forward pass
CHUNK_TOKENS = 32_768  # activations per file: 38 MB of float16 at d_in 576
STATE = "harvest.json"


@dataclass(frozen=True)
class HarvestProgress:
    split: str
    tokens_done: int
    tokens_total: int
    elapsed: float


class _Captured(Exception):
    """Raised by the capture edit once the site's output is kept: the layers after it need not run."""


def _enough(usable: torch.Tensor, tokens: int) -> int:
    """How many of the contexts (usable tokens each, in order) give `tokens` tokens (all of them when they cannot)."""
    total = torch.cumsum(usable, 0)
    return min(int(torch.searchsorted(total, torch.tensor(tokens))) + 1, len(usable))


def select_contexts(
    contexts: torch.Tensor, special: torch.Tensor, config: SaeConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices into the corpus contexts: the held-out ones (sorted) and the training ones (in training order),
    enough of each for `heldout_tokens` and `tokens` harvested activations (the corpus permitting)."""
    g = torch.Generator().manual_seed(config.seed)
    order = torch.randperm(int(contexts.shape[0]), generator=g)
    usable = harvested_positions(contexts[order], special).sum(1)
    n_held = min(_enough(usable, config.heldout_tokens), len(order) - 1)
    n_train = _enough(usable[n_held:], config.tokens)
    return order[:n_held].sort().values, order[n_held : n_held + n_train]


def prepare_tokens(lm: LanguageModel, config: SaeConfig, folder: Path) -> dict[str, Any]:
    """Write tokens.safetensors (the contexts the SAE uses, in corpus order) and the harvest plan; returns it."""
    contexts = corpus_contexts(lm.tokenizer, config.corpus, config.context)
    held, train = select_contexts(contexts, special_ids(lm.tokenizer), config)
    used = torch.cat([held, train]).sort().values
    position = torch.full((int(contexts.shape[0]),), -1, dtype=torch.int64)
    position[used] = torch.arange(len(used))
    heldout = torch.zeros(len(used), dtype=torch.bool)
    heldout[position[held]] = True
    write_tokens(folder, contexts[used], heldout)
    plan = {
        "heldout": position[held].tolist(),
        "train": position[train].tolist(),
        "done": {"heldout": 0, "train": 0},
        "complete": False,
    }
    atomic_write_json(folder / STATE, plan)
    return plan


def read_plan(folder: Path) -> dict[str, Any] | None:
    try:
        plan = json.loads((folder / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return plan if isinstance(plan, dict) and (folder / TOKENS).is_file() else None


def special_ids(tokenizer: Any) -> torch.Tensor:
    return torch.tensor(sorted(set(getattr(tokenizer, "all_special_ids", []) or [])), dtype=torch.int64)


def harvested_positions(ids: torch.Tensor, special: torch.Tensor) -> torch.Tensor:
    """(batch, tokens) bool: the activations an SAE reads and replaces. Position 0 and the special tokens (the
    separators between texts) are left out, as SAELens's `exclude_special_tokens` does: they are attention sinks
    whose activations are hundreds of times larger (SmolLM2 layer 15: norm ~17,000 at an end-of-text token in
    position 1, ~170 at a word), and a few of them would dominate the reconstruction loss."""
    keep = ~torch.isin(ids, special)
    keep[:, 0] = False
    return keep


def site_activations(lm: LanguageModel, layer: int, site: str, ids: torch.Tensor) -> torch.Tensor:
    """(batch, tokens, d_model) activations of (layer, site) for `ids`, running the model only up to there."""
    kept: list[torch.Tensor] = []

    def capture(output: torch.Tensor) -> torch.Tensor:
        kept.append(output.detach())
        raise _Captured

    with torch.no_grad(), editing(lm, layer, site, capture), contextlib.suppress(_Captured):
        lm.model(input_ids=ids.to(lm.device), use_cache=False)
    return kept[0]


def _harvest_split(
    lm: LanguageModel,
    config: SaeConfig,
    folder: Path,
    plan: dict[str, Any],
    split: str,
    tokens: torch.Tensor,
    stop: threading.Event,
    report: Callable[[str, int, int], None],
) -> bool:
    """Harvest the contexts of `split` not yet on disk; False when `stop` was set (what was harvested is kept)."""
    rows: list[int] = plan[split]
    per_batch = max(1, HARVEST_BATCH_TOKENS // config.context)
    width = config.context
    done = int(plan["done"][split])
    n_chunk = len(chunk_files(folder, split))
    acts: list[torch.Tensor] = []
    index: list[torch.Tensor] = []
    buffered = 0
    pending = done
    special = special_ids(lm.tokenizer)

    def flush() -> None:
        nonlocal acts, index, buffered, n_chunk, done
        if buffered:
            write_chunk(folder, split, n_chunk, torch.cat(acts), torch.cat(index))
            n_chunk += 1
        done = pending
        plan["done"][split] = done
        atomic_write_json(folder / STATE, plan)
        acts, index, buffered = [], [], 0

    while pending < len(rows):
        batch = torch.tensor(rows[pending : pending + per_batch], dtype=torch.int64)
        ids = tokens[batch]
        keep = harvested_positions(ids, special)
        out = site_activations(lm, config.layer, config.site, ids)
        acts.append(out[keep.to(out.device)].float().cpu())
        flat = batch[:, None] * width + torch.arange(width)[None, :]
        index.append(flat[keep])
        buffered += int(keep.sum())
        pending += len(batch)
        report(split, pending * (width - 1), len(rows) * (width - 1))
        if buffered >= CHUNK_TOKENS:
            flush()
        if stop.is_set():
            flush()
            return pending >= len(rows)
    flush()
    return True


def harvest(
    lm: LanguageModel,
    config: SaeConfig,
    folder: Path,
    stop: threading.Event,
    on_progress: Callable[[HarvestProgress], None],
) -> bool:
    """Harvest the held-out then the training activations of `config` into `folder` (continuing a harvest that
    stopped); True when complete, False when `stop` ended it first."""
    from xaidash.models.language.sae.store import corpus_tokens

    plan = read_plan(folder) or prepare_tokens(lm, config, folder)
    if plan["complete"]:
        return True
    tokens, _ = corpus_tokens(folder.parent.parent, folder.name)
    start = time.monotonic()

    def report(split: str, done: int, total: int) -> None:
        on_progress(HarvestProgress(split, done, total, time.monotonic() - start))

    for split in ("heldout", "train"):
        if not _harvest_split(lm, config, folder, plan, split, tokens, stop, report):
            return False
    plan["complete"] = True
    harvested = len(plan["train"]) * (config.context - 1)
    plan["seconds"] = time.monotonic() - start
    atomic_write_json(folder / STATE, plan)
    return harvested > 0
